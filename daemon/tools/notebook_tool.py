"""What every notebook tool shares: the tracker of what each task last saw of
each notebook, the base that locates, loads and saves a notebook and finds its
open document, and the base of the tools that change cells (the open document
when a host holds it, else the file).
"""

from __future__ import annotations

from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
import anyio.to_thread

from hdsp.protocol import DocumentEdit, DocumentEditAnswer

from .base import Tool, ToolContext, ToolError, ToolResult
from .live_notebook import HOST_ANSWER_LIMIT, CellSeen, HostGone, LiveNotebook
from .notebook_files import (
    ChangedOnDisk,
    NotebookPath,
    cells_seen,
    host_path,
    locate_notebook,
    nbf,
    parse_notebook,
    read_notebook_file,
    write_notebook_file,
)
from .notebook_hosts import NotebookHosts

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = [
    "CellChange",
    "NotebookTool",
    "NotebookTracker",
]


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


class NotebookTool(Tool):
    """The shared parts: the path rule, loading, the guarded atomic save, and
    the route: the open document when a host holds it, else (or when the host
    does not answer) the file."""

    #: Whether the tool writes the notebook (.hdspignore'd paths refuse writes).
    writes: ClassVar[bool] = True
    #: The note of the file route when the host did not answer (`{reason}`: why).
    file_instead: ClassVar[str]

    def __init__(self, tracker: NotebookTracker, documents: NotebookHosts | None = None) -> None:
        self.tracker = tracker
        #: The notebooks open in JupyterLab: where this tool edits them live.
        self.documents = documents
        #: Seconds a document host has to answer one request.
        self.answer_limit = HOST_ANSWER_LIMIT

    async def _live(self, ctx: ToolContext, path: NotebookPath) -> LiveNotebook | None:
        """The open document of `path`, when a host holds it."""
        if self.documents is None:
            return None
        absolute = await anyio.to_thread.run_sync(host_path, ctx.workspace, path.key)
        host = self.documents.host_for(absolute)
        if host is None:
            return None
        return LiveNotebook(
            self.documents, host, absolute, path.shown, ctx.task_id, self.answer_limit
        )

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        path = await self._path(ctx, args)
        live = await self._live(ctx, path)
        note = ""
        if live is not None:
            try:
                return await self._use_live(ctx, path, live, args)
            except HostGone as exc:
                note = self.file_instead.format(reason=exc.reason)
        return await self._use_file(ctx, path, args, note)

    @abstractmethod
    async def _use_live(
        self, ctx: ToolContext, path: NotebookPath, live: LiveNotebook, args: Mapping[str, Any]
    ) -> ToolResult:
        """Do it in the open document `live`."""

    @abstractmethod
    async def _use_file(
        self, ctx: ToolContext, path: NotebookPath, args: Mapping[str, Any], note: str
    ) -> ToolResult:
        """Do it in the file; `note` (empty, or `file_instead` with its reason)
        says why the open document was not used."""

    def _seen_live(self, ctx: ToolContext, path: NotebookPath) -> list[CellSeen]:
        cells = self.tracker.cells(ctx.task_id, path.key)
        if cells is None:
            raise ToolError(f"Read {path.shown} with read_notebook before changing it.")
        return list(cells)

    def written_paths(self, args: Mapping[str, Any]) -> list[str]:
        return [str(args["path"])] if self.writes else []

    async def _path(self, ctx: ToolContext, args: Mapping[str, Any]) -> NotebookPath:
        return await anyio.to_thread.run_sync(
            partial(locate_notebook, ctx.workspace, str(args["path"]), write=self.writes)
        )

    async def _load(self, ctx: ToolContext, path: NotebookPath, *, must_exist: bool = True) -> Any:
        found = await anyio.to_thread.run_sync(read_notebook_file, ctx.workspace, path.given)
        if found is None and must_exist:
            raise ToolError(f"There is no notebook at {path.shown}.")
        return found

    async def _load_seen(self, ctx: ToolContext, path: NotebookPath) -> tuple[NotebookNode, str]:
        """The notebook as the task last saw it; a ToolError if the task never read
        it or it changed on disk since."""
        data, digest = await self._load(ctx, path)
        seen = self.tracker.seen(ctx.task_id, path.key)
        cells = self.tracker.cells(ctx.task_id, path.key)
        rel = path.shown
        if seen is None and cells is None:
            raise ToolError(f"Read {rel} with read_notebook before changing it.")
        nb = parse_notebook(data, rel)
        # Unchanged bytes, or (after reading the open document, or a save that
        # changed only outputs or metadata) the same cells as the task saw.
        if seen != digest and (cells is None or cells_seen(nb) != cells):
            raise ToolError(
                f"{rel} changed on disk since you last read it (someone else edited it). "
                "Nothing was written. Call read_notebook to see its cells now, then make "
                "your change again."
            )
        return nb, digest

    async def _save(
        self, ctx: ToolContext, path: NotebookPath, nb: NotebookNode, expected: str | None
    ) -> None:
        try:
            nbf.validate(nb)
        except nbf.ValidationError as exc:
            raise ToolError(
                f"The change would make an invalid notebook ({exc.message}); nothing was written."
            ) from None
        try:
            data = (nbf.writes(nb) + "\n").encode("utf-8")
        except UnicodeEncodeError:
            # The file held a string that is not Unicode (a lone surrogate, written
            # as \udcff): keep it escaped, as it was, rather than fail.
            data = (nbf.writes(nb, ensure_ascii=True) + "\n").encode("ascii")
        try:
            digest = await anyio.to_thread.run_sync(
                write_notebook_file, ctx.workspace, path.given, data, expected
            )
        except ChangedOnDisk:
            raise ToolError(
                f"{path.shown} changed on disk while the change was being made; "
                "nothing was written. Call read_notebook and try again."
            ) from None
        self.tracker.remember(ctx.task_id, path.key, digest, cells_seen(nb))

    @staticmethod
    def _index(nb: NotebookNode, args: Mapping[str, Any]) -> int:
        index = int(args["index"])
        if not 0 <= index < len(nb.cells):
            raise ToolError(
                f"There is no cell {index}: the notebook has {len(nb.cells)} cells "
                f"(indexes 0 to {len(nb.cells) - 1})."
            )
        return index


class CellChange(NotebookTool):
    """A tool that changes a notebook's cells: in the open document when a host
    holds it, else (or when the host does not answer) in the file."""

    file_instead: ClassVar[str] = " ({reason}, so the file was changed instead)"

    async def _file_target(
        self, ctx: ToolContext, path: NotebookPath, args: Mapping[str, Any]
    ) -> tuple[NotebookNode, str, int]:
        """The notebook as the task last saw it, its content hash, and the index
        `args` names (a ToolError when there is no such cell)."""
        nb, digest = await self._load_seen(ctx, path)
        return nb, digest, self._index(nb, args)

    def _live_target(
        self, ctx: ToolContext, path: NotebookPath, live: LiveNotebook, args: Mapping[str, Any]
    ) -> tuple[list[CellSeen], int, CellSeen]:
        """The cells the task last saw, the index `args` names, and that cell."""
        seen = self._seen_live(ctx, path)
        index = int(args["index"])
        return seen, index, live.target(seen, index)

    async def _send_checked(
        self,
        ctx: ToolContext,
        path: NotebookPath,
        live: LiveNotebook,
        edit: DocumentEdit,
        index: int,
        seen: list[CellSeen],
    ) -> DocumentEditAnswer:
        """Send `edit` of cell `index`; on a conflict the task keeps the cells it
        saw and the model is told."""
        answer = await live.send(edit)
        if answer.status == "conflict":
            error = live.conflict(answer, index, seen)
            self.tracker.remember(ctx.task_id, path.key, None, seen)
            raise error
        return answer
