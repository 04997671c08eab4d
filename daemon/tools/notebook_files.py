"""Notebooks on disk, as the notebook tools read and write them: a notebook the
model named, located by the workspace's rules; its bytes read and parsed as
nbformat 4.5 (every cell with an id); a new cell; a kernel output as a notebook
keeps it; and the guarded atomic write (see `notebook_tools` for the rules).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hdsp.protocol import KernelOutput

from .base import ToolError
from .live_notebook import CellSeen, source_digest
from .workspace import Located, Workspace

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = [
    "ChangedOnDisk",
    "NotebookPath",
    "cells_seen",
    "content_digest",
    "host_path",
    "locate_notebook",
    "nbf",
    "nbv4",
    "new_cell",
    "notebook_output",
    "parse_notebook",
    "read_notebook_file",
    "unused_cell_id",
    "write_notebook_file",
]


class _Module:
    """A module imported when one of its attributes is first used: importing
    nbformat takes a fiftieth of a second, which the daemon's start-up does not
    spend until a task touches a notebook."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


# nbformat's functions carry no annotations; through these, mypy --strict takes
# them as returning Any instead of refusing the calls.
nbf: Any = _Module("nbformat")
nbv4: Any = _Module("nbformat.v4")
_rwbase: Any = _Module("nbformat.v4.rwbase")


@dataclass(frozen=True)
class NotebookPath:
    """A notebook the model named: its path as given (every open walks it again)
    and where it led (the key of what the task has seen, the name shown)."""

    given: str
    located: Located

    @property
    def key(self) -> str:
        return self.located.relative

    @property
    def shown(self) -> str:
        return self.located.shown


def locate_notebook(workspace: Path, path: str, *, write: bool) -> NotebookPath:
    """`path` (relative to the workspace, or absolute inside it), located by the
    workspace's rules (no way out, .hdspignore respected); a ToolError when it
    leads outside or is not a notebook. Blocking: call it in a worker thread."""
    if not path.strip():
        raise ToolError("The path is empty; give a notebook path relative to the workspace.")
    located = Workspace(workspace).locate(path, write=write)
    if not located.relative.endswith(".ipynb"):
        raise ToolError(f"{path!r} is not a notebook (.ipynb).")
    return NotebookPath(given=path, located=located)


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def host_path(workspace: Path, relative: str) -> str:
    """The notebook's absolute path as hosts declare it (symlinks resolved)."""
    return os.path.join(os.path.realpath(workspace), relative)


def cells_seen(nb: NotebookNode) -> list[CellSeen]:
    return [(str(c.get("id")), source_digest(str(c.source))) for c in nb.cells]


def parse_notebook(data: bytes, shown: str) -> NotebookNode:
    """Read a notebook as nbformat 4.5 (cells with ids), whatever minor version
    it was written in."""
    try:
        text = data.decode("utf-8")
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        nb: NotebookNode
        if raw.get("nbformat") == 4:
            # What nbformat.reads does, minus its warning about missing cell ids
            # (added below): multi-line strings stored as lists become strings.
            nb = _rwbase.rejoin_lines(nbf.from_dict(raw))
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                nb = nbf.reads(text, as_version=4)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"{shown} is not a readable notebook: {exc}") from None
    if "cells" not in nb or "metadata" not in nb:
        raise ToolError(f"{shown} is not a notebook: it has no cells or metadata.")
    if nb.get("nbformat_minor", 0) < 5:
        nb["nbformat_minor"] = 5
    ids = {c.get("id") for c in nb.cells}
    for cell in nb.cells:
        if not cell.get("id"):
            cell["id"] = unused_cell_id(ids)
    return nb


def new_cell(kind: str, source: str) -> Any:
    """A new notebook cell of `kind` (code, markdown or raw) with `source`."""
    make = {
        "code": nbv4.new_code_cell,
        "markdown": nbv4.new_markdown_cell,
        "raw": nbv4.new_raw_cell,
    }[kind]
    return make(source)


def unused_cell_id(taken: set[Any]) -> str:
    while True:
        candidate = uuid.uuid4().hex[:8]
        if candidate not in taken:
            taken.add(candidate)
            return candidate


def read_notebook_file(workspace: Path, given: str) -> tuple[bytes, str] | None:
    _, data = Workspace(workspace).read_bytes(given, write=True)
    if data is None:
        return None
    return data, content_digest(data)


def write_notebook_file(workspace: Path, given: str, data: bytes, expected: str | None) -> str:
    """Replace the notebook at `given` with `data` if it still holds what hashed to
    `expected` (None: if it does not exist). Returns the new digest."""

    def check(current: bytes | None) -> None:
        if (content_digest(current) if current is not None else None) != expected:
            raise ChangedOnDisk

    Workspace(workspace).write_bytes(given, data, check=check, create_parents=False)
    return content_digest(data)


class ChangedOnDisk(Exception):
    pass


def notebook_output(out: KernelOutput) -> NotebookNode:
    """A kernel output as a notebook keeps it (nbformat v4)."""
    node: NotebookNode
    match out.output_type:
        case "stream":
            node = nbv4.new_output("stream", name=out.name or "stdout", text=out.text or "")
        case "execute_result":
            node = nbv4.new_output(
                "execute_result",
                data=out.data or {},
                metadata=out.metadata or {},
                execution_count=out.execution_count,
            )
        case "error":
            node = nbv4.new_output(
                "error",
                ename=out.ename or "",
                evalue=out.evalue or "",
                traceback=list(out.traceback or []),
            )
        case _:
            node = nbv4.new_output("display_data", data=out.data or {}, metadata=out.metadata or {})
    return node
