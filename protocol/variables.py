"""A kernel's variables: `ListVariables`, its result, and the records it carries.

The daemon inspects the kernel with a small snippet run silently (no execution
count, nothing in the user's history, no output in a notebook), bounded in time
and size. Everything here was produced by the user's objects (a `__repr__`, a
column name): clients show it as untrusted text.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ._base import CommandBase, WireStruct

__all__ = [
    "ListVariables",
    "VariableColumn",
    "VariableDetail",
    "VariableList",
    "VariableSection",
    "VariableSummary",
    "format_bytes",
]


def format_bytes(n: int) -> str:
    """`n` bytes for a reader (a variable's `memory`): "512 B", "1.5 KB", "2.0 GB"."""
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


class VariableColumn(WireStruct, frozen=True):
    """One column of a data frame."""

    name: str
    dtype: str


class VariableSummary(WireStruct, frozen=True):
    """One variable of the kernel, in a line."""

    name: str
    type: Annotated[
        str,
        Meta(description='Its type: "int", "pandas.DataFrame", "numpy.ndarray", "Point".'),
    ]
    shape: Annotated[
        list[int] | None,
        Meta(description="Frames and arrays (anything with a shape): their shape."),
    ] = None
    length: Annotated[int | None, Meta(description="len() of a container or string.")] = None
    dtype: Annotated[str | None, Meta(description="Arrays and series: the dtype.")] = None
    memory: Annotated[
        int | None,
        Meta(
            description=(
                "Bytes it takes: a frame's memory_usage (not deep), an array's nbytes, a "
                "polars estimated_size, else sys.getsizeof (the object alone)."
            )
        ),
    ] = None
    preview: Annotated[
        str | None,
        Meta(description="A short repr, cut (arrays: numpy's summary)."),
    ] = None
    columns: Annotated[
        list[VariableColumn],
        Meta(description="Data frames: the first columns with their dtypes."),
    ] = []
    columns_omitted: Annotated[
        int,
        Meta(description="Data frames: columns left out of `columns`."),
    ] = 0
    head: Annotated[
        str | None,
        Meta(description="Data frames and series: their first rows, as text."),
    ] = None
    error: Annotated[
        str | None,
        Meta(
            description=(
                'What could not be shown and why: "preview: raised ValueError", '
                '"preview: timed out after 1 s".'
            )
        ),
    ] = None


class VariableSection(WireStruct, frozen=True):
    """One part of a variable's description ("dtypes", "describe()", "head")."""

    title: str
    text: str


class VariableDetail(WireStruct, frozen=True):
    """One variable in depth."""

    summary: VariableSummary
    sections: list[VariableSection] = []


class VariableList(WireStruct, frozen=True):
    kernel_id: Annotated[
        str | None,
        Meta(description="The kernel inspected; absent when the task has no kernel yet."),
    ] = None
    status: Annotated[
        Literal["ok", "no_kernel", "busy", "timeout", "error"],
        Meta(
            description=(
                "ok; no_kernel (the task has run no code yet); busy (the kernel runs code: "
                "nothing was queued or interrupted, ask again later); timeout (the kernel did "
                "not answer in time; nothing was interrupted); error (see message)."
            )
        ),
    ] = "ok"
    message: str | None = None
    variables: list[VariableSummary] = []
    omitted: Annotated[int, Meta(description="Variables left out by the limits below.")] = 0
    truncated: Annotated[
        Literal["count", "size", "time"] | None,
        Meta(
            description=(
                "Why the list stops early: too many variables, too many bytes, or its time ran out."
            )
        ),
    ] = None


class ListVariables(CommandBase[VariableList], tag="ListVariables", frozen=True):
    """The variables of a task's kernel (the one its code runs in; no kernel is
    started for it) or of a kernel by id. Modules, functions, classes and
    IPython's own names are left out, and names starting with `_` unless
    `includePrivate`."""

    task_id: str | None = None
    kernel_id: str | None = None
    include_private: bool = False
