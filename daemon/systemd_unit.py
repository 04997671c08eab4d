"""Install hdspd as a systemd user service (``hdspd install-service``).

The unit ships inside the package (``hdsp/daemon/hdspd.service``) so that an
installed wheel can write it without the source tree; its ``ExecStart`` holds a
placeholder that becomes the absolute path of the ``hdspd`` executable of this
installation. The file goes where ``systemctl --user`` looks for units the user
owns: ``$XDG_CONFIG_HOME/systemd/user`` (``~/.config/systemd/user``).

Errors: every failure is a :class:`ServiceInstallError` whose message says what to
do next; operating-system errors are translated at this boundary.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import sysconfig
from importlib import resources
from pathlib import Path
from typing import Final, Literal, overload

import platformdirs

from .atomic_write import write_atomically

__all__ = [
    "ENABLE_COMMAND",
    "PLACEHOLDER",
    "UNIT_NAME",
    "ServiceInstallError",
    "default_unit_dir",
    "find_hdspd",
    "install_service",
    "installed_message",
    "unit_text",
]

#: The file name of the unit, and so the name systemctl knows the service by.
UNIT_NAME: Final = "hdspd.service"
#: Stands for the hdspd executable in the packaged unit.
PLACEHOLDER: Final = "@HDSPD@"
#: What the user runs after the unit is written.
ENABLE_COMMAND: Final = "systemctl --user daemon-reload && systemctl --user enable --now hdspd"

_PRINT_HINT: Final = "`hdspd install-service --print` shows the unit to install by hand"


class ServiceInstallError(Exception):
    """The unit could not be produced or written; the message says what to do."""


def _exec_start_path(hdspd_path: str) -> str:
    """Spell ``hdspd_path`` as the executable of a systemd ``ExecStart=`` line."""
    if not os.path.isabs(hdspd_path):
        raise ServiceInstallError(
            f"the hdspd path {hdspd_path!r} is not absolute; systemd needs the full path "
            "of the executable (for example the output of `command -v hdspd`)"
        )
    awkward = sorted({ch for ch in hdspd_path if ch in "\"'\\$" or not ch.isprintable()})
    if awkward:
        # Quotes, backslashes and `$` have meanings of their own in ExecStart; control
        # characters (a newline) would even add lines to the unit.
        raise ServiceInstallError(
            f"the hdspd path {hdspd_path!r} contains {', '.join(map(repr, awkward))}, which "
            "systemd command lines would interpret; install hdsp under a plainer path, "
            f"or write the unit by hand ({_PRINT_HINT})"
        )
    # `%` starts a systemd specifier (%h, %U...); `%%` is a literal one.
    spelled = hdspd_path.replace("%", "%%")
    if any(ch.isspace() for ch in spelled):
        spelled = f'"{spelled}"'
    return spelled


def unit_text(hdspd_path: str) -> str:
    """Return the unit that runs the hdspd executable at ``hdspd_path``."""
    try:
        template = resources.files("hdsp.daemon").joinpath(UNIT_NAME).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise ServiceInstallError(
            f"the packaged unit hdsp/daemon/{UNIT_NAME} is missing, so this hdsp "
            "installation is broken; reinstall hdsp (`pip install --force-reinstall hdsp`)"
        ) from exc
    if template.count(PLACEHOLDER) != 1:
        raise ServiceInstallError(
            f"the packaged unit hdsp/daemon/{UNIT_NAME} has no single {PLACEHOLDER} "
            "placeholder for the executable; reinstall hdsp"
        )
    return template.replace(PLACEHOLDER, _exec_start_path(hdspd_path))


def _is_executable_file(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_hdspd() -> str:
    """Return the absolute path of the hdspd executable of this installation.

    In order: the program being run, if it is ``hdspd``; the scripts directory of the
    environment this package is installed in (a virtualenv, pipx, the system); the
    user scripts directory (``pip install --user``); then ``$PATH``.
    """
    candidates: list[Path] = []
    if sys.argv and Path(sys.argv[0]).name == "hdspd":
        candidates.append(Path(sys.argv[0]))
    candidates.append(Path(sysconfig.get_path("scripts")) / "hdspd")
    with contextlib.suppress(KeyError):
        user_scheme = sysconfig.get_preferred_scheme("user")
        candidates.append(Path(sysconfig.get_path("scripts", user_scheme)) / "hdspd")
    on_path = shutil.which("hdspd")
    if on_path is not None:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if _is_executable_file(candidate):
            return str(candidate.absolute())
    raise ServiceInstallError(
        "could not find the hdspd executable of this installation; pass its absolute "
        "path explicitly, or make sure `command -v hdspd` finds it"
    )


def default_unit_dir() -> Path:
    """Return the directory of the user's own systemd units (``~/.config/systemd/user``)."""
    if not sys.platform.startswith("linux"):
        raise ServiceInstallError(
            f"systemd user services exist only on Linux, not on {sys.platform}; run "
            "hdspd under this system's service manager instead (it needs no arguments)"
        )
    return platformdirs.user_config_path() / "systemd" / "user"


def installed_message(path: Path) -> str:
    """Return what to tell the user once the unit is at ``path``: the next step."""
    return (
        f"Installed {path}\n"
        f"Start hdspd now and at every login with:\n"
        f"    {ENABLE_COMMAND}\n"
        f"Logs: journalctl --user -u hdspd"
    )


@overload
def install_service(
    force: bool = ...,
    *,
    print_only: Literal[True],
    unit_dir: Path | None = ...,
    hdspd_path: str | None = ...,
) -> str: ...


@overload
def install_service(
    force: bool = ...,
    print_only: Literal[False] = ...,
    unit_dir: Path | None = ...,
    hdspd_path: str | None = ...,
) -> Path: ...


@overload
def install_service(
    force: bool = ...,
    print_only: bool = ...,
    unit_dir: Path | None = ...,
    hdspd_path: str | None = ...,
) -> Path | str: ...


def install_service(
    force: bool = False,
    print_only: bool = False,
    unit_dir: Path | None = None,
    hdspd_path: str | None = None,
) -> Path | str:
    """Write the hdspd user unit and return its path, or return its text.

    Args:
        force: replace an existing unit that differs from this one (a unit that is
            already identical is left as it is, without ``force``).
        print_only: write nothing; return the unit's text.
        unit_dir: where to write instead of :func:`default_unit_dir` (tests).
        hdspd_path: the executable to run instead of :func:`find_hdspd`'s answer.

    Raises:
        ServiceInstallError: with what to do next, when the executable cannot be
            found, a different unit exists and ``force`` is false, or writing fails.
    """
    text = unit_text(hdspd_path if hdspd_path is not None else find_hdspd())
    if print_only:
        return text
    directory = unit_dir if unit_dir is not None else default_unit_dir()
    target = directory / UNIT_NAME
    try:
        existing = target.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet
        existing = None
    except (OSError, UnicodeDecodeError) as exc:
        if not force:
            raise ServiceInstallError(
                f"could not read the existing {target} ({exc}); move it away, or rerun "
                "with --force to replace it"
            ) from exc
        existing = ""
    if existing == text:
        return target
    if existing is not None and not force:
        raise ServiceInstallError(
            f"{target} already exists and differs from the unit this hdspd would install "
            "(another installation of hdsp, or edited by hand). Compare it with "
            "`hdspd install-service --print`, then rerun with --force to replace it."
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(target, text.encode(), mode=0o644)
    except OSError as exc:
        raise ServiceInstallError(
            f"could not write {target}: {exc.strerror or exc}. Check that you own "
            f"{directory}, or install the unit by hand ({_PRINT_HINT})"
        ) from exc
    return target
