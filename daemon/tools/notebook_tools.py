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
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
import anyio.to_thread
import msgspec

from hdsp.daemon.conversation import TextBlock
from hdsp.protocol import DocumentEdit, ExecutionResult, KernelOutput

from .base import Tool, ToolCategory, ToolContext, ToolError, ToolResult
from .kernel_tools import run_code
from .live_notebook import (
    HOST_ANSWER_LIMIT,
    CellSeen,
    HostGone,
    LiveNotebook,
    OutputPusher,
    agent_marker,
    new_cell_id,
    source_digest,
)
from .notebook_displays import NotebookDisplays
from .notebook_hosts import NotebookHosts
from .workspace import Located, Workspace

if TYPE_CHECKING:
    from nbformat import NotebookNode

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
_nbf: Any = _Module("nbformat")
_v4: Any = _Module("nbformat.v4")
_rwbase: Any = _Module("nbformat.v4.rwbase")

#: Characters of a cell's source shown by read_notebook before it is cut.
_SOURCE_LIMIT = 10_000
#: Characters of an output shown in read_notebook's outline.
_OUTPUT_PREVIEW = 200


class NotebookTracker:
    """What each task last read or wrote of each notebook: the file's content
    hash (None when it last read the open document, not the file) and its cells
    (id and source hash each, in order)."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._seen: OrderedDict[tuple[str, str], str | None] = OrderedDict()
        self._cells: dict[tuple[str, str], list[CellSeen]] = {}
        self._max = max_entries

    def seen(self, task_id: str, path: str) -> str | None:
        return self._seen.get((task_id, path))

    def cells(self, task_id: str, path: str) -> list[CellSeen] | None:
        return self._cells.get((task_id, path))

    def remember(
        self,
        task_id: str,
        path: str,
        digest: str | None,
        cells: list[CellSeen] | None = None,
    ) -> None:
        key = (task_id, path)
        self._seen[key] = digest
        self._seen.move_to_end(key)
        if cells is not None:
            self._cells[key] = cells
        else:
            self._cells.pop(key, None)
        while len(self._seen) > self._max:
            old, _ = self._seen.popitem(last=False)
            self._cells.pop(old, None)


@dataclass(frozen=True)
class _Notebook:
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


def _locate(workspace: Path, path: str, *, write: bool) -> _Notebook:
    """`path` (relative to the workspace, or absolute inside it), located by the
    workspace's rules (no way out, .hdspignore respected); a ToolError when it
    leads outside or is not a notebook. Blocking: call it in a worker thread."""
    if not path.strip():
        raise ToolError("The path is empty; give a notebook path relative to the workspace.")
    located = Workspace(workspace).locate(path, write=write)
    if not located.relative.endswith(".ipynb"):
        raise ToolError(f"{path!r} is not a notebook (.ipynb).")
    return _Notebook(given=path, located=located)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _absolute(workspace: Path, relative: str) -> str:
    """The notebook's absolute path as hosts declare it (symlinks resolved)."""
    return os.path.join(os.path.realpath(workspace), relative)


def _cells_seen(nb: NotebookNode) -> list[CellSeen]:
    return [(str(c.get("id")), source_digest(str(c.source))) for c in nb.cells]


def _parse(data: bytes, shown: str) -> NotebookNode:
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
            nb = _rwbase.rejoin_lines(_nbf.from_dict(raw))
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                nb = _nbf.reads(text, as_version=4)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"{shown} is not a readable notebook: {exc}") from None
    if "cells" not in nb or "metadata" not in nb:
        raise ToolError(f"{shown} is not a notebook: it has no cells or metadata.")
    if nb.get("nbformat_minor", 0) < 5:
        nb["nbformat_minor"] = 5
    ids = {c.get("id") for c in nb.cells}
    for cell in nb.cells:
        if not cell.get("id"):
            cell["id"] = _new_id(ids)
    return nb


def _new_cell(kind: str, source: str) -> Any:
    """A new notebook cell of `kind` (code, markdown or raw) with `source`."""
    make = {
        "code": _v4.new_code_cell,
        "markdown": _v4.new_markdown_cell,
        "raw": _v4.new_raw_cell,
    }[kind]
    return make(source)


def _new_id(taken: set[Any]) -> str:
    while True:
        candidate = uuid.uuid4().hex[:8]
        if candidate not in taken:
            taken.add(candidate)
            return candidate


def _read(workspace: Path, given: str) -> tuple[bytes, str] | None:
    _, data = Workspace(workspace).read_bytes(given, write=True)
    if data is None:
        return None
    return data, _digest(data)


def _write_atomic(workspace: Path, given: str, data: bytes, expected: str | None) -> str:
    """Replace the notebook at `given` with `data` if it still holds what hashed to
    `expected` (None: if it does not exist). Returns the new digest."""

    def check(current: bytes | None) -> None:
        if (_digest(current) if current is not None else None) != expected:
            raise _ChangedOnDisk

    Workspace(workspace).write_bytes(given, data, check=check, create_parents=False)
    return _digest(data)


class _ChangedOnDisk(Exception):
    pass


def notebook_output(out: KernelOutput) -> NotebookNode:
    """A kernel output as a notebook keeps it (nbformat v4)."""
    node: NotebookNode
    match out.output_type:
        case "stream":
            node = _v4.new_output("stream", name=out.name or "stdout", text=out.text or "")
        case "execute_result":
            node = _v4.new_output(
                "execute_result",
                data=out.data or {},
                metadata=out.metadata or {},
                execution_count=out.execution_count,
            )
        case "error":
            node = _v4.new_output(
                "error",
                ename=out.ename or "",
                evalue=out.evalue or "",
                traceback=list(out.traceback or []),
            )
        case _:
            node = _v4.new_output("display_data", data=out.data or {}, metadata=out.metadata or {})
    return node


class _NotebookTool(Tool):
    """The shared parts: the path rule, loading, and the guarded atomic save."""

    #: Whether the tool writes the notebook (.hdspignore'd paths refuse writes).
    writes: ClassVar[bool] = True

    def __init__(self, tracker: NotebookTracker, documents: NotebookHosts | None = None) -> None:
        self.tracker = tracker
        #: The notebooks open in JupyterLab: where this tool edits them live.
        self.documents = documents
        #: Seconds a document host has to answer one request.
        self.answer_limit = HOST_ANSWER_LIMIT

    async def _live(self, ctx: ToolContext, path: _Notebook) -> LiveNotebook | None:
        """The open document of `path`, when a host holds it."""
        if self.documents is None:
            return None
        absolute = await anyio.to_thread.run_sync(_absolute, ctx.workspace, path.key)
        host = self.documents.host_for(absolute)
        if host is None:
            return None
        return LiveNotebook(
            self.documents, host, absolute, path.shown, ctx.task_id, self.answer_limit
        )

    def _seen_live(self, ctx: ToolContext, path: _Notebook) -> list[CellSeen]:
        cells = self.tracker.cells(ctx.task_id, path.key)
        if cells is None:
            raise ToolError(f"Read {path.shown} with read_notebook before changing it.")
        return list(cells)

    def written_paths(self, args: Mapping[str, Any]) -> list[str]:
        return [str(args["path"])] if self.writes else []

    async def _path(self, ctx: ToolContext, args: Mapping[str, Any]) -> _Notebook:
        return await anyio.to_thread.run_sync(
            partial(_locate, ctx.workspace, str(args["path"]), write=self.writes)
        )

    async def _load(self, ctx: ToolContext, path: _Notebook, *, must_exist: bool = True) -> Any:
        found = await anyio.to_thread.run_sync(_read, ctx.workspace, path.given)
        if found is None and must_exist:
            raise ToolError(f"There is no notebook at {path.shown}.")
        return found

    async def _load_seen(self, ctx: ToolContext, path: _Notebook) -> tuple[NotebookNode, str]:
        """The notebook as the task last saw it; a ToolError if the task never read
        it or it changed on disk since."""
        data, digest = await self._load(ctx, path)
        seen = self.tracker.seen(ctx.task_id, path.key)
        cells = self.tracker.cells(ctx.task_id, path.key)
        rel = path.shown
        if seen is None and cells is None:
            raise ToolError(f"Read {rel} with read_notebook before changing it.")
        nb = _parse(data, rel)
        # Unchanged bytes, or (after reading the open document, or a save that
        # changed only outputs or metadata) the same cells as the task saw.
        if seen != digest and (cells is None or _cells_seen(nb) != cells):
            raise ToolError(
                f"{rel} changed on disk since you last read it (someone else edited it). "
                "Nothing was written. Call read_notebook to see its cells now, then make "
                "your change again."
            )
        return nb, digest

    async def _save(
        self, ctx: ToolContext, path: _Notebook, nb: NotebookNode, expected: str | None
    ) -> None:
        try:
            _nbf.validate(nb)
        except _nbf.ValidationError as exc:
            raise ToolError(
                f"The change would make an invalid notebook ({exc.message}); nothing was written."
            ) from None
        try:
            data = (_nbf.writes(nb) + "\n").encode("utf-8")
        except UnicodeEncodeError:
            # The file held a string that is not Unicode (a lone surrogate, written
            # as \udcff): keep it escaped, as it was, rather than fail.
            data = (_nbf.writes(nb, ensure_ascii=True) + "\n").encode("ascii")
        try:
            digest = await anyio.to_thread.run_sync(
                _write_atomic, ctx.workspace, path.given, data, expected
            )
        except _ChangedOnDisk:
            raise ToolError(
                f"{path.shown} changed on disk while the change was being made; "
                "nothing was written. Call read_notebook and try again."
            ) from None
        self.tracker.remember(ctx.task_id, path.key, digest, _cells_seen(nb))

    @staticmethod
    def _index(nb: NotebookNode, args: Mapping[str, Any]) -> int:
        index = int(args["index"])
        if not 0 <= index < len(nb.cells):
            raise ToolError(
                f"There is no cell {index}: the notebook has {len(nb.cells)} cells "
                f"(indexes 0 to {len(nb.cells) - 1})."
            )
        return index


#: What of a running cell's outputs is pushed into the open document as they come
#: (the final outputs go whole).
_LIVE_TEXT_LIMIT = 256 * 1024
_LIVE_OUTPUTS = 500


def _output_dict(out: KernelOutput) -> dict[str, Any]:
    """A kernel output as plain nbformat JSON, for the wire."""
    node: dict[str, Any] = json.loads(json.dumps(notebook_output(out)))
    return node


def _outline(outputs: list[Any]) -> list[str]:
    lines = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            text = str(out.get("text", ""))
            lines.append(
                f"  - {out.get('name', 'stdout')}: {text.count(chr(10)) or 1} line(s): "
                f"{_preview(text)}"
            )
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            plain = data.get("text/plain")
            shown = f": {_preview(str(plain))}" if plain is not None else ""
            lines.append(f"  - {kind} [{', '.join(sorted(data))}]{shown}")
        elif kind == "error":
            lines.append(f"  - error {out.get('ename')}: {_preview(str(out.get('evalue', '')))}")
        else:
            lines.append(f"  - {kind}")
    return lines


def _preview(text: str) -> str:
    text = text.strip().replace("\n", "\\n")
    return text if len(text) <= _OUTPUT_PREVIEW else text[:_OUTPUT_PREVIEW] + "..."


class ReadNotebook(_NotebookTool):
    name: ClassVar[str] = "read_notebook"
    description: ClassVar[str] = (
        "Read a Jupyter notebook (.ipynb) in the workspace: every cell with its index, "
        "type, source, and an outline of its outputs. Read a notebook before changing "
        "it; if it changes on disk afterwards, read it again."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Notebook path, relative to the workspace."}
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.READ
    writes: ClassVar[bool] = False

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        path = await self._path(ctx, args)
        live = await self._live(ctx, path)
        note = ""
        if live is not None:
            try:
                cells = await live.read()
            except HostGone as exc:
                note = f"\n({exc.reason}; this is the file on disk.)"
            else:
                self.tracker.remember(
                    ctx.task_id,
                    path.key,
                    None,
                    [(c.id, source_digest(c.source)) for c in cells],
                )
                head = (
                    f"{path.shown}: {len(cells)} cells, {live.where}: what the user sees "
                    "now, saved or not"
                )
                return ToolResult(content=[TextBlock(text=_render(head, cells))])
        data, digest = await self._load(ctx, path)
        nb = _parse(data, path.shown)
        self.tracker.remember(ctx.task_id, path.key, digest, _cells_seen(nb))
        kernel = nb.metadata.get("kernelspec", {}).get("name", "unknown")
        head = f"{path.shown}: {len(nb.cells)} cells, kernelspec {kernel}{note}"
        return ToolResult(content=[TextBlock(text=_render(head, nb.cells))])


def _render(head: str, cells: Sequence[Any]) -> str:
    """The listing read_notebook gives: every cell with its index, type, source
    (cut when long) and an outline of its outputs. `cells` are nbformat cells or
    DocumentCells."""
    lines = [head]
    for i, raw in enumerate(cells):
        cell: Mapping[str, Any] = raw if isinstance(raw, Mapping) else msgspec.to_builtins(raw)
        source = str(cell.get("source", ""))
        if len(source) > _SOURCE_LIMIT:
            source = (
                source[:_SOURCE_LIMIT] + f"\n[... {len(source) - _SOURCE_LIMIT:,} characters more]"
            )
        count = cell.get("execution_count", cell.get("executionCount"))
        kind = cell.get("cell_type", cell.get("cellType"))
        title = f"## Cell {i} [{kind}]" + (
            f" (execution_count {count})" if count is not None else ""
        )
        lines += ["", title, source]
        outputs = cell.get("outputs") or []
        if outputs:
            lines.append(f"Outputs ({len(outputs)}):")
            lines += _outline(outputs)
    return "\n".join(lines)


_CELL_TYPE = {"type": "string", "enum": ["code", "markdown", "raw"]}


class InsertCell(_NotebookTool):
    name: ClassVar[str] = "insert_cell"
    description: ClassVar[str] = (
        "Insert a cell into a notebook at an index (the cells from there move down), "
        "or at the end without an index. Creates the notebook if it does not exist."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "index": {"type": "integer", "minimum": 0},
            "source": {"type": "string"},
            "cell_type": _CELL_TYPE,
        },
        "required": ["path", "source"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        path = await self._path(ctx, args)
        live = await self._live(ctx, path)
        note = ""
        if live is not None:
            try:
                return await self._insert_live(ctx, path, live, args)
            except HostGone as exc:
                note = f" ({exc.reason}, so the file was changed instead)"
        found = await self._load(ctx, path, must_exist=False)
        expected: str | None
        if found is None:
            nb = _v4.new_notebook()
            nb.metadata["kernelspec"] = {
                "name": "python3",
                "display_name": "Python 3",
                "language": "python",
            }
            expected = None
            created = True
        else:
            nb, expected = await self._load_seen(ctx, path)
            created = False
        index = args.get("index", len(nb.cells))
        if not 0 <= int(index) <= len(nb.cells):
            raise ToolError(
                f"Index {index} is past the end: the notebook has {len(nb.cells)} cells "
                f"(insert at 0 to {len(nb.cells)})."
            )
        kind = args.get("cell_type", "code")
        cell = _new_cell(kind, str(args["source"]))
        cell["id"] = _new_id({c.get("id") for c in nb.cells})
        cell["metadata"]["hdsp"] = agent_marker(ctx.task_id)
        nb.cells.insert(int(index), cell)
        await self._save(ctx, path, nb, expected)
        what = "Created the notebook with" if created else "Inserted"
        return ToolResult.text(
            f"{what} a {kind} cell at index {index} of {path.shown} "
            f"(now {len(nb.cells)} cells){note}."
        )

    async def _insert_live(
        self, ctx: ToolContext, path: _Notebook, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        seen = self._seen_live(ctx, path)
        index = int(args.get("index", len(seen)))
        if not 0 <= index <= len(seen):
            raise ToolError(
                f"Index {index} is past the end: {path.shown} had {len(seen)} cells when you "
                f"last read it (insert at 0 to {len(seen)})."
            )
        kind = str(args.get("cell_type", "code"))
        source = str(args["source"])
        new_id = new_cell_id(seen)
        edit = DocumentEdit(
            op="insert",
            after_id=seen[index - 1][0] if index > 0 else None,
            new_id=new_id,
            cell_type=kind,
            source=source,
            marker=agent_marker(ctx.task_id),
        )
        answer = await live.send(edit)
        if answer.status == "conflict":
            raise ToolError(
                f"Conflict: cell {index - 1} of {path.shown}, after which the new cell was to "
                "go, was deleted in JupyterLab since you read it; nothing was inserted. Call "
                "read_notebook to see the notebook now."
            )
        seen.insert(index, (new_id, source_digest(source)))
        self.tracker.remember(ctx.task_id, path.key, None, seen)
        return ToolResult.text(
            f"Inserted a {kind} cell at index {index} of {path.shown}, {live.where} (the user "
            "sees it now; saving the file is theirs)."
        )


class EditCell(_NotebookTool):
    name: ClassVar[str] = "edit_cell"
    description: ClassVar[str] = (
        "Replace the source of a notebook cell (and optionally its type). A code "
        "cell's old outputs are cleared, since they no longer match its code."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "index": {"type": "integer", "minimum": 0},
            "source": {"type": "string"},
            "cell_type": _CELL_TYPE,
        },
        "required": ["path", "index", "source"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        path = await self._path(ctx, args)
        live = await self._live(ctx, path)
        note = ""
        if live is not None:
            try:
                return await self._edit_live(ctx, path, live, args)
            except HostGone as exc:
                note = f" ({exc.reason}, so the file was changed instead)"
        nb, expected = await self._load_seen(ctx, path)
        index = self._index(nb, args)
        old = nb.cells[index]
        kind = args.get("cell_type", old.cell_type)
        cell = _new_cell(kind, str(args["source"]))
        cell["id"] = old.get("id") or _new_id({c.get("id") for c in nb.cells})
        if old.get("metadata"):
            cell["metadata"] = old.metadata
        cell["metadata"]["hdsp"] = agent_marker(ctx.task_id)
        nb.cells[index] = cell
        await self._save(ctx, path, nb, expected)
        return ToolResult.text(f"Cell {index} of {path.shown} is now a {kind} cell{note}.")

    async def _edit_live(
        self, ctx: ToolContext, path: _Notebook, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        seen = self._seen_live(ctx, path)
        index = int(args["index"])
        cell_id, digest = live.target(seen, index)
        source = str(args["source"])
        kind = args.get("cell_type")
        edit = DocumentEdit(
            op="edit",
            cell_id=cell_id,
            expected_sha256=digest,
            source=source,
            cell_type=None if kind is None else str(kind),
            marker=agent_marker(ctx.task_id),
        )
        answer = await live.send(edit)
        if answer.status == "conflict":
            error = live.conflict(answer, index, seen)
            self.tracker.remember(ctx.task_id, path.key, None, seen)
            raise error
        seen[index] = (cell_id, source_digest(source))
        self.tracker.remember(ctx.task_id, path.key, None, seen)
        return ToolResult.text(
            f"Cell {index} of {path.shown} is changed, {live.where} (the user sees it now)."
        )


class DeleteCell(_NotebookTool):
    name: ClassVar[str] = "delete_cell"
    description: ClassVar[str] = "Delete a cell of a notebook (the cells after it move up)."
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "index": {"type": "integer", "minimum": 0},
        },
        "required": ["path", "index"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        path = await self._path(ctx, args)
        live = await self._live(ctx, path)
        note = ""
        if live is not None:
            try:
                return await self._delete_live(ctx, path, live, args)
            except HostGone as exc:
                note = f" ({exc.reason}, so the file was changed instead)"
        nb, expected = await self._load_seen(ctx, path)
        index = self._index(nb, args)
        del nb.cells[index]
        await self._save(ctx, path, nb, expected)
        return ToolResult.text(
            f"Deleted cell {index} of {path.shown} (now {len(nb.cells)} cells){note}."
        )

    async def _delete_live(
        self, ctx: ToolContext, path: _Notebook, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        seen = self._seen_live(ctx, path)
        index = int(args["index"])
        cell_id, digest = live.target(seen, index)
        answer = await live.send(DocumentEdit(op="delete", cell_id=cell_id, expected_sha256=digest))
        if answer.status == "conflict":
            error = live.conflict(answer, index, seen)
            self.tracker.remember(ctx.task_id, path.key, None, seen)
            raise error
        del seen[index]
        self.tracker.remember(ctx.task_id, path.key, None, seen)
        return ToolResult.text(f"Deleted cell {index} of {path.shown}, {live.where}.")


class MoveCell(_NotebookTool):
    name: ClassVar[str] = "move_cell"
    description: ClassVar[str] = (
        "Move a cell of a notebook to another index (`to_index` counts the cells as they "
        "are once the cell is taken out)."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "index": {"type": "integer", "minimum": 0},
            "to_index": {"type": "integer", "minimum": 0},
        },
        "required": ["path", "index", "to_index"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        path = await self._path(ctx, args)
        live = await self._live(ctx, path)
        note = ""
        if live is not None:
            try:
                return await self._move_live(ctx, path, live, args)
            except HostGone as exc:
                note = f" ({exc.reason}, so the file was changed instead)"
        nb, expected = await self._load_seen(ctx, path)
        index = self._index(nb, args)
        to = int(args["to_index"])
        if not 0 <= to < len(nb.cells):
            raise ToolError(f"to_index {to} is past the end (0 to {len(nb.cells) - 1}).")
        cell = nb.cells.pop(index)
        nb.cells.insert(to, cell)
        await self._save(ctx, path, nb, expected)
        return ToolResult.text(f"Moved cell {index} of {path.shown} to index {to}{note}.")

    async def _move_live(
        self, ctx: ToolContext, path: _Notebook, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        seen = self._seen_live(ctx, path)
        index = int(args["index"])
        cell_id, digest = live.target(seen, index)
        to = int(args["to_index"])
        if not 0 <= to < len(seen):
            raise ToolError(f"to_index {to} is past the end (0 to {len(seen) - 1}).")
        rest = seen[:index] + seen[index + 1 :]
        edit = DocumentEdit(
            op="move",
            cell_id=cell_id,
            expected_sha256=digest,
            after_id=rest[to - 1][0] if to > 0 else None,
        )
        answer = await live.send(edit)
        if answer.status == "conflict":
            error = live.conflict(answer, index, seen)
            self.tracker.remember(ctx.task_id, path.key, None, seen)
            raise error
        rest.insert(to, (cell_id, digest))
        self.tracker.remember(ctx.task_id, path.key, None, rest)
        return ToolResult.text(f"Moved cell {index} of {path.shown} to index {to}, {live.where}.")


class RunCell(_NotebookTool):
    name: ClassVar[str] = "run_cell"
    description: ClassVar[str] = (
        "Run a code cell of a notebook in your kernel (the same kernel as "
        "execute_code) and save its outputs and execution count into the notebook. "
        "You get the outputs as from execute_code."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "index": {"type": "integer", "minimum": 0},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 86400,
                "description": "Seconds before the code is interrupted (default 120).",
            },
        },
        "required": ["path", "index"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.EXECUTE

    def __init__(
        self,
        tracker: NotebookTracker,
        documents: NotebookHosts | None = None,
        *,
        text_limit: int = 20_000,
        max_images: int = 4,
        displays: NotebookDisplays | None = None,
    ) -> None:
        super().__init__(tracker, documents)
        self.text_limit = text_limit
        self.max_images = max_images
        #: Which outputs show each display id (updated from any cell, as in Jupyter).
        self.displays = displays if displays is not None else NotebookDisplays()

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        path = await self._path(ctx, args)
        live = await self._live(ctx, path)
        if live is not None:
            try:
                return await self._run_live(ctx, path, live, args)
            except HostGone:
                pass  # not run: the file's cell runs instead (its outputs go to the file)
        nb, digest = await self._load_seen(ctx, path)
        index = self._index(nb, args)
        cell = nb.cells[index]
        if cell.cell_type != "code":
            raise ToolError(f"Cell {index} is a {cell.cell_type} cell; only code cells run.")
        run = await run_code(ctx, str(cell.source), time_limit=args.get("timeout"))
        result = await run.model_content(text_limit=self.text_limit, max_images=self.max_images)
        note = await self._store_outputs(ctx, path, index, digest, run.result)
        first = result.content[0]
        assert isinstance(first, TextBlock)
        result.content[0] = TextBlock(text=f"{first.text}\n\n{note}")
        result.summary = f"{result.summary}\n{note}" if result.summary else note
        return result

    async def _run_live(
        self, ctx: ToolContext, path: _Notebook, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        """Run the open document's cell: its outputs stream into it as they come,
        and the final ones (with the execution count) are set when it is done."""
        seen = self._seen_live(ctx, path)
        index = int(args["index"])
        cell_id, digest = live.target(seen, index)
        answer = await live.send(DocumentEdit(op="run", cell_id=cell_id, expected_sha256=digest))
        if answer.status == "conflict":
            error = live.conflict(answer, index, seen)
            self.tracker.remember(ctx.task_id, path.key, None, seen)
            raise error
        cell = answer.cells[0] if answer.cells else None
        if cell is None or cell.id != cell_id:
            raise ToolError(f"JupyterLab did not give cell {index} of {path.shown} to run.")
        if cell.cell_type != "code":
            raise ToolError(f"Cell {index} is a {cell.cell_type} cell; only code cells run.")

        async def push(outputs: list[dict[str, Any]], count: int | None, running: bool) -> None:
            edit = DocumentEdit(
                op="outputs",
                cell_id=cell_id,
                outputs=outputs,
                execution_count=count,
                running=running,
            )
            await live.send(edit)

        # While it runs, the cell shows as running ([*]) with no execution count, as
        # a cell the user runs does (JupyterLab takes a count as the end of a run).
        pusher = OutputPusher(partial(push, count=None, running=True))

        def streamed(ex: Any) -> None:
            shown, _ = ex.outputs.preview(text_limit=_LIVE_TEXT_LIMIT, max_outputs=_LIVE_OUTPUTS)
            pusher.offer([_output_dict(o) for o in shown])

        failure: ToolError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(pusher.run)
            try:
                run = await run_code(
                    ctx, cell.source, time_limit=args.get("timeout"), on_outputs=streamed
                )
            except ToolError as exc:  # (raised here, it would leave as an exception group)
                failure = exc
            except BaseException:
                # Cancelled: no more live pushes; the cell keeps what came, and no
                # longer shows as running.
                tg.cancel_scope.cancel()
                with anyio.move_on_after(5, shield=True), suppress(HostGone, ToolError):
                    await push(pusher.latest, None, False)
                raise
            finally:
                pusher.close()
        if failure is not None:
            # The kernel failed: the same, once the live pushes are done.
            with suppress(HostGone, ToolError):
                await push(pusher.latest, None, False)
            raise failure
        result = await run.model_content(text_limit=self.text_limit, max_images=self.max_images)
        final = [_output_dict(o) for o in run.result.outputs]
        try:
            await push(final, run.result.execution_count, False)
            updated = await self._update_live_displays(ctx, path, live, cell_id, final, run.result)
        except (HostGone, ToolError) as exc:
            note = (
                f"The outputs could not be put into cell {index} of {path.shown} in JupyterLab "
                f"({exc}); the notebook may have been closed while the cell ran."
            )
        else:
            note = (
                f"The outputs and execution count are in cell {index} of {path.shown}, "
                f"{live.where}."
            )
            if updated:
                note += f" The code updated {updated} display output(s) of other cells there too."
        first = result.content[0]
        assert isinstance(first, TextBlock)
        result.content[0] = TextBlock(text=f"{first.text}\n\n{note}")
        result.summary = f"{result.summary}\n{note}" if result.summary else note
        return result

    async def _update_live_displays(
        self,
        ctx: ToolContext,
        path: _Notebook,
        live: LiveNotebook,
        cell_id: str,
        final: list[dict[str, Any]],
        result: ExecutionResult,
    ) -> int:
        """The file route's display rule on the open document: the displays the
        run updated are rewritten in the other cells that show them (each set
        anew, its execution count kept), and the ones the cell shows now are
        remembered. The document is read only when the run updated a display."""
        if not result.display_updates:
            lone = _nbf.from_dict({"cells": [{"id": cell_id, "outputs": final}]})
            self.displays.rewrite(ctx.task_id, path.key, lone, 0, result)
            return 0
        cells = await live.read()
        nb = _nbf.from_dict(
            {"cells": [{"id": c.id, "outputs": list(c.outputs or [])} for c in cells]}
        )
        index = next((i for i, c in enumerate(cells) if c.id == cell_id), None)
        if index is None:  # (the cell was deleted as it finished)
            nb.cells.append(_nbf.from_dict({"id": cell_id, "outputs": final}))
            index = len(nb.cells) - 1
        nb.cells[index]["outputs"] = final
        rewritten = self.displays.rewrite(ctx.task_id, path.key, nb, index, result)
        counts = {c.id: c.execution_count for c in cells}
        by_id = {str(c["id"]): c for c in nb.cells}
        updated = 0
        for other, outputs in rewritten.items():
            edit = DocumentEdit(
                op="outputs",
                cell_id=other,
                outputs=json.loads(json.dumps(by_id[other]["outputs"])),
                execution_count=counts.get(other),
            )
            with suppress(ToolError):  # (the host refused that cell: it is left as it was)
                await live.send(edit)
                updated += outputs
        return updated

    async def _store_outputs(
        self,
        ctx: ToolContext,
        path: _Notebook,
        index: int,
        digest: str,
        result: ExecutionResult,
    ) -> str:
        rel = path.shown
        found = await self._load(ctx, path, must_exist=False)
        if found is None or found[1] != digest:
            return (
                f"{rel} changed on disk while the cell ran, so its outputs were not "
                "written (read_notebook, then run_cell again to store them)."
            )
        nb = _parse(found[0], rel)
        cell = nb.cells[index]
        cell.outputs = [notebook_output(o) for o in result.outputs]
        cell.execution_count = result.execution_count
        updated = self.displays.apply(ctx.task_id, path.key, nb, index, result)
        await self._save(ctx, path, nb, digest)
        also = (
            f" The code updated {updated} display output(s) of other cells, saved too."
            if updated
            else ""
        )
        return f"The outputs and execution count were saved to cell {index} of {rel}.{also}"


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
