"""A notebook open in JupyterLab, edited where it is open: the notebook tools'
route through a document host (hdsp.protocol.documents), chosen when a host
holds the notebook; the file on disk is left to the user's save (or autosave).

What the agent has seen of a notebook is a list of (cell id, SHA-256 of the
source) in the order it read them, changed only by the agent's own edits (never
by what the host reports of the user's). The model's indexes point into that
list; the host finds each cell by its id and refuses, as a conflict, a cell whose
live source is not the one the agent read. A cell the user added since the read
is not in the list, so the agent cannot touch it without reading again.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from hdsp.protocol import DocumentCell, DocumentEdit, DocumentEditAnswer

from .base import ToolError
from .notebook_hosts import HostUnavailable, NotebookHost, NotebookHosts

__all__ = [
    "HOST_ANSWER_LIMIT",
    "CellSeen",
    "HostGone",
    "LiveNotebook",
    "OutputPusher",
    "agent_marker",
    "source_digest",
]

#: Seconds a document host has to answer one request before the tool gives up on
#: it (and writes the file instead).
HOST_ANSWER_LIMIT = 10.0

#: What the agent saw of one cell: its id and the SHA-256 of its source (None for
#: a cell it has not read).
CellSeen = tuple[str, str | None]


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def agent_marker(task_id: str) -> dict[str, Any]:
    """What goes into `metadata.hdsp` of a cell the agent wrote."""
    return {"editedBy": "agent", "task": task_id, "ts": int(time.time() * 1000)}


class HostGone(Exception):
    """The host did not answer, answered late, or no longer holds the notebook:
    the caller writes the file instead. `reason` says which, for the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class LiveNotebook:
    """One notebook at one host, for one task's call."""

    hosts: NotebookHosts
    host: NotebookHost
    #: Absolute path, as hosts declare it.
    path: str
    #: As the model should see it.
    shown: str
    task_id: str
    answer_limit: float = HOST_ANSWER_LIMIT

    @property
    def where(self) -> str:
        how = "the shared document" if self.host.route == "rtc" else "the notebook's window"
        return f"open in JupyterLab ({how})"

    async def send(self, edit: DocumentEdit) -> DocumentEditAnswer:
        """The host's answer to `edit`; HostGone if there is none to act on, a
        ToolError for an edit the host refused as invalid."""
        try:
            with anyio.fail_after(self.answer_limit):
                answer = await self.hosts.request(
                    self.host,
                    self.path,
                    edit,
                    expires_in=self.answer_limit,
                    task_id=self.task_id,
                )
        except TimeoutError:
            self.hosts.forget(self.host.host_id)
            raise HostGone(f"JupyterLab did not answer within {self.answer_limit:g} s") from None
        except HostUnavailable as exc:
            raise HostGone(str(exc)) from None
        if answer.status in ("not_open", "expired"):
            self.hosts.forget(self.host.host_id)
            raise HostGone(answer.message or "the notebook is no longer open in JupyterLab")
        if answer.status == "invalid":
            raise ToolError(f"JupyterLab refused the change: {answer.message or 'invalid'}")
        return answer

    # ---- what the agent has seen ---------------------------------------------------

    def target(self, seen: Sequence[CellSeen], index: int) -> CellSeen:
        if not 0 <= index < len(seen):
            raise ToolError(
                f"There is no cell {index}: {self.shown} had {len(seen)} cells when you "
                f"last read it (indexes 0 to {len(seen) - 1})."
            )
        cell_id, digest = seen[index]
        if digest is None:
            raise ToolError(
                f"You have not read cell {index} of {self.shown}; call read_notebook first."
            )
        return cell_id, digest

    def conflict(self, answer: DocumentEditAnswer, index: int, seen: list[CellSeen]) -> ToolError:
        """The conflict an answer reports, as the model reads it. The cell's live
        source is shown, so the agent has now seen it: `seen` takes its digest."""
        cell = answer.cells[0] if answer.cells else None
        if cell is None:
            return ToolError(
                f"Conflict: cell {index} of {self.shown} was deleted in JupyterLab since you "
                "read it; nothing was changed. Call read_notebook to see the notebook now."
            )
        if 0 <= index < len(seen) and seen[index][0] == cell.id:
            seen[index] = (cell.id, source_digest(cell.source))
        return ToolError(
            f"Conflict: cell {index} of {self.shown} was changed in JupyterLab since you read "
            "it (by the user, most likely), so your change was not made. Its source now:\n"
            f"{cell.source}\n"
            "Decide whether your change still applies to this source; if so, make it again."
        )

    # ---- reads --------------------------------------------------------------------

    async def read(self) -> list[DocumentCell]:
        answer = await self.send(DocumentEdit(op="read"))
        return list(answer.cells or [])


class OutputPusher:
    """Streams a running cell's outputs into the open document: only the newest
    outputs wait (each push replaces the cell's outputs, so an older one is never
    worth sending), one request at a time. A push that fails stops the rest; the
    run goes on. `latest` is what was offered last, sent or not."""

    def __init__(self, send: Callable[[list[dict[str, Any]]], Awaitable[None]]) -> None:
        self._send = send
        self._latest: list[dict[str, Any]] | None = None
        self._wake = anyio.Event()
        self._closed = False
        self.failure: str | None = None
        self.latest: list[dict[str, Any]] = []

    def offer(self, outputs: list[dict[str, Any]]) -> None:
        self._latest = self.latest = outputs
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            item, self._latest = self._latest, None
            if item is not None and self.failure is None:
                try:
                    await self._send(item)
                except (HostGone, ToolError) as exc:
                    self.failure = str(exc)
            if self._closed and self._latest is None:
                return


def new_cell_id(seen: Sequence[CellSeen]) -> str:
    taken = {cell_id for cell_id, _ in seen}
    while True:
        candidate = uuid.uuid4().hex[:8]
        if candidate not in taken:
            return candidate
