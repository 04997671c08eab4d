"""The agent engine: tasks, their turns and their histories."""

from __future__ import annotations

from .deps import TaskDeps, TaskKernels
from .errors import AskAnswered, ReplayFailed, TaskBusy, TaskNotFound
from .manager import TaskManager
from .task import Task

__all__ = [
    "AskAnswered",
    "ReplayFailed",
    "Task",
    "TaskBusy",
    "TaskDeps",
    "TaskKernels",
    "TaskManager",
    "TaskNotFound",
]
