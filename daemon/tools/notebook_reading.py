"""read_notebook: a notebook's cells with their sources and an outline of their
outputs, from the open document when JupyterLab holds it, else from the file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import msgspec

from hdsp.daemon.conversation import TextBlock

from .base import ToolCategory, ToolContext, ToolResult
from .live_notebook import LiveNotebook, source_digest
from .notebook_files import NotebookPath, cells_seen, parse_notebook
from .notebook_tool import NotebookTool

__all__ = [
    "ReadNotebook",
]

#: Characters of a cell's source shown by read_notebook before it is cut.
_SOURCE_LIMIT = 10_000
#: Characters of an output shown in read_notebook's outline.
_OUTPUT_PREVIEW = 200


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


class ReadNotebook(NotebookTool):
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

    file_instead: ClassVar[str] = "\n({reason}; this is the file on disk.)"

    async def _use_live(
        self, ctx: ToolContext, path: NotebookPath, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        cells = await live.read()
        self.tracker.remember(
            ctx.task_id, path.key, None, [(c.id, source_digest(c.source)) for c in cells]
        )
        head = (
            f"{path.shown}: {len(cells)} cells, {live.where}: what the user sees now, saved or not"
        )
        return ToolResult(content=[TextBlock(text=_render(head, cells))])

    async def _use_file(
        self, ctx: ToolContext, path: NotebookPath, args: Mapping[str, Any], note: str
    ) -> ToolResult:
        data, digest = await self._load(ctx, path)
        nb = parse_notebook(data, path.shown)
        self.tracker.remember(ctx.task_id, path.key, digest, cells_seen(nb))
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
