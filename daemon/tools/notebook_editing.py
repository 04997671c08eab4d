"""The tools that change a notebook's cells: insert_cell, edit_cell, delete_cell
and move_cell, each in the open document or the file (see `CellChange`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hdsp.protocol import DocumentEdit

from .base import ToolCategory, ToolContext, ToolError, ToolResult
from .live_notebook import LiveNotebook, agent_marker, new_cell_id, source_digest
from .notebook_files import NotebookPath, nbv4, new_cell, unused_cell_id
from .notebook_tool import CellChange

__all__ = [
    "DeleteCell",
    "EditCell",
    "InsertCell",
    "MoveCell",
]

#: The arguments of insert_cell and edit_cell: where, and the cell's source and type.
_SOURCE_ARGUMENTS = {
    "path": {"type": "string"},
    "index": {"type": "integer", "minimum": 0},
    "source": {"type": "string"},
    "cell_type": {"type": "string", "enum": ["code", "markdown", "raw"]},
}


class InsertCell(CellChange):
    name: ClassVar[str] = "insert_cell"
    description: ClassVar[str] = (
        "Insert a cell into a notebook at an index (the cells from there move down), "
        "or at the end without an index. Creates the notebook if it does not exist."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": _SOURCE_ARGUMENTS,
        "required": ["path", "source"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    async def _use_file(
        self, ctx: ToolContext, path: NotebookPath, args: Mapping[str, Any], note: str
    ) -> ToolResult:
        found = await self._load(ctx, path, must_exist=False)
        expected: str | None
        if found is None:
            nb = nbv4.new_notebook()
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
        cell = new_cell(kind, str(args["source"]))
        cell["id"] = unused_cell_id({c.get("id") for c in nb.cells})
        cell["metadata"]["hdsp"] = agent_marker(ctx.task_id)
        nb.cells.insert(int(index), cell)
        await self._save(ctx, path, nb, expected)
        what = "Created the notebook with" if created else "Inserted"
        return ToolResult.text(
            f"{what} a {kind} cell at index {index} of {path.shown} "
            f"(now {len(nb.cells)} cells){note}."
        )

    async def _use_live(
        self, ctx: ToolContext, path: NotebookPath, live: LiveNotebook, args: Mapping[str, Any]
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


class EditCell(CellChange):
    name: ClassVar[str] = "edit_cell"
    description: ClassVar[str] = (
        "Replace the source of a notebook cell (and optionally its type). A code "
        "cell's old outputs are cleared, since they no longer match its code."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": _SOURCE_ARGUMENTS,
        "required": ["path", "index", "source"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    async def _use_file(
        self, ctx: ToolContext, path: NotebookPath, args: Mapping[str, Any], note: str
    ) -> ToolResult:
        nb, expected, index = await self._file_target(ctx, path, args)
        old = nb.cells[index]
        kind = args.get("cell_type", old.cell_type)
        cell = new_cell(kind, str(args["source"]))
        cell["id"] = old.get("id") or unused_cell_id({c.get("id") for c in nb.cells})
        if old.get("metadata"):
            cell["metadata"] = old.metadata
        cell["metadata"]["hdsp"] = agent_marker(ctx.task_id)
        nb.cells[index] = cell
        await self._save(ctx, path, nb, expected)
        return ToolResult.text(f"Cell {index} of {path.shown} is now a {kind} cell{note}.")

    async def _use_live(
        self, ctx: ToolContext, path: NotebookPath, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        seen, index, (cell_id, digest) = self._live_target(ctx, path, live, args)
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
        await self._send_checked(ctx, path, live, edit, index, seen)
        seen[index] = (cell_id, source_digest(source))
        self.tracker.remember(ctx.task_id, path.key, None, seen)
        return ToolResult.text(
            f"Cell {index} of {path.shown} is changed, {live.where} (the user sees it now)."
        )


class DeleteCell(CellChange):
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

    async def _use_file(
        self, ctx: ToolContext, path: NotebookPath, args: Mapping[str, Any], note: str
    ) -> ToolResult:
        nb, expected, index = await self._file_target(ctx, path, args)
        del nb.cells[index]
        await self._save(ctx, path, nb, expected)
        return ToolResult.text(
            f"Deleted cell {index} of {path.shown} (now {len(nb.cells)} cells){note}."
        )

    async def _use_live(
        self, ctx: ToolContext, path: NotebookPath, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        seen, index, (cell_id, digest) = self._live_target(ctx, path, live, args)
        edit = DocumentEdit(op="delete", cell_id=cell_id, expected_sha256=digest)
        await self._send_checked(ctx, path, live, edit, index, seen)
        del seen[index]
        self.tracker.remember(ctx.task_id, path.key, None, seen)
        return ToolResult.text(f"Deleted cell {index} of {path.shown}, {live.where}.")


class MoveCell(CellChange):
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

    async def _use_file(
        self, ctx: ToolContext, path: NotebookPath, args: Mapping[str, Any], note: str
    ) -> ToolResult:
        nb, expected, index = await self._file_target(ctx, path, args)
        to = int(args["to_index"])
        if not 0 <= to < len(nb.cells):
            raise ToolError(f"to_index {to} is past the end (0 to {len(nb.cells) - 1}).")
        cell = nb.cells.pop(index)
        nb.cells.insert(to, cell)
        await self._save(ctx, path, nb, expected)
        return ToolResult.text(f"Moved cell {index} of {path.shown} to index {to}{note}.")

    async def _use_live(
        self, ctx: ToolContext, path: NotebookPath, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        seen, index, (cell_id, digest) = self._live_target(ctx, path, live, args)
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
        await self._send_checked(ctx, path, live, edit, index, seen)
        rest.insert(to, (cell_id, digest))
        self.tracker.remember(ctx.task_id, path.key, None, rest)
        return ToolResult.text(f"Moved cell {index} of {path.shown} to index {to}, {live.where}.")
