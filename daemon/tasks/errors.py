"""The task engine's refusals (drawn in :mod:`hdsp.daemon.errors`, under
:class:`~hdsp.daemon.errors.CommandError`): each names why a command on a task is
refused and fixes the wire code it answers with."""

from __future__ import annotations

from hdsp.daemon.errors import CommandError
from hdsp.protocol import ErrorCode

__all__ = ["AskAnswered", "ReplayFailed", "TaskBusy", "TaskNotFound"]


class TaskNotFound(CommandError):
    """No task has the id asked for."""

    code = ErrorCode.TASK_NOT_FOUND

    def __init__(self, task_id: str) -> None:
        super().__init__(f"No task {task_id!r}; `hdsp tasks` lists the tasks.")


class TaskBusy(CommandError):
    """The task is doing something the command would disturb (or its queue is full)."""

    code = ErrorCode.TASK_BUSY


class AskAnswered(CommandError):
    """The ask was answered already (by another client, or it timed out)."""

    code = ErrorCode.ALREADY_ANSWERED

    def __init__(self, ask_ts: int, task_id: str) -> None:
        super().__init__(f"The ask {ask_ts} of task {task_id} was already answered.")


class ReplayFailed(CommandError):
    """The kernel replay of a checkpoint's restore failed (a bug, or the kernel's)."""

    code = ErrorCode.INTERNAL
