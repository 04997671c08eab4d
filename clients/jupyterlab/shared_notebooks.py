"""The server extension as a document host through real-time collaboration
(route `rtc`, hdsp.protocol.documents): with `jupyter-collaboration` installed,
every notebook open in JupyterLab has a shared document (a YDoc room) on the
server; the agent's edits are applied to it, so every open view shows them at
once and the file is written by the room's own save, never behind Lab's back.

`SharedNotebooks` declares the notebooks whose rooms have a client (a window that
shows them), re-declaring when that changes and before the lease ends, and
serves `documentEditRequested` addressed to it, one at a time in the order they
come. `apply_edit` is the edit itself on a `jupyter_ydoc.YNotebook`, in one
transaction. A checkpoint's `snapshot` is the whole shared document; a restore's
`replace` sets the whole document and then has the room save it at once (as a
user's save does), answering only when the file is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio

from hdsp.protocol import (
    AnswerDocumentEdit,
    DocumentCell,
    DocumentEdit,
    DocumentEditAnswer,
    DocumentEditRequest,
    DocumentEditRequested,
    HostDocuments,
    shown_name,
)

from ..errors import ClientError
from .link import DaemonDown, DaemonLink

if TYPE_CHECKING:
    # pycrdt comes with jupyter-collaboration, which the `lab` extra does not
    # install: imported where a shared document is edited, which only happens
    # when collaboration is on.
    from pycrdt import Map

__all__ = [
    "LEASE_SECONDS",
    "POLL_INTERVAL",
    "EditOutcome",
    "Outcome",
    "SharedNotebooks",
    "apply_edit",
    "serve_edit",
]

#: Seconds between two looks at which notebooks are open.
POLL_INTERVAL = 1.0
#: The lease of a declaration; it is renewed at a third of it.
LEASE_SECONDS = 45.0

_log = logging.getLogger("hdsp.client.jupyterlab")


class _YNotebook(Protocol):
    """What is used of jupyter_ydoc's YNotebook."""

    @property
    def ycells(self) -> Any: ...

    @property
    def ydoc(self) -> Any: ...

    def create_ycell(self, value: dict[str, Any]) -> Any: ...

    def get_cell(self, index: int) -> dict[str, Any]: ...

    async def aget(self) -> dict[str, Any]: ...

    async def aset(self, value: dict[str, Any]) -> None: ...


AnswerStatus = Literal["ok", "conflict", "not_open", "invalid", "expired"]
#: What an edit came to: the answer's status, message and cells.
EditOutcome = tuple[AnswerStatus, str | None, list[DocumentCell] | None]
#: What a request came to: an edit's outcome, and the notebook (a snapshot's).
Outcome = tuple[AnswerStatus, str | None, list[DocumentCell] | None, dict[str, Any] | None]


def _sha(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def _find(ynb: _YNotebook, cell_id: str | None) -> int | None:
    if cell_id is None:
        return None
    for index, ycell in enumerate(ynb.ycells):
        if ycell.get("id") == cell_id:
            return index
    return None


def _cell_id(ynb: _YNotebook, index: int) -> str:
    """The cell's id as the shared document holds it. (`get_cell` leaves it out of
    a notebook older than nbformat 4.5, which keeps no ids in its file; the
    shared document gives every cell one all the same.)"""
    return str(ynb.ycells[index].get("id") or "")


def _doc_cell(ynb: _YNotebook, index: int, *, outputs: bool) -> DocumentCell:
    cell = ynb.get_cell(index)
    source = cell.get("source", "")
    count = cell.get("execution_count")
    return DocumentCell(
        id=_cell_id(ynb, index),
        cell_type=str(cell.get("cell_type", "code")),
        source="".join(source) if isinstance(source, list) else str(source),
        execution_count=int(count) if isinstance(count, int | float) else None,
        outputs=list(cell.get("outputs") or []) if outputs else None,
        metadata=dict(cell.get("metadata") or {}) if outputs else None,
    )


def _cells(ynb: _YNotebook, *, outputs: bool = False) -> list[DocumentCell]:
    return [_doc_cell(ynb, i, outputs=outputs) for i in range(len(ynb.ycells))]


def _youtputs(outputs: list[dict[str, Any]]) -> list[Map[Any]]:
    """Outputs as the shared model keeps them (stream text as shared text)."""
    from pycrdt import Map, Text

    made = []
    for output in outputs:
        value = dict(output)
        if value.get("output_type") == "stream":
            text = value.get("text", "")
            value["text"] = Text("".join(text) if isinstance(text, list) else str(text))
        made.append(Map(value))
    return made


def _set_outputs(
    ycell: Any, outputs: list[dict[str, Any]], count: int | None, *, running: bool = False
) -> None:
    """The cell's outputs and execution count, and whether it shows as running
    (`execution_state`, which JupyterLab shows as `[*]`)."""
    from pycrdt import Array

    youtputs = ycell.get("outputs")
    if isinstance(youtputs, Array):
        youtputs.clear()
        youtputs.extend(_youtputs(outputs))
    else:
        ycell["outputs"] = Array(_youtputs(outputs))
    ycell["execution_count"] = count
    ycell["execution_state"] = "running" if running else "idle"


def _mark(ycell: Any, marker: dict[str, Any] | None) -> None:
    if marker is None:
        return
    from pycrdt import Map

    metadata = ycell.get("metadata")
    if isinstance(metadata, Map):
        metadata["hdsp"] = marker
    else:
        ycell["metadata"] = Map({"hdsp": marker})


def apply_edit(ynb: _YNotebook, edit: DocumentEdit) -> EditOutcome:
    """Apply `edit` to the shared notebook; (status, message, cells)."""
    if edit.op == "read":
        return "ok", None, _cells(ynb, outputs=True)
    with ynb.ydoc.transaction():
        return _apply(ynb, edit)


def _checked(ynb: _YNotebook, edit: DocumentEdit) -> tuple[int | None, EditOutcome | None]:
    """The index of the edit's cell, or the outcome that ends the edit there
    (the cell is gone, or its source is not the one the agent read)."""
    index = _find(ynb, edit.cell_id)
    if index is None:
        return None, ("conflict", "The cell is no longer in the notebook.", [])
    if edit.expected_sha256 is not None:
        live = _doc_cell(ynb, index, outputs=False)
        if _sha(live.source) != edit.expected_sha256:
            return None, ("conflict", "The cell was changed since the agent read it.", [live])
    return index, None


def _after(ynb: _YNotebook, after_id: str | None) -> int | None:
    """Where a cell goes that goes after `after_id` (None: it is gone)."""
    if after_id is None:
        return 0
    anchor = _find(ynb, after_id)
    return None if anchor is None else anchor + 1


def _apply(ynb: _YNotebook, edit: DocumentEdit) -> EditOutcome:
    if edit.op == "insert":
        at = _after(ynb, edit.after_id)
        if at is None:
            return "conflict", "The cell to insert after is no longer in the notebook.", None
        if edit.new_id is None or edit.source is None:
            return "invalid", "An insert needs newId and source.", None
        kind = edit.cell_type or "code"
        value: dict[str, Any] = {
            "id": edit.new_id,
            "cell_type": kind,
            "source": edit.source,
            "metadata": {"hdsp": edit.marker} if edit.marker else {},
        }
        if kind == "code":
            value |= {"outputs": [], "execution_count": None}
        ynb.ycells.insert(at, ynb.create_ycell(value))
        return "ok", None, _cells(ynb)
    index, stop = _checked(ynb, edit)
    if stop is not None:
        return stop
    assert index is not None
    ycell = ynb.ycells[index]
    match edit.op:
        case "edit":
            if edit.source is None:
                return "invalid", "An edit needs source.", None
            kind = edit.cell_type or str(ycell.get("cell_type", "code"))
            if kind != ycell.get("cell_type"):
                old = ynb.get_cell(index)
                value = {
                    "id": _cell_id(ynb, index),
                    "cell_type": kind,
                    "source": edit.source,
                    "metadata": dict(old.get("metadata") or {}),
                }
                if kind == "code":
                    value |= {"outputs": [], "execution_count": None}
                ynb.ycells[index] = ycell = ynb.create_ycell(value)
            else:
                source = ycell["source"]
                source.clear()
                source += edit.source
                if kind == "code":
                    _set_outputs(ycell, [], None)
            _mark(ycell, edit.marker)
        case "delete":
            del ynb.ycells[index]
        case "move":
            value = ynb.get_cell(index) | {"id": _cell_id(ynb, index)}
            del ynb.ycells[index]
            at = _after(ynb, edit.after_id)
            if at is None:
                return "conflict", "The cell to move after is no longer in the notebook.", None
            ynb.ycells.insert(at, ynb.create_ycell(value))
        case "run":
            # (Only a code cell has outputs: the agent is told another cell's type.)
            if ycell.get("cell_type") == "code":
                _set_outputs(ycell, [], None, running=True)
            return "ok", None, [_doc_cell(ynb, index, outputs=False)]
        case "outputs":
            if ycell.get("cell_type") != "code":
                return "invalid", "Only a code cell has outputs.", None
            _set_outputs(
                ycell, list(edit.outputs or []), edit.execution_count, running=edit.running
            )
            return "ok", None, None
        case _:
            return "invalid", f"Unknown op {edit.op!r}.", None
    return "ok", None, _cells(ynb)


async def serve_edit(
    ynb: _YNotebook, edit: DocumentEdit, save: Callable[[], Awaitable[bool]]
) -> Outcome:
    """A request on the shared notebook: a checkpoint's `snapshot` (the whole
    document), a restore's `replace` (the whole document set to the request's
    notebook, then `save`d, as a user's save does: so the file is what every view
    shows, and no view finds its file changed behind its back), or an edit."""
    match edit.op:
        case "snapshot":
            notebook: dict[str, Any] = await ynb.aget()
            return "ok", None, None, notebook
        case "replace":
            value = edit.notebook
            if not isinstance(value, dict) or not isinstance(value.get("cells"), list):
                return "invalid", "A replace needs the notebook.", None, None
            await ynb.aset(value)
            if not await save():
                return "invalid", "JupyterLab showed the restore but did not save it.", None, None
            return "ok", None, None, None
        case _:
            return (*apply_edit(ynb, edit), None)


class SharedNotebooks:
    """The `rtc` document host of one Jupyter server (see the module docstring).
    `run` serves until cancelled."""

    def __init__(
        self,
        link: DaemonLink,
        ydoc_extension: Any,
        root_dir: str,
        *,
        log: logging.Logger | None = None,
    ) -> None:
        self.link = link
        self._log = log or _log
        self.host_id = f"rtc-{uuid.uuid4().hex}"
        self._ydoc = ydoc_extension
        self._root = os.path.realpath(root_dir)
        #: Absolute path -> room id, of the notebooks open now.
        self._open: dict[str, str] = {}

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._declare)
            await self._serve()

    def _open_notebooks(self) -> dict[str, str]:
        found: dict[str, str] = {}
        server = getattr(self._ydoc, "ywebsocket_server", None)
        rooms = getattr(server, "rooms", None) or {}
        for room_id, room in list(rooms.items()):
            if getattr(room, "file_type", None) != "notebook" or not getattr(room, "clients", None):
                continue
            document = getattr(room, "_document", None)
            path = getattr(document, "path", None)
            if isinstance(path, str):
                # (By its shown spelling, as hdspd names it: hdsp.protocol.file_names.)
                found[shown_name(os.path.realpath(os.path.join(self._root, path)))] = room_id
        return found

    async def _declare(self) -> None:
        declared: frozenset[str] | None = None
        renew_at = 0.0
        while True:
            self._open = self._open_notebooks()
            paths = frozenset(self._open)
            now = time.monotonic()
            if paths != declared or (paths and now >= renew_at):
                try:
                    await self.link.request(
                        HostDocuments(
                            host_id=self.host_id,
                            route="rtc",
                            paths=sorted(paths),
                            lease_seconds=LEASE_SECONDS,
                        )
                    )
                except (ClientError, DaemonDown) as exc:
                    _log.debug("hdsp: could not declare the open notebooks (%s)", type(exc))
                    declared = None
                else:
                    if paths != declared:
                        self._log.info("hdsp: %d open notebook(s) are edited live", len(paths))
                    declared = paths
                    renew_at = now + LEASE_SECONDS / 3
            await anyio.sleep(POLL_INTERVAL)

    async def _serve(self) -> None:
        while True:
            client = await self.link.wait_client()
            try:
                async with client.events() as stream:
                    async for event in stream:
                        data = event.data
                        if (
                            isinstance(data, DocumentEditRequested)
                            and data.payload[0].host_id == self.host_id
                        ):
                            await self._handle(data.payload[0])
            except (ClientError, DaemonDown) as exc:
                _log.debug("hdsp: edit requests interrupted (%s)", type(exc))
            await anyio.sleep(POLL_INTERVAL)

    async def _handle(self, request: DocumentEditRequest) -> None:
        status, message, cells, notebook = await self._outcome(request)
        answer = DocumentEditAnswer(
            request_id=request.request_id,
            host_id=self.host_id,
            status=status,
            message=message,
            cells=cells,
            notebook=notebook,
        )
        try:
            await self.link.request(AnswerDocumentEdit(data=answer))
        except (ClientError, DaemonDown) as exc:
            _log.info("hdsp: an edit's answer did not reach hdspd (%s)", type(exc))

    async def _outcome(self, request: DocumentEditRequest) -> Outcome:
        if time.time() > request.expires_at:
            return "expired", "The request came too late; nothing was changed.", None, None
        room_id = self._open_notebooks().get(request.path)
        if room_id is None:
            return "not_open", "The notebook is not open in JupyterLab.", None, None
        document = await self._ydoc.get_document(room_id=room_id, copy=False)
        if document is None or not hasattr(document, "ycells"):
            return "not_open", "The notebook's shared document is gone.", None, None
        try:
            outcome = await serve_edit(document, request.edit, lambda: self._save(room_id))
        except Exception as exc:  # a document in a state the edit cannot handle
            self._log.exception("hdsp: an edit of a notebook failed")
            return "invalid", f"The edit failed in JupyterLab: {type(exc).__name__}", None, None
        if request.edit.op == "replace" and outcome[0] == "ok":
            self._log.info("hdsp: a notebook open in JupyterLab was restored: %s", request.path)
        return outcome

    async def _save(self, room_id: str) -> bool:
        """Have the room save its document now, as JupyterLab's save does, and
        wait until it has; False if it cannot (a room still loading)."""
        server = getattr(self._ydoc, "ywebsocket_server", None)
        room = (getattr(server, "rooms", None) or {}).get(room_id)
        save = getattr(room, "_save_to_disc", None)
        task = save() if callable(save) else None
        if not isinstance(task, asyncio.Task):
            return False
        # (Waited for, not awaited: a save the room cancels for a later one must
        # not cancel this request's handling.)
        await asyncio.wait({task})
        return not task.cancelled() and task.exception() is None
