"""A document host for tests without a browser: one notebook held open as a
shared document (jupyter_ydoc's YNotebook on a pycrdt document), the edits
applied with the server extension's own code (`serve_edit`) and answered through
the same request/reply the daemon uses (NotebookHosts). Its save (a restore's)
writes the document to the file, as the user's save does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import nbformat
from jupyter_ydoc import YNotebook

from hdsp.client.jupyterlab.shared_notebooks import serve_edit
from hdsp.daemon.tools.notebook_hosts import NotebookHosts
from hdsp.protocol import DocumentEditAnswer, DocumentEditRequested, Event

__all__ = ["SharedNotebookHost"]


class SharedNotebookHost:
    """A document host holding one notebook open as a shared document: requests
    arrive through the daemon's emit, are applied by a task of their own (as the
    server extension does) and answered through NotebookHosts.answer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ynb = YNotebook()
        self.ynb.set(nbformat.read(str(path), as_version=4))
        self.open = True
        self.silent = False
        #: Whether a restore's save writes the file (False: as a save that failed).
        self.saves = True
        self.requests: list[Any] = []
        #: After each run or outputs request: its op, and the cell's execution
        #: count and state then (what JupyterLab shows: `[*]` while "running").
        self.runs: list[tuple[str, Any, Any]] = []
        self._changed = anyio.Event()
        send, receive = anyio.create_memory_object_stream[Any](16)
        self._send, self._receive = send, receive
        self.hosts = NotebookHosts(self.emit)

    async def emit(self, event: Event) -> None:
        assert isinstance(event, DocumentEditRequested)
        await self._send.send(event.payload[0])

    async def serve(self) -> None:
        with self._send, self._receive:
            await self._serve()

    async def _serve(self) -> None:
        async for request in self._receive:
            self.requests.append(request)
            if self.silent:
                continue
            notebook = None
            if not self.open:
                status, message, cells = "not_open", "closed", None
            else:
                status, message, cells, notebook = await serve_edit(
                    self.ynb, request.edit, self._save
                )
                if request.edit.op in ("run", "outputs") and status == "ok":
                    ycell = next(c for c in self.ynb.ycells if c["id"] == request.edit.cell_id)
                    state = (ycell.get("execution_count"), ycell.get("execution_state"))
                    self.runs.append((request.edit.op, *state))
            self._changed.set()
            self._changed = anyio.Event()
            self.hosts.answer(
                DocumentEditAnswer(
                    request_id=request.request_id,
                    host_id=request.host_id,
                    status=status,  # type: ignore[arg-type]
                    message=message,
                    cells=cells,
                    notebook=notebook,
                )
            )

    async def _save(self) -> bool:
        if self.saves:
            self.save(self.path)
        return True

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition` holds after a request (the caller bounds it)."""
        while not condition():
            await self._changed.wait()

    def sources(self) -> list[str]:
        return [str(c["source"]) for c in self.ynb.ycells]

    def save(self, path: Path) -> None:
        """What the user's save does: the document to the file."""
        nbformat.write(nbformat.from_dict(self.ynb.get()), str(path))
