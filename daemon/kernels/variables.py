"""A kernel's variables, read with a small snippet run silently in it.

The snippet is :mod:`.variable_probe`'s source, sent whole: the kernel's Python
is the user's, where hdsp is not installed. What it is asked (a variable's name,
the limits) travels as data: JSON, base64-encoded, so nothing a model or a
client names can become code; a name must be a Python identifier besides. The
code that runs is one expression statement whose value is None (so IPython's
`_` is not touched) and which binds no name in the user's namespace; the
execution is Jupyter's silent one (no execution count, no history, no
execute_input, no output in a notebook).

Bounded: inside the kernel, per object and in total (see the probe); outside,
`answer_seconds` for the kernel to answer at all. A kernel that runs code (the
agent's, or a cell the user runs in Lab) is not waited for: the answer says it
is busy. Nothing is ever interrupted. The probe's reply is untrusted (the
user's objects made it): it is decoded into the wire types, size-checked first.
"""

from __future__ import annotations

import base64
import functools
import json
import keyword
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import msgspec

from hdsp.protocol import (
    ExecutionResult,
    VariableDetail,
    VariableList,
    VariableSection,
    VariableSummary,
)

from .errors import KernelBusy, KernelError

__all__ = [
    "InspectionLimits",
    "RunSilently",
    "VariableInspection",
    "describe_variable",
    "is_variable_name",
    "list_variables",
    "probe_code",
]

#: Runs code silently in the kernel: (code, time limit) → its result.
RunSilently = Callable[[str, float], Awaitable[ExecutionResult]]


@dataclass(frozen=True)
class InspectionLimits:
    max_variables: int = 200
    preview_chars: int = 200
    max_columns: int = 50
    #: The reply's size, in bytes of JSON.
    max_bytes: int = 256 * 1024
    #: What one object may take (its repr, its memory usage), inside the kernel.
    object_seconds: float = 1.0
    #: What the whole inspection may take inside the kernel.
    total_seconds: float = 5.0
    #: How long the daemon waits for the kernel's answer.
    answer_seconds: float = 10.0


class _Reply(msgspec.Struct, rename="camel"):
    status: Literal["ok", "missing", "error"]
    message: str | None = None
    variables: list[VariableSummary] = []
    omitted: int = 0
    truncated: Literal["count", "size", "time"] | None = None
    detail: _Detail | None = None


class _Detail(VariableSummary, frozen=True):
    sections: list[VariableSection] = []


_decoder = msgspec.json.Decoder(_Reply)


@dataclass(frozen=True)
class VariableInspection:
    """What one inspection gave: a list, or one variable's detail, or why not."""

    status: Literal["ok", "missing", "busy", "timeout", "error"]
    message: str | None = None
    listing: VariableList | None = None
    detail: VariableDetail | None = None


def is_variable_name(name: str) -> bool:
    """A Python identifier that is not a keyword: a name the namespace may hold."""
    return name.isidentifier() and not keyword.iskeyword(name)


@functools.cache
def _probe_source() -> str:
    return resources.files(__package__).joinpath("variable_probe.py").read_text("utf-8")


def probe_code(request: dict[str, object]) -> str:
    """The code that runs the probe with `request`: the probe's source and the
    request, both base64 (nothing in them can close a string literal), run by
    one expression statement in a namespace of their own."""
    encoded = base64.b64encode(json.dumps(request).encode("utf-8")).decode("ascii")
    source = f"{_probe_source()}\nmain({encoded!r})\n"
    payload = base64.b64encode(source.encode("utf-8")).decode("ascii")
    return (
        "__import__('builtins').exec(__import__('base64').b64decode("
        f"'{payload}').decode('utf-8'), {{'__name__': '__hdsp_probe__'}})"
    )


async def _inspect(
    run: RunSilently, request: dict[str, object], limits: InspectionLimits
) -> _Reply | VariableInspection:
    marker = f"@@hdsp-{secrets.token_hex(8)}@@"
    code = probe_code({**request, "marker": marker, **_limits(limits)})
    try:
        result = await run(code, limits.answer_seconds)
    except KernelBusy:
        return VariableInspection(
            status="busy",
            message="The kernel is running code; its variables are listed once it is done.",
        )
    except KernelError as exc:
        return VariableInspection(status="error", message=exc.message)
    if result.status == "timeout":
        return VariableInspection(
            status="timeout",
            message=(
                f"The kernel did not answer within {limits.answer_seconds:g} s (it may be "
                "running code started elsewhere); nothing was interrupted."
            ),
        )
    text = "".join(
        o.text or "" for o in result.outputs if o.output_type == "stream" and o.name == "stdout"
    )
    start = text.find(marker)
    end = text.find(marker, start + len(marker)) if start >= 0 else -1
    if result.status != "ok" or start < 0 or end < 0:
        why = {"ok": "gave no answer"}.get(result.status, f"ended {result.status}")
        return VariableInspection(status="error", message=f"The inspection {why}.")
    body = text[start + len(marker) : end]
    if len(body) > limits.max_bytes * 2:
        return VariableInspection(status="error", message="The inspection's answer is too big.")
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError as exc:
        return VariableInspection(
            status="error", message=f"The inspection's answer is unreadable ({exc})."
        )


def _limits(limits: InspectionLimits) -> dict[str, object]:
    return {
        "maxVariables": limits.max_variables,
        "previewChars": limits.preview_chars,
        "maxColumns": limits.max_columns,
        "maxBytes": limits.max_bytes,
        "objectSeconds": limits.object_seconds,
        "totalSeconds": limits.total_seconds,
    }


async def list_variables(
    run: RunSilently,
    *,
    include_private: bool = False,
    limits: InspectionLimits | None = None,
) -> VariableInspection:
    """The kernel's variables, as the probe sees them."""
    limits = limits or InspectionLimits()
    reply = await _inspect(run, {"mode": "list", "private": include_private}, limits)
    if isinstance(reply, VariableInspection):
        return reply
    if reply.status != "ok":
        return VariableInspection(status="error", message=reply.message or "The inspection failed.")
    variables = reply.variables[: limits.max_variables]
    listing = VariableList(
        status="ok",
        variables=variables,
        omitted=max(reply.omitted, 0) + len(reply.variables) - len(variables),
        truncated=reply.truncated,
    )
    return VariableInspection(status="ok", listing=listing)


async def describe_variable(
    run: RunSilently, name: str, *, limits: InspectionLimits | None = None
) -> VariableInspection:
    """One variable in depth. `name` must be an identifier (checked here too)."""
    if not is_variable_name(name):
        return VariableInspection(
            status="error", message=f"{name!r} is not a variable name (a Python identifier)."
        )
    limits = limits or InspectionLimits()
    reply = await _inspect(run, {"mode": "describe", "name": name}, limits)
    if isinstance(reply, VariableInspection):
        return reply
    if reply.status == "missing":
        return VariableInspection(status="missing", message=f"The kernel has no variable {name}.")
    if reply.status != "ok" or reply.detail is None:
        return VariableInspection(status="error", message=reply.message or "The inspection failed.")
    summary = msgspec.convert(msgspec.to_builtins(reply.detail), VariableSummary)
    detail = VariableDetail(summary=summary, sections=reply.detail.sections)
    return VariableInspection(status="ok", detail=detail)
