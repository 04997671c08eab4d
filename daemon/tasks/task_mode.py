"""The mode a task works in: its mode (an agent's task: its agent's) as the
settings and workspace define it now, held to the limits the task entered it
with, so that a workspace modes file that changes while the task runs never
gives the task more than it had; and switching it (:class:`TaskModes`).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import structlog

from hdsp.daemon.agents import UnknownAgent
from hdsp.daemon.modes import BUILT_IN_MODES, DEFAULT_MODE, Mode, UnknownMode, group_names
from hdsp.protocol import HistoryItem, TaskModeSwitched

from .deps import TaskDeps
from .record import TaskRecord

__all__ = ["TaskModes", "entered", "task_mode"]

log = structlog.get_logger("hdsp.tasks")


def task_mode(deps: TaskDeps, item: HistoryItem) -> Mode:
    """The mode of the task `item` (an agent's task: its agent's) as the
    settings and workspace define it now, held to the limits the task entered it
    with (`entered`): a workspace modes file that changes while the task runs
    (kernel or shell code can write it) never gives the task more than it had.
    A mode that no longer exists falls back to the built-in read-only `ask`,
    never to more than was given."""
    workspace = Path(item.workspace or ".")
    try:
        if item.agent is not None:
            agents = deps.agents
            mode = agents.mode_of(agents.get(item.agent), deps.modes, workspace)
        else:
            mode = deps.modes.get(item.mode or DEFAULT_MODE, workspace)
    except (UnknownMode, UnknownAgent):
        log.warning("task mode unknown; using ask", mode=item.mode)
        return BUILT_IN_MODES[0]
    if item.mode_groups is None or mode.source != "project":
        return mode
    held = mode.held_to(item.mode_groups, item.mode_file_regex)
    if held is not mode:
        log.warning("task mode widened by the workspace; held", mode=mode.slug, task_id=item.id)
    return held


def entered(item: HistoryItem, mode: Mode) -> HistoryItem:
    """`item` with `mode`'s limits recorded as the most it may get from its mode."""
    return msgspec.structs.replace(
        item, mode_groups=group_names(mode), mode_file_regex=mode.definition.file_regex
    )


class TaskModes:
    """The mode of the task of `record`: what it is now, and switching it (the
    switch_mode tool's service, and SwitchMode's)."""

    def __init__(self, deps: TaskDeps, record: TaskRecord) -> None:
        self._deps = deps
        self._record = record

    def mode(self) -> Mode:
        """The task's mode (see `task_mode`)."""
        return task_mode(self._deps, self._record.item)

    async def switch_mode(self, slug: str) -> str:
        """Put the task in mode `slug` (raises UnknownMode, a ValueError); every
        client gets taskModeSwitched."""
        record = self._record
        mode = self._deps.modes.get(slug, Path(record.item.workspace or "."))
        record.item = entered(msgspec.structs.replace(record.item, mode=mode.slug), mode)
        await record.emit(TaskModeSwitched(payload=(record.item.id, mode.slug)))
        return mode.name
