"""Checkpoints of a task's workspace, as the task's commands (issue 20): list
them, diff two, and restore one's files, its history or both; with the kernel,
replay its executions once the user approves them in an ask of the task.

A replay that waits for its approval is kept in the store
(:class:`~hdsp.daemon.checkpoints.PendingReplay`), so that a restarted daemon
asks again (:meth:`CheckpointRestores.recover`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.checkpoints import (
    CheckpointService,
    GitFailed,
    PendingReplay,
    WorkspaceRefused,
    skip_reason,
)
from hdsp.daemon.errors import CommandError, WrongState
from hdsp.daemon.store import Store
from hdsp.daemon.tools import AskAnswer
from hdsp.protocol import (
    Ask,
    AskResponse,
    CheckpointDiff,
    CheckpointInfo,
    CheckpointList,
    CheckpointRestoreResult,
    ClineMessage,
    DiffCheckpointsData,
    ExecutionResult,
    KernelReplay,
    RestoreCheckpointData,
    Say,
    TaskIdle,
    TaskState,
)

from .edits import HistoryEdits
from .errors import ReplayFailed
from .loaded import LoadedTasks

__all__ = ["CheckpointRestores"]

log = structlog.get_logger("hdsp.tasks")

_message_decoder = msgspec.json.Decoder(ClineMessage)


class CheckpointRestores:
    """ListCheckpoints, DiffCheckpoints and RestoreCheckpoint, with the kernel
    replays that wait for approval or run. `checkpoints` None: the daemon keeps
    none; `task_group` is where replays wait and run (the manager's)."""

    def __init__(
        self,
        store: Store,
        loaded: LoadedTasks,
        edits: HistoryEdits,
        checkpoints: CheckpointService | None,
        *,
        check_open: Callable[[], None],
        task_group: Callable[[], TaskGroup],
    ) -> None:
        self._store = store
        self._loaded = loaded
        self._edits = edits
        self._checkpoints = checkpoints
        self._check_open = check_open
        self._task_group = task_group
        #: Restores "with kernel" whose replay waits for approval or runs, by task.
        self._replays: dict[str, _ReplayOutcome] = {}

    async def pending(self) -> list[PendingReplay]:
        """The replays the store keeps as waiting (none without checkpoints)."""
        service = self._checkpoints
        return await service.pending_replays() if service is not None else []

    def _checkpoint_service(self) -> CheckpointService:
        if self._checkpoints is None:
            raise WrongState("This hdsp daemon keeps no checkpoints.")
        return self._checkpoints

    async def _workspace_of(self, task_id: str) -> Path:
        async with self._loaded.lease(task_id) as task:
            return task.workspace

    async def list_checkpoints(self, task_id: str) -> CheckpointList:
        service = self._checkpoint_service()
        workspace = await self._workspace_of(task_id)
        why = service.refusal(workspace) or (
            None if service.enabled else "Checkpoints are off (settings: checkpoints.enabled)."
        )
        return CheckpointList(
            task_id=task_id,
            checkpoints=await service.checkpoints(task_id),
            enabled=why is None,
            note=why,
            nested=await self._nested(service, workspace) if why is None else [],
        )

    @staticmethod
    async def _nested(service: CheckpointService, workspace: Path) -> list[str]:
        """The nested repositories checkpoints leave out (none if that is unknown)."""
        try:
            return await service.nested(workspace)
        except (GitFailed, WorkspaceRefused, TimeoutError) as exc:
            log.warning("nested repositories unknown", error=str(exc))
            return []

    async def diff_checkpoints(self, data: DiffCheckpointsData) -> CheckpointDiff:
        service = self._checkpoint_service()
        workspace = await self._workspace_of(data.task_id)
        try:
            return await service.diff(data.task_id, workspace, data.checkpoint, data.to)
        except (GitFailed, WorkspaceRefused, TimeoutError) as exc:
            raise WrongState(f"No diff: {exc}") from None

    async def record_execution(self, task_id: str, result: ExecutionResult, code: str) -> None:
        """Write code a client ran in the task's kernel (ExecuteCode) to the task's
        execution log."""
        if self._checkpoints is not None:
            await self._checkpoints.record_execution(
                task_id,
                result.kernel_id,
                code,
                result.status,
                result.execution_count,
                result.kernel_restarted,
            )

    async def restore_checkpoint(self, data: RestoreCheckpointData) -> CheckpointRestoreResult:
        """Restore a checkpoint's files, history or both (see RestoreCheckpoint):
        a running turn is cancelled first; the history is rewound to the
        checkpoint's message; the files are restored after a checkpoint of them
        as they are (the undo); with the kernel, its executions are replayed once
        the user approves them in an ask of the task (kept in the store while it
        waits, so that a restarted daemon asks again)."""
        self._check_open()
        service = self._checkpoint_service()
        task_id = data.task_id
        info = await service.checkpoint(task_id, data.checkpoint)
        waiting = self._replays.get(task_id)
        if waiting is not None:
            raise WrongState(
                f"The restore of checkpoint {waiting.checkpoint} waits for the approval of "
                "its kernel replay (an ask of the task): answer it first.",
            )
        async with self._loaded.lease(task_id) as task:
            await task.stop()
            workspace = task.workspace
        rewound = False
        if data.restore in ("history", "both"):
            if info.message_ts is None:
                raise WrongState(
                    f"Checkpoint {info.number} has no message to rewind the history to.",
                )
            await self._edits.rewind(task_id, info.message_ts, include=True)
            rewound = True
        restored = None
        if data.restore in ("files", "both"):
            async with self._loaded.lease(task_id) as task:

                async def announce(text: str, checkpoint: dict[str, object]) -> int:
                    message = await task.messages.say(
                        Say.CHECKPOINT_SAVED, text, checkpoint=checkpoint
                    )
                    return message.ts

                try:
                    restored = await service.restore_files(task_id, workspace, info, announce)
                except (GitFailed, WorkspaceRefused, TimeoutError) as exc:
                    raise WrongState(f"Not restored: {exc}") from None
            nested = restored.nested
        else:
            nested = await self._nested(service, workspace)
        result = CheckpointRestoreResult(
            task_id=task_id,
            checkpoint=info.number,
            restore=data.restore,
            undo_checkpoint=restored.undo.number if restored is not None else None,
            files=restored.files if restored is not None else [],
            rewound=rewound,
            nested=nested,
            open_notebooks=restored.open_notebooks if restored is not None else [],
            notes=restored.notes if restored is not None else [],
        )
        if not data.with_kernel:
            await self._finish_restore(info, result)
            return result
        outcome = await self._ask_replay(data, info, result)
        if not data.wait_for_replay:
            return msgspec.structs.replace(result, replay_pending=True)
        return await outcome.wait()

    async def _finish_restore(self, info: CheckpointInfo, result: CheckpointRestoreResult) -> None:
        """Say what the restore did, in the task's history and to every client."""
        async with self._loaded.lease(result.task_id) as task:
            await task.messages.say(
                Say.CHECKPOINT_RESTORED,
                _restored_text(result),
                checkpoint={
                    "number": info.number,
                    "restore": result.restore,
                    "files": result.files,
                    "undo": result.undo_checkpoint,
                    "nested": result.nested,
                },
            )
        await self._checkpoint_service().announce_restored(info, result.restore)
        log.info(
            "checkpoint restored", task_id=result.task_id, number=info.number, mode=result.restore
        )

    async def _ask_replay(
        self, data: RestoreCheckpointData, info: CheckpointInfo, result: CheckpointRestoreResult
    ) -> _ReplayOutcome:
        """Post the ask that shows the cells to replay, keep it in the store, and
        leave the wait for its answer and the replay to the manager's task group."""
        service = self._checkpoint_service()
        plan = await service.replay_plan(info)
        cells = []
        for record in plan:
            cell: dict[str, object] = {"seq": record.seq, "code": record.code}
            reason = skip_reason(record, data.skip)
            if reason is not None:
                cell["skip"] = reason
            cells.append(cell)
        text = json.dumps(
            {
                "tool": "replay_kernel",
                "checkpoint": info.number,
                "note": (
                    "Restart the task's kernel (its variables are lost) and run these "
                    "cells again, in order."
                ),
                "cells": cells,
            }
        )
        tg = self._task_group()
        async with self._loaded.lease(data.task_id) as task:
            ask = await task.asks.post(Ask.TOOL, text)
        pending = PendingReplay(
            task_id=data.task_id,
            checkpoint=info.number,
            ask_ts=ask.ts,
            restore=data.restore,
            skip=list(data.skip),
            undo_checkpoint=result.undo_checkpoint,
            files=result.files,
            rewound=result.rewound,
            nested=result.nested,
            open_notebooks=result.open_notebooks,
            notes=result.notes,
        )
        await service.save_pending(pending)
        outcome = self._replays[data.task_id] = _ReplayOutcome(info.number)
        tg.start_soon(self._run_replay, pending, ask, outcome)
        return outcome

    async def recover(self, tg: TaskGroup, replays: list[PendingReplay]) -> None:
        """Restores whose kernel replay waited for approval when the daemon
        stopped (`replays`, see :meth:`pending`): their ask is posted again (the
        same ask, published anew) and answering it replays and finishes the
        restore; one answered before the stop replays now."""
        service = self._checkpoints
        if service is None:
            return
        store = self._store
        for pending in replays:
            try:
                task = await self._loaded.load(pending.task_id)
            except CommandError:
                await service.drop_pending(pending.task_id)
                continue
            with self._loaded.settling(task):
                body = await store.read(store.db.ui_message, task.id, pending.ask_ts)
                if body is None:
                    await service.drop_pending(pending.task_id)
                    continue
                ask = _message_decoder.decode(body)
                if not ask.is_answered:
                    ask = await task.messages.update(ask)  # asked again, for every client
            outcome = self._replays[pending.task_id] = _ReplayOutcome(pending.checkpoint)
            tg.start_soon(self._run_replay, pending, ask, outcome)
            log.info("kernel replay asked again after restart", task_id=pending.task_id)

    async def _run_replay(
        self, pending: PendingReplay, ask: ClineMessage, outcome: _ReplayOutcome
    ) -> None:
        """Wait for the answer to the replay's ask, replay if approved, and finish
        the restore. Its outcome (or its failure) goes to whoever waits for it."""
        service = self._checkpoint_service()
        task_id = pending.task_id
        try:
            info = await service.checkpoint(task_id, pending.checkpoint)
            plan = await service.replay_plan(info)
            async with self._loaded.lease(task_id) as task:
                workspace = task.workspace
                if ask.is_answered:  # answered before a restart: the answer stands
                    response = AskResponse(ask.answer or AskResponse.NO)
                    answer = AskAnswer(response, by=ask.answered_by)
                else:
                    answer = await task.asks.wait(ask)
                if answer.approved:
                    replay = await service.replay(task_id, workspace, plan, pending.skip)
                else:
                    replay = KernelReplay(
                        approved=False, error="The user did not approve the replay."
                    )
                await task.set_state(TaskState.IDLE, TaskIdle(payload=(task_id,)))
            result = CheckpointRestoreResult(
                task_id=task_id,
                checkpoint=info.number,
                restore=pending.restore,
                undo_checkpoint=pending.undo_checkpoint,
                files=pending.files,
                rewound=pending.rewound,
                nested=pending.nested,
                open_notebooks=pending.open_notebooks,
                notes=pending.notes,
                kernel=replay,
            )
            await self._finish_restore(info, result)
            await service.drop_pending(task_id)
            outcome.set(result)
        except Exception as exc:
            log.exception("kernel replay failed", task_id=task_id)
            outcome.set(exc)
        finally:
            if self._replays.get(task_id) is outcome:
                del self._replays[task_id]


class _ReplayOutcome:
    """The outcome of a restore's kernel replay, for the command that waits for it."""

    def __init__(self, checkpoint: int) -> None:
        self.checkpoint = checkpoint
        self._done = anyio.Event()
        self._result: CheckpointRestoreResult | Exception | None = None

    def set(self, result: CheckpointRestoreResult | Exception) -> None:
        self._result = result
        self._done.set()

    async def wait(self) -> CheckpointRestoreResult:
        await self._done.wait()
        if isinstance(self._result, CheckpointRestoreResult):
            return self._result
        raise ReplayFailed(f"The kernel replay failed: {self._result}") from self._result


def _restored_text(result: CheckpointRestoreResult) -> str:
    """The `checkpoint_restored` message's text: what came back."""
    parts = [f"restored checkpoint {result.checkpoint} ({result.restore})"]
    if result.restore != "history":
        parts.append(f"{len(result.files)} file(s) changed")
    if result.open_notebooks:
        parts.append(
            "restored and saved where JupyterLab has them open: " + ", ".join(result.open_notebooks)
        )
    parts += result.notes
    if result.undo_checkpoint is not None:
        parts.append(f"undo: restore checkpoint {result.undo_checkpoint}")
    if result.nested:
        parts.append(
            "left as they are (git repositories of their own, not in checkpoints): "
            + ", ".join(result.nested)
        )
    if result.rewound:
        parts.append("history rewound")
    replay = result.kernel
    if replay is not None:
        if not replay.approved:
            parts.append("kernel not replayed (not approved)")
        elif replay.failed_at is not None:
            parts.append(f"kernel replay stopped at execution {replay.failed_at}: {replay.error}")
        elif replay.error:
            parts.append(f"kernel not replayed: {replay.error}")
        else:
            ran = sum(e.status == "ok" for e in replay.executions)
            names = ", ".join(v.name for v in replay.variables[:20]) or "none"
            parts.append(f"kernel replayed {ran} execution(s); variables: {names}")
    return "; ".join(parts)
