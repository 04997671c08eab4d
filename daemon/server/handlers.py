"""The command table of the daemon: one handler per command."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, cast

import msgspec

from hdsp.daemon.errors import CommandError
from hdsp.protocol import (
    PROTOCOL_VERSION,
    CancelTask,
    CloseTask,
    DeleteQueuedMessage,
    ErrorCode,
    GetStatus,
    GetTask,
    ListTasks,
    Ping,
    Pong,
    Replay,
    ReplayPage,
    RespondToAsk,
    ResumeTask,
    SendMessage,
    Shutdown,
    StartNewTask,
    StatusResult,
    TaskCommand,
    TaskEvent,
    __version__,
)

from .sessions import Session

if TYPE_CHECKING:
    from hdsp.daemon.app import Daemon

__all__ = ["MAX_REPLAY_PAGE", "Handlers"]

MAX_REPLAY_PAGE = 1000


class Handlers:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    async def __call__(self, cmd: TaskCommand, session: Session) -> Any:
        d = self.daemon
        tasks = d.tasks
        match cmd.data:
            case StartNewTask(data=data):
                return await tasks.start_task(data)
            case SendMessage(task_id=task_id, data=data):
                return await tasks.send_message(task_id, data)
            case RespondToAsk(task_id=task_id, data=data):
                return await tasks.respond_to_ask(task_id, data)
            case DeleteQueuedMessage(task_id=task_id, data=message_id):
                return await tasks.delete_queued_message(task_id, message_id)
            case CancelTask(task_id=task_id):
                return await tasks.cancel(task_id)
            case CloseTask(task_id=task_id):
                return await tasks.close(task_id)
            case ResumeTask(data=task_id):
                return await tasks.resume(task_id)
            case ListTasks(data=data):
                return await tasks.list_tasks(data.cursor, data.limit)
            case GetTask(data=data):
                return await tasks.snapshot(data.task_id)
            case Replay(data=data):
                return await self._replay(data.since_seq, data.task_id, data.limit)
            case Ping():
                return Pong(server_time=int(time.time() * 1000))
            case GetStatus():
                return await self._status()
            case Shutdown():
                d.request_shutdown(f"Shutdown command from {session.client_id}")
                return None
        raise CommandError(ErrorCode.UNKNOWN_COMMAND, f"No handler for {type(cmd.data).__name__}.")

    async def _replay(self, since_seq: int, task_id: str | None, limit: int) -> ReplayPage:
        d = self.daemon
        if since_seq < 0:
            raise CommandError(ErrorCode.INVALID_REQUEST, "sinceSeq must be 0 or more.")
        limit = max(1, min(limit, MAX_REPLAY_PAGE))
        db = d.store.db
        oldest = await d.store.read(db.oldest_seq)
        if since_seq + 1 < oldest:
            raise CommandError(
                ErrorCode.CURSOR_EXPIRED,
                f"Events up to seq {oldest - 1} have been pruned; take a snapshot "
                "(GetTask or ListTasks) and continue from its headSeq.",
                details={"oldestSeq": oldest},
            )
        head = d.journal.head_seq
        bodies = await d.store.read(db.replay, since_seq, task_id, limit)
        # The stored bodies are the published envelopes: splice them in unparsed.
        events = cast(list[TaskEvent], [msgspec.Raw(b) for b in bodies])
        return ReplayPage(events=events, head_seq=head, more=len(bodies) == limit)

    async def _status(self) -> StatusResult:
        d = self.daemon
        total, _ = await d.store.read(d.store.db.counts)
        stats = d.tasks.statistics()
        return StatusResult(
            server_version=__version__,
            protocol_version=PROTOCOL_VERSION,
            pid=os.getpid(),
            uptime_seconds=time.monotonic() - d.started_monotonic,
            head_seq=d.journal.head_seq,
            clients=len(d.server.sessions),
            tasks_total=total,
            tasks_running=stats["running"],
            data_dir=str(d.paths.data_dir),
            runtime_dir=str(d.paths.runtime_dir),
        )
