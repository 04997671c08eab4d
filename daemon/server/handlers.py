"""The command table of the daemon: one handler per command."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, cast

import msgspec

from hdsp.daemon.config.service import roo_model_record
from hdsp.daemon.errors import CommandError
from hdsp.daemon.logs import register_secret
from hdsp.protocol import (
    INT64_MAX,
    PROTOCOL_VERSION,
    AttachKernel,
    CancelTask,
    CloseTask,
    DeleteProfile,
    DeleteQueuedMessage,
    DeleteSecret,
    ErrorCode,
    ExecuteCode,
    ExportSettings,
    GetModels,
    GetSettings,
    GetStatus,
    GetTask,
    ImportSettings,
    InterruptKernel,
    ListKernels,
    ListProfiles,
    ListTasks,
    ModelList,
    ModelsResponse,
    Replay,
    ReplayPage,
    RespondToAsk,
    RestartKernel,
    ResumeTask,
    SaveProfile,
    SelectProfile,
    SendMessage,
    SetSecret,
    Shutdown,
    ShutdownKernel,
    StartKernel,
    StartNewTask,
    StatusResult,
    TaskCommand,
    TaskEvent,
    UpdateSettings,
    __version__,
)

from .sessions import Session

if TYPE_CHECKING:
    from hdsp.daemon.app import Daemon

__all__ = ["MAX_REPLAY_PAGE", "Handlers"]

MAX_REPLAY_PAGE = 1000


def _check_cursor(cursor: str | None) -> None:
    """A ListTasks cursor is the decimal `nextCursor` of a previous page."""
    if cursor is None:
        return
    if not (cursor.isascii() and cursor.isdigit() and int(cursor) <= INT64_MAX):
        raise CommandError(
            ErrorCode.INVALID_REQUEST,
            f"Invalid cursor {cursor[:40]!r} (at $.data.data.cursor): pass the "
            "nextCursor of a previous ListTasks.",
        )


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
                return await tasks.send_message(task_id, data, by=session.info.name)
            case RespondToAsk(task_id=task_id, data=data):
                return await tasks.respond_to_ask(task_id, data, by=session.info.name)
            case DeleteQueuedMessage(task_id=task_id, data=message_id):
                return await tasks.delete_queued_message(task_id, message_id)
            case CancelTask(task_id=task_id):
                return await tasks.cancel(task_id)
            case CloseTask(task_id=task_id):
                return await tasks.close(task_id)
            case ResumeTask(data=task_id):
                return await tasks.resume(task_id)
            case ListTasks(data=data):
                _check_cursor(data.cursor)
                return await tasks.list_tasks(data.cursor, data.limit)
            case GetTask(data=data):
                return await tasks.snapshot(data.task_id)
            case Replay(data=data):
                return await self._replay(data.since_seq, data.task_id, data.limit)
            case GetSettings():
                return await d.config.view()
            case UpdateSettings(data=data):
                return await d.config.update(data.patch, client_id=session.client_id)
            case ListProfiles():
                return await d.config.list_profiles()
            case SaveProfile(data=data):
                return await d.config.save_profile(data, client_id=session.client_id)
            case DeleteProfile(data=data):
                return await d.config.delete_profile(data.name, client_id=session.client_id)
            case SelectProfile(data=data):
                return await d.config.select_profile(data.name, client_id=session.client_id)
            case SetSecret(data=data):
                register_secret(data.value, name=data.name)  # before anything can log it
                return await d.config.set_secret(data.name, data.value, client_id=session.client_id)
            case DeleteSecret(data=data):
                return await d.config.delete_secret(data.name, client_id=session.client_id)
            case ExportSettings():
                return await d.config.export()
            case ImportSettings(data=data):
                return await d.config.import_settings(
                    data.settings, merge=data.merge, client_id=session.client_id
                )
            case GetModels(data=data):
                return await self._models(data.provider)
            # Ping never comes here: the server answers it where it receives it.
            case GetStatus():
                return await self._status()
            case Shutdown():
                d.request_shutdown(f"Shutdown command from {session.client_id}")
                return None
            case (
                ListKernels()
                | StartKernel()
                | AttachKernel()
                | InterruptKernel()
                | RestartKernel()
                | ShutdownKernel()
                | ExecuteCode()
            ):
                return await d.kernels.handle(cmd.data)
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

    async def _models(self, provider: str | None) -> ModelList:
        """Roo's GetModels: the reply, and a daemon-wide modelsResponse event."""
        d = self.daemon
        models = d.config.models(provider)
        await d.journal.emit(ModelsResponse(payload=(roo_model_record(models.models),)))
        return models

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
            clients=d.server.sessions.live(),
            tasks_total=total,
            tasks_running=stats["running"],
            data_dir=str(d.paths.data_dir),
            runtime_dir=str(d.paths.runtime_dir),
            sandbox=d.sandbox.status(),
            plaintext_keyring=await d.config.plaintext_keyring(),
            storage=d.store.monitor.health(),
        )
