"""Notebook tools: read a notebook's cells, insert, edit and delete cells, and run
a cell in the task's kernel with its outputs written back.

Safety rules, the same for every tool that writes:

- Notebooks are opened, written and created through `Workspace`, as the file
  tools' files are: `..`, absolute paths and symlinks that lead out of the
  workspace are refused, race-free, and `.hdspignore` hides the same paths. Each
  writing tool names its notebook in `written_paths`, so the approval policy asks
  a person before a write to a protected path (`.git/`, `.hdsp/`, the user's
  patterns), whatever the auto-approval switches say.
- A write is atomic (a temporary file in the same folder, fsync, rename) and the
  notebook must validate against nbformat's schema first, so a reader never sees
  half a notebook and the agent never leaves one JupyterLab cannot open. A new
  notebook gets the mode a new file gets (0o666 less the umask).
- A notebook is changed only as the task last saw it: the tools remember the
  SHA-256 of the bytes each task last read or wrote (and of each cell's source),
  and a notebook whose cells changed on disk since (by a person, say) is not
  overwritten; the model is told to read it again.

Where the notebook is open in JupyterLab (a document host holds it, see
`notebook_hosts`), the tools read and change the open document instead of the
file (`live_notebook`): every view shows the change at once, a run's outputs
stream into the cell, nothing writes the file behind Lab's back (saving stays the
user's), and a cell the user changed since the agent read it is a conflict the
model is told about. When no host holds it, or the host does not answer, the file
is used as before.

The parts: `notebook_files` (the notebook on disk: locating, parsing, the guarded
write), `notebook_tool` (what each task saw, and the bases the tools share),
`notebook_reading` (read_notebook), `notebook_editing` (insert, edit, delete and
move a cell) and `notebook_running` (run_cell). This module gathers the tools.
"""

from __future__ import annotations

from .base import Tool
from .notebook_editing import DeleteCell, EditCell, InsertCell, MoveCell
from .notebook_files import notebook_output
from .notebook_hosts import NotebookHosts
from .notebook_reading import ReadNotebook
from .notebook_running import RunCell
from .notebook_tool import NotebookTracker

__all__ = [
    "DeleteCell",
    "EditCell",
    "InsertCell",
    "MoveCell",
    "NotebookTracker",
    "ReadNotebook",
    "RunCell",
    "notebook_output",
    "notebook_tools",
]


def notebook_tools(
    tracker: NotebookTracker | None = None, *, documents: NotebookHosts | None = None
) -> list[Tool]:
    """The notebook tools, sharing one tracker of what each task has read; they
    edit the notebooks `documents` holds open where they are open."""
    tracker = tracker if tracker is not None else NotebookTracker()
    return [
        ReadNotebook(tracker, documents),
        InsertCell(tracker, documents),
        EditCell(tracker, documents),
        DeleteCell(tracker, documents),
        MoveCell(tracker, documents),
        RunCell(tracker, documents),
    ]
