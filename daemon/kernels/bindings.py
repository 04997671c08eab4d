"""Which kernel each task's code runs in, and what the task is to be told about it.

A task is bound to one kernel at a time (the one started for it on first use,
or one a client named); a kernel serves any number of tasks. What happened to a
task's kernel while the task did not run code (it died, was restarted, was
culled) is kept as notes, at most a few, handed to the task the next time it
runs code, so that the model knows its variables are gone.

The tasks themselves are the task manager's: the bindings know them only by id,
through two callbacks handed in (`task_busy`, `on_culled`), so that the kernels
layer imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

__all__ = ["OnCulled", "TaskBindings", "TaskBusy"]

log = structlog.get_logger("hdsp.kernels")

#: Whether a task is working now (a turn runs): its kernel is never culled then.
TaskBusy = Callable[[str], bool]
#: Told (task id, note) when a task's kernel was culled, to record it in the
#: task's history.
OnCulled = Callable[[str, str], Awaitable[None]]

#: Notes kept for a task about what happened to its kernel while it was away.
MAX_NOTES = 8


def _never_busy(task_id: str) -> bool:
    return False


class TaskBindings:
    def __init__(self, *, task_busy: TaskBusy | None = None, on_culled: OnCulled | None = None):
        self._task_busy = task_busy or _never_busy
        self._on_culled = on_culled
        self._kernel_of: dict[str, str] = {}
        self._tasks_of: dict[str, set[str]] = {}
        self._notes: dict[str, list[str]] = {}

    # ---- the bindings -----------------------------------------------------------

    def bind(self, task_id: str, kernel_id: str) -> str | None:
        """Make `task_id`'s code run in `kernel_id` from now on; the kernel it
        was bound to before, if any."""
        old = self._kernel_of.get(task_id)
        if old is not None:
            self._tasks_of.get(old, set()).discard(task_id)
        self._kernel_of[task_id] = kernel_id
        self._tasks_of.setdefault(kernel_id, set()).add(task_id)
        return old

    def restore(self, task_id: str, kernel_id: str | None) -> None:
        """Put back the binding `bind` returned (a kernel failed to start)."""
        if kernel_id is None:
            self.unbind(task_id)
        else:
            self.bind(task_id, kernel_id)

    def unbind(self, task_id: str) -> str | None:
        """Forget the task's binding (not its notes); the kernel it had, if any."""
        kernel_id = self._kernel_of.pop(task_id, None)
        if kernel_id is not None:
            self._tasks_of.get(kernel_id, set()).discard(task_id)
        return kernel_id

    def kernel_of(self, task_id: str) -> str | None:
        """The kernel the task was last bound to (it may be gone since)."""
        return self._kernel_of.get(task_id)

    def tasks_of(self, kernel_id: str) -> frozenset[str]:
        return frozenset(self._tasks_of.get(kernel_id, ()))

    def kernel_gone(self, kernel_id: str) -> None:
        """The kernel is gone. Its tasks stay bound to it, so that each learns
        so when it next wants its kernel."""
        self._tasks_of.pop(kernel_id, None)

    def any_busy(self, kernel_id: str) -> bool:
        """Whether a task the kernel serves is working now."""
        return any(self._task_busy(task_id) for task_id in self._tasks_of.get(kernel_id, ()))

    # ---- notes --------------------------------------------------------------------

    def note(self, kernel_id: str, note: str, *, except_task: str | None = None) -> None:
        """Tell the kernel's tasks (but `except_task`, which saw it happen) `note`."""
        for task_id in self._tasks_of.get(kernel_id, ()):
            if task_id != except_task:
                notes = self._notes.setdefault(task_id, [])
                if len(notes) < MAX_NOTES:
                    notes.append(note)

    def take_notes(self, task_id: str) -> list[str]:
        """The task's notes, oldest first; they are given once."""
        return self._notes.pop(task_id, [])

    def drop_notes(self, task_id: str) -> None:
        self._notes.pop(task_id, None)

    async def culled(self, kernel_id: str, note: str) -> list[str]:
        """The kernel was shut down for idling: each of its tasks gets `note`
        (in place of older ones: the kernel they were about is gone), and
        `on_culled` is told. Returns the tasks, sorted."""
        tasks = sorted(self._tasks_of.get(kernel_id, ()))
        for task_id in tasks:
            self._notes[task_id] = [note]
        if self._on_culled is not None:
            for task_id in tasks:
                try:
                    await self._on_culled(task_id, note)
                except Exception:
                    log.exception("recording a culled kernel failed", task_id=task_id)
        return tasks
