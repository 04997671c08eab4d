"""The document hosts the daemon knows: which client holds which notebook open
(JupyterLab's server extension through real-time collaboration, or a browser
panel), and the request/reply by which a notebook tool edits it there
(hdsp.protocol.documents).

One `NotebookHosts` lives for the daemon's life: `HostDocuments` declares (with a
lease), `AnswerDocumentEdit` answers, and the notebook tools `request`. A request
waits for its answer (the caller bounds the wait with `fail_after`); a host that
lets a request time out is forgotten (by the caller), so the next edit goes to
the file at once instead of waiting again. Requests waiting at once are bounded
(MAX_PENDING).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from hdsp.protocol import (
    DocumentEdit,
    DocumentEditAnswer,
    DocumentEditRequest,
    DocumentEditRequested,
    DocumentRoute,
    Event,
    os_name,
    shown_name,
)

__all__ = ["MAX_PENDING", "HostUnavailable", "NotebookHost", "NotebookHosts"]

#: Requests that may wait for an answer at once (all hosts together).
MAX_PENDING = 256
#: Paths one host may declare.
MAX_PATHS = 1000
#: Hosts remembered at once (a host past this many is refused until one leaves).
MAX_HOSTS = 64
#: The route chosen when two hosts hold the same notebook: the shared document
#: updates every view at once, a panel only its own.
_PREFERENCE: dict[str, int] = {"rtc": 0, "panel": 1}


class HostUnavailable(Exception):
    """No answer came from the host (it timed out, or too many requests wait)."""


@dataclass
class NotebookHost:
    host_id: str
    route: DocumentRoute
    paths: frozenset[str]
    expires: float
    client_id: str | None = None


@dataclass
class _Pending:
    host_id: str
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: DocumentEditAnswer | None = None


class NotebookHosts:
    """Who holds which notebook, and the requests waiting for their answers."""

    def __init__(
        self,
        emit: Callable[[Event], Awaitable[None]],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._emit = emit
        self._clock = clock
        self._hosts: dict[str, NotebookHost] = {}
        self._pending: dict[str, _Pending] = {}

    # ---- declarations --------------------------------------------------------

    def declare(
        self,
        host_id: str,
        route: DocumentRoute,
        paths: list[str],
        lease_seconds: float,
        client_id: str | None = None,
    ) -> int:
        """Record what `host_id` holds (replacing what it held); returns how many
        paths it holds. Raises ValueError for a path that is not absolute, or
        when too many hosts are known."""
        if not 0 < len(host_id) <= 128:
            raise ValueError("hostId must be 1 to 128 characters")
        if not 0 < lease_seconds <= 3600:
            raise ValueError("leaseSeconds must be above 0 and at most 3600")
        if len(paths) > MAX_PATHS:
            raise ValueError(f"a host declares at most {MAX_PATHS} paths")
        for path in paths:
            if not path.startswith("/"):
                raise ValueError(f"{path[:200]!r} is not an absolute path")
        self._expire()
        if not paths:
            self._hosts.pop(host_id, None)
            return 0
        if host_id not in self._hosts and len(self._hosts) >= MAX_HOSTS:
            raise ValueError(f"{MAX_HOSTS} document hosts are declared already")
        self._hosts[host_id] = NotebookHost(
            host_id=host_id,
            route=route,
            # (Hosts spell names as hdsp.protocol.file_names says: kept as OS names.)
            paths=frozenset(os_name(p) for p in paths),
            expires=self._clock() + lease_seconds,
            client_id=client_id,
        )
        return len(paths)

    def forget(self, host_id: str) -> None:
        self._hosts.pop(host_id, None)

    def _expire(self) -> None:
        now = self._clock()
        for host_id in [h for h, host in self._hosts.items() if host.expires <= now]:
            del self._hosts[host_id]

    def host_for(self, path: str) -> NotebookHost | None:
        """The host to edit the notebook at `path` (absolute) through, if any."""
        self._expire()
        holding = [h for h in self._hosts.values() if path in h.paths]
        if not holding:
            return None
        # Of two panels (two browser windows), the one that declared last: a
        # window that went away without a word stops declaring first.
        return min(holding, key=lambda h: (_PREFERENCE.get(h.route, 9), -h.expires))

    def hosts(self) -> list[NotebookHost]:
        self._expire()
        return list(self._hosts.values())

    # ---- requests ----------------------------------------------------------------

    async def request(
        self,
        host: NotebookHost,
        path: str,
        edit: DocumentEdit,
        *,
        expires_in: float,
        task_id: str | None = None,
    ) -> DocumentEditAnswer:
        """Send `edit` to `host` and wait for its answer. The caller bounds the wait
        (with `fail_after(expires_in)`, and forgets a host that let it time out);
        the host refuses the request after `expires_in` seconds of wall time.
        HostUnavailable if too many requests wait already. A wait cancelled from
        outside (the task was stopped) says nothing of the host: it stays."""
        if len(self._pending) >= MAX_PENDING:
            raise HostUnavailable(f"{MAX_PENDING} edits wait for their document hosts already")
        request_id = uuid.uuid4().hex
        pending = self._pending[request_id] = _Pending(host.host_id)
        try:
            await self._emit(
                DocumentEditRequested(
                    payload=(
                        DocumentEditRequest(
                            request_id=request_id,
                            host_id=host.host_id,
                            path=shown_name(path),
                            edit=edit,
                            expires_at=time.time() + expires_in,
                            task_id=task_id,
                        ),
                    )
                )
            )
            await pending.done.wait()
        finally:
            del self._pending[request_id]
        assert pending.answer is not None
        return pending.answer

    def answer(self, answer: DocumentEditAnswer) -> bool:
        """Take a host's answer; False if no request waits for it (it timed out, or
        names another host)."""
        pending = self._pending.get(answer.request_id)
        if pending is None or pending.host_id != answer.host_id or pending.done.is_set():
            return False
        pending.answer = answer
        pending.done.set()
        return True

    def statistics(self) -> dict[str, int]:
        return {"hosts": len(self._hosts), "pending": len(self._pending)}
