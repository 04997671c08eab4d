"""The daemon's error forest (hdsp.daemon.errors): every root carries its wire code,
one function turns any exception into the error reply's body, and the forest drawn
in the module's docstring names every error in it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import hdsp.daemon
from hdsp.daemon import errors
from hdsp.daemon.config import (
    InvalidSecret,
    ProfileNotFound,
    SecretStoreFailed,
    SecretStoreUnavailable,
    SettingsError,
    SettingsInvalid,
)
from hdsp.daemon.config.settings import FieldError
from hdsp.daemon.errors import INTERNAL_MESSAGE, CommandError, HdspError, wire_error
from hdsp.daemon.kernels import KernelDead, KernelNotFound, KernelOverloaded, KernelStartFailed
from hdsp.daemon.server import DispatcherFull
from hdsp.daemon.store import StorageUnavailable, StoreCorrupt
from hdsp.protocol import ErrorCode, ErrorInfo


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (CommandError(ErrorCode.TASK_BUSY, "Task t1 is running."), ErrorCode.TASK_BUSY),
        (SettingsError("cannot write settings.json"), ErrorCode.INTERNAL),
        (InvalidSecret("bad name"), ErrorCode.INVALID_REQUEST),
        (SecretStoreUnavailable("no keyring"), ErrorCode.UNAVAILABLE),
        (SecretStoreFailed("locked"), ErrorCode.UNAVAILABLE),
        (ProfileNotFound("no profile 'x'"), ErrorCode.INVALID_REQUEST),
        (StoreCorrupt("damaged"), ErrorCode.STORAGE_UNAVAILABLE),
        (KernelNotFound("no kernel"), ErrorCode.KERNEL_NOT_FOUND),
        (KernelStartFailed("no such kernelspec"), ErrorCode.INVALID_REQUEST),
        (KernelDead("died"), ErrorCode.INVALID_STATE),
        (KernelOverloaded("too many"), ErrorCode.OVERLOADED),
    ],
)
def test_a_domain_error_answers_with_its_code_and_message(
    error: HdspError, code: ErrorCode
) -> None:
    assert wire_error(error) == ErrorInfo(code=code, message=str(error))


def test_details_go_with_the_code() -> None:
    invalid = SettingsInvalid([FieldError("retry.max_delay", "must be a number")], "Not saved")
    assert wire_error(invalid) == ErrorInfo(
        code=ErrorCode.INVALID_REQUEST,
        message="Not saved: retry.max_delay: must be a number.",
        details={"errors": [{"path": "retry.max_delay", "message": "must be a number"}]},
    )
    unavailable = StorageUnavailable("hdspd is read-only", details={"state": "readOnly"})
    assert wire_error(unavailable).details == {"state": "readOnly"}
    assert wire_error(unavailable).code is ErrorCode.STORAGE_UNAVAILABLE
    full = wire_error(DispatcherFull())
    assert full.code is ErrorCode.OVERLOADED
    assert "retry shortly" in full.message


def test_anything_else_is_a_bug_and_says_nothing_of_itself() -> None:
    # A foreign error's text may hold anything (a path, a key, a model's words).
    body = wire_error(KeyError("sk-secret-in-a-bug"))
    assert body == ErrorInfo(code=ErrorCode.INTERNAL, message=INTERNAL_MESSAGE)


def _every_daemon_module() -> None:
    for module in pkgutil.walk_packages(hdsp.daemon.__path__, "hdsp.daemon."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def test_the_drawn_forest_names_every_error_in_it() -> None:
    _every_daemon_module()
    doc = errors.__doc__ or ""
    ours = {c for c in _subclasses(HdspError) if c.__module__.startswith("hdsp.daemon.")}
    assert len(ours) >= 15
    missing = sorted(c.__qualname__ for c in ours if f" {c.__qualname__} " not in doc)
    assert not missing, f"draw these in hdsp.daemon.errors' docstring: {missing}"
