"""run_cell: a notebook's code cell run in the task's kernel, its outputs
streamed into the open document or saved into the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from functools import partial
from typing import Any, ClassVar

import anyio
import anyio.to_thread

from hdsp.daemon.conversation import TextBlock
from hdsp.protocol import DocumentEdit, ExecutionResult, KernelOutput

from .base import ToolCategory, ToolContext, ToolError, ToolResult
from .kernel_tools import TIMEOUT_PARAMETER, run_code
from .live_notebook import HostGone, LiveNotebook, OutputPusher
from .notebook_displays import NotebookDisplays
from .notebook_files import NotebookPath, nbf, notebook_output, parse_notebook
from .notebook_hosts import NotebookHosts
from .notebook_tool import CellChange, NotebookTracker

__all__ = [
    "RunCell",
]

#: What of a running cell's outputs is pushed into the open document as they come
#: (the final outputs go whole).
_LIVE_TEXT_LIMIT = 256 * 1024
_LIVE_OUTPUTS = 500


def _output_dict(out: KernelOutput) -> dict[str, Any]:
    """A kernel output as plain nbformat JSON, for the wire."""
    node: dict[str, Any] = json.loads(json.dumps(notebook_output(out)))
    return node


def _with_note(result: ToolResult, note: str) -> ToolResult:
    """The run's `result` with `note` (where its outputs went) after its text."""
    first = result.content[0]
    assert isinstance(first, TextBlock)
    result.content[0] = TextBlock(text=f"{first.text}\n\n{note}")
    result.summary = f"{result.summary}\n{note}" if result.summary else note
    return result


class RunCell(CellChange):
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
            "timeout": TIMEOUT_PARAMETER,
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

    async def _use_file(
        self, ctx: ToolContext, path: NotebookPath, args: Mapping[str, Any], note: str
    ) -> ToolResult:
        # (Not run in JupyterLab when its host did not answer: the file's cell runs
        # instead, its outputs go to the file, and the note is not needed.)
        nb, digest, index = await self._file_target(ctx, path, args)
        cell = nb.cells[index]
        if cell.cell_type != "code":
            raise ToolError(f"Cell {index} is a {cell.cell_type} cell; only code cells run.")
        run = await run_code(ctx, str(cell.source), time_limit=args.get("timeout"))
        result = await run.model_content(text_limit=self.text_limit, max_images=self.max_images)
        note = await self._store_outputs(ctx, path, index, digest, run.result)
        return _with_note(result, note)

    async def _use_live(
        self, ctx: ToolContext, path: NotebookPath, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        """Run the open document's cell: its outputs stream into it as they come,
        and the final ones (with the execution count) are set when it is done."""
        seen, index, (cell_id, digest) = self._live_target(ctx, path, live, args)
        edit = DocumentEdit(op="run", cell_id=cell_id, expected_sha256=digest)
        answer = await self._send_checked(ctx, path, live, edit, index, seen)
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
        return _with_note(result, note)

    async def _update_live_displays(
        self,
        ctx: ToolContext,
        path: NotebookPath,
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
            lone = nbf.from_dict({"cells": [{"id": cell_id, "outputs": final}]})
            self.displays.rewrite(ctx.task_id, path.key, lone, 0, result)
            return 0
        cells = await live.read()
        nb = nbf.from_dict(
            {"cells": [{"id": c.id, "outputs": list(c.outputs or [])} for c in cells]}
        )
        index = next((i for i, c in enumerate(cells) if c.id == cell_id), None)
        if index is None:  # (the cell was deleted as it finished)
            nb.cells.append(nbf.from_dict({"id": cell_id, "outputs": final}))
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
        path: NotebookPath,
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
        nb = parse_notebook(found[0], rel)
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
