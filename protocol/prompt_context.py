"""What a prompt is about: the context a frontend sends with a user's message
(the active notebook, its active cell, the selection, a compact outline of the
notebook), carried by `StartNewTask` and `SendMessage` and kept on the user's
message in the task's history so that every client shows it.

Every field is bounded here, so that a client's oversized or malformed context is
refused when the command is decoded, with the path of the bad field. Everything
in a context is untrusted text (a cell can hold a prompt injection): the daemon
gives it to the model as data, delimited and escaped, and it widens no permission.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ._base import WireStruct

__all__ = [
    "MAX_CELL_HEAD_CHARS",
    "MAX_CELL_HEAD_LINES",
    "MAX_NOTEBOOK_PATH",
    "MAX_OUTLINE_CELLS",
    "MAX_OUTPUT_KINDS",
    "MAX_SELECTION_CHARS",
    "ActiveCell",
    "OutlineCell",
    "PromptContext",
]

#: The longest notebook path (characters).
MAX_NOTEBOOK_PATH = 1024
#: The longest selection (characters).
MAX_SELECTION_CHARS = 8000
#: Cells an outline describes at most (a longer notebook's outline is cut, `truncated`).
MAX_OUTLINE_CELLS = 200
#: An outline cell's head: its first lines, at most this many...
MAX_CELL_HEAD_LINES = 3
#: ...and at most this many characters.
MAX_CELL_HEAD_CHARS = 240
#: Output kinds listed per cell.
MAX_OUTPUT_KINDS = 16

_Id = Annotated[str, Meta(min_length=1, max_length=128)]


class ActiveCell(WireStruct, frozen=True):
    """The cell the user has active (JupyterLab's active cell)."""

    index: Annotated[int, Meta(ge=0, le=100_000, description="Its index, from 0.")]
    id: Annotated[_Id | None, Meta(description="Its nbformat cell id, when known.")] = None


class OutlineCell(WireStruct, frozen=True):
    """One cell of a notebook's outline."""

    cell_type: Literal["code", "markdown", "raw"]
    id: _Id | None = None
    head: Annotated[
        str,
        Meta(
            max_length=MAX_CELL_HEAD_CHARS,
            description=(
                f"The cell's first lines (at most {MAX_CELL_HEAD_LINES}, "
                f"{MAX_CELL_HEAD_CHARS} characters)."
            ),
        ),
    ] = ""
    lines: Annotated[
        int, Meta(ge=0, description="How many lines the cell's source has in all.")
    ] = 0
    execution_count: Annotated[int, Meta(ge=0)] | None = None
    output_kinds: Annotated[
        list[Annotated[str, Meta(min_length=1, max_length=64)]],
        Meta(
            max_length=MAX_OUTPUT_KINDS,
            description=(
                'Its outputs, by kind: "stream", "error", or the main mime type of a '
                'display ("image/png", "text/html", ...), in order, repeats merged.'
            ),
        ),
    ] = []


class PromptContext(WireStruct, frozen=True):
    """What the user's message is about, as the frontend saw it when it was sent.
    Every field is optional; a client sends what the user kept (the panel's
    context chips)."""

    notebook: Annotated[
        Annotated[str, Meta(min_length=1, max_length=MAX_NOTEBOOK_PATH)] | None,
        Meta(
            description=(
                "The active notebook's path, relative to the task's workspace or absolute "
                "inside it (the daemon keeps it relative, and refuses a path out of it)."
            )
        ),
    ] = None
    cell: Annotated[ActiveCell | None, Meta(description="The active cell.")] = None
    selection: Annotated[
        Annotated[str, Meta(max_length=MAX_SELECTION_CHARS)] | None,
        Meta(description="The text the user had selected in the active cell."),
    ] = None
    outline: Annotated[
        Annotated[list[OutlineCell], Meta(max_length=MAX_OUTLINE_CELLS)] | None,
        Meta(
            description=(
                "A compact outline of the notebook, cell by cell (the frontend's, of the "
                "notebook as it shows it; see `outlineFromFile`)."
            )
        ),
    ] = None
    truncated: Annotated[
        bool,
        Meta(description=f"The notebook has more cells than the outline's {MAX_OUTLINE_CELLS}."),
    ] = False
    outline_from_file: Annotated[
        bool,
        Meta(
            description=(
                "Have the daemon read the outline (and the active cell's id) from the "
                "notebook's file, inside the task's workspace: for a client that has only "
                "the path (the command line's --notebook). A cell index past the file's "
                "cells is then refused."
            )
        ),
    ] = False
    kernel_id: Annotated[
        _Id | None,
        Meta(
            description=(
                "The daemon's id (ListKernels) of the kernel the notebook uses: the task's code "
                "runs in it from this message on. Set by JupyterLab's server extension, which "
                "attaches the notebook's kernel itself; a value the browser sends is dropped."
            )
        ),
    ] = None
