"""The agent engine: tasks, their turns and their histories."""

from __future__ import annotations

from .deps import TaskDeps, TaskKernels
from .manager import TaskManager
from .task import Task

__all__ = ["Task", "TaskDeps", "TaskKernels", "TaskManager"]
