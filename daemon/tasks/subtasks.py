"""Agent calls as child tasks (seed 002): `call_agent` runs the named agent as a
task of its own, with a fresh context and its own durable history, linked to
its caller by `parentTaskId`/`rootTaskId`/`parentCallId` (the child) and
`childIds`/`delegatedToId` (the parent). The caller's topic shows
`taskSpawned` and `taskDelegated` when the child starts, and
`taskDelegationCompleted` with what it returned when it is done, and
`taskPaused` / `taskUnpaused` while it waits for children; the child's own
events go to its own topic.

Two message kinds only: the call's message goes forward (the child's first
message), the child's return goes back to its caller and to no one else (its
`result`, the caller's tool result). Self and cyclic calls are not blocked; an
operator's depth and fan-out limits (`agent_limits`) are, as the call's error.

Durability: the child is inserted, with its parent's new `childIds`, in one
transaction, and carries the call's id; a call the daemon left running attaches
to its child again after a restart (resuming it where it stood), so the caller
receives each child's return exactly once. Cancelling a call (Stop on any task
of the tree) stops its child, and so the whole subtree below it.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.agents import BUILT_IN_AGENTS, AgentCatalog, UnknownAgent
from hdsp.daemon.config.agents import AgentDefinition
from hdsp.daemon.store import Journal, Store, update_task
from hdsp.daemon.tools import ToolError
from hdsp.protocol import (
    AgentInfo,
    AgentList,
    SendMessageData,
    TaskActive,
    TaskDelegationCompleted,
    TaskPaused,
    TaskState,
    TaskUnpaused,
)

from .loaded import LoadedTasks
from .task import Task

__all__ = ["Subtasks", "TaskHost"]

log = structlog.get_logger("hdsp.tasks")

#: States in which nothing of a task runs or waits, nor of the tasks it called.
_FINAL_STATES = (TaskState.COMPLETED, TaskState.ABORTED)


class TaskHost(Protocol):
    """What agent calls need of the task manager (beside the loaded tasks)."""

    async def spawn_agent(
        self, agent: AgentDefinition, message: str, *, parent: Task, call_id: str
    ) -> Task: ...

    def task_group(self) -> TaskGroup: ...

    @property
    def closing(self) -> bool: ...


class Subtasks:
    """The task manager's :class:`~hdsp.daemon.agents.AgentCaller`, over the
    manager's loaded tasks (`loaded`)."""

    def __init__(
        self,
        host: TaskHost,
        loaded: LoadedTasks,
        store: Store,
        journal: Journal,
        agents: AgentCatalog,
    ) -> None:
        self._host = host
        self._loaded = loaded
        self._store = store
        self._journal = journal
        #: Replaced when the settings change.
        self.agents = agents
        #: Agent calls running now, by calling task.
        self._running: Counter[str] = Counter()

    async def call_agent(
        self, caller_task_id: str, call_id: str, agent_name: str, message: str
    ) -> str:
        async with self._loaded.lease(caller_task_id) as parent:
            child = await self._existing_child(parent, call_id)
            if child is None:
                agent = await self._allowed(parent, agent_name)
            # The call holds its place in the fan-out from here (calls of one
            # reply check it at once).
            self._running[parent.id] += 1
            if self._running[parent.id] == 1:
                # The caller waits for its children (Roo's paused parent).
                await self._journal.emit(TaskPaused(payload=(parent.id,)))
            try:
                if child is None:
                    child = await self._host.spawn_agent(
                        agent, message, parent=parent, call_id=call_id
                    )
                return await self._wait_return(parent, child, message)
            finally:
                self._running[parent.id] -= 1
                if not self._running[parent.id]:
                    del self._running[parent.id]
                    with anyio.move_on_after(5, shield=True):
                        await self._journal.emit(TaskUnpaused(payload=(parent.id,)))

    async def _allowed(self, parent: Task, agent_name: str) -> AgentDefinition:
        """The agent `parent` may call now; a ToolError says why not."""
        try:
            agent = self.agents.get(agent_name)
        except UnknownAgent as exc:
            raise ToolError(str(exc)) from None
        limits = self.agents.limits
        if self._running[parent.id] >= limits.max_fan_out:
            raise ToolError(
                f"{agent_name} was not called: {self._running[parent.id]} agent calls of "
                f"yours run already, and this hdsp allows at most {limits.max_fan_out} at "
                "once (the operator's agent_limits.max_fan_out). Wait for their results first."
            )
        depth = await self._depth(parent)
        if depth >= limits.max_depth:
            raise ToolError(
                f"{agent_name} was not called: this call is {depth + 1} levels below the "
                f"task the user started, and this hdsp allows at most {limits.max_depth} "
                "(the operator's agent_limits.max_depth). Do the work yourself, or finish "
                "and return what you have."
            )
        if self._running[parent.id] >= limits.max_fan_out:
            # (Checked again: the depth's look-up may have let other calls in.)
            raise ToolError(
                f"{agent_name} was not called: {self._running[parent.id]} agent calls of "
                f"yours run already, and this hdsp allows at most {limits.max_fan_out} at "
                "once (the operator's agent_limits.max_fan_out). Wait for their results first."
            )
        return agent

    async def _depth(self, task: Task) -> int:
        """How far below its root `task` is (the root is 0)."""
        depth = 0
        parent_id = task.item.parent_task_id
        while parent_id is not None and depth < 10_000:
            depth += 1
            async with self._loaded.lease(parent_id) as ancestor:
                parent_id = ancestor.item.parent_task_id
        return depth

    async def _existing_child(self, parent: Task, call_id: str) -> Task | None:
        """The child the call `call_id` started before a restart, if any."""
        for child_id in parent.item.child_ids or []:
            child = await self._loaded.load(child_id)  # settled by _wait_return
            if child.item.parent_call_id == call_id:
                return child
            self._loaded.settle(child)
        return None

    async def _wait_return(self, parent: Task, child: Task, message: str) -> str:
        """Wait for `child`'s return (resuming it if it stopped with the daemon);
        a cancelled call stops it, unless the daemon is stopping (it resumes then)."""
        try:
            try:
                await self._go_on(child, message)
                await child.wait_turn_over()
            except anyio.get_cancelled_exc_class():
                with anyio.move_on_after(10, shield=True):
                    if not self._host.closing:  # (stopping, the call resumes after)
                        await child.stop()
                        await self._delegation_over(parent, child)
                raise
            agent = child.item.agent or "the agent"
            if child.state is not TaskState.COMPLETED:
                await self._delegation_over(parent, child)
                raise ToolError(
                    f"{agent} stopped before it finished (task {child.id}, "
                    f"{child.state.value}); it returned nothing."
                )
            returned = child.item.result
            if returned is None:
                returned = f"({agent} finished without a message.)"
            await self._returned(parent, child, returned)
            return returned
        finally:
            self._loaded.settle(child)

    async def _go_on(self, child: Task, message: str) -> None:
        """Start the turn of a child that has none running: one the daemon left
        open goes on where it stood, one that never got its message gets it."""
        if child.busy or child.state in (TaskState.COMPLETED, TaskState.ABORTED):
            return
        tg = self._host.task_group()
        if child.turn is not None:
            await child.set_state(TaskState.RUNNING, TaskActive(payload=(child.id,)))
            child.start_turn(tg, resume=True)
        elif child.history.awaits_reply:
            child.start_turn(tg)
        elif not child.history.messages:
            child.start_turn(tg, message=SendMessageData(text=message))

    async def _returned(self, parent: Task, child: Task, returned: str) -> None:
        """Tell every client the child returned; the parent delegates no more to it."""
        await self._delegation_over(
            parent, child, TaskDelegationCompleted(payload=(parent.id, child.id, returned))
        )
        log.info("agent returned", task_id=parent.id, child_id=child.id)

    async def _delegation_over(
        self, parent: Task, child: Task, returned: TaskDelegationCompleted | None = None
    ) -> None:
        """The parent delegates no more to `child`, which `returned` (or stopped
        without a return): to another child whose call still runs, if any."""
        still = [c for c in parent.item.child_ids or [] if c != child.id and self._is_running(c)]
        parent.item = msgspec.structs.replace(
            parent.item,
            delegated_to_id=still[-1] if still else None,
            status="delegated" if still else "active",
            completed_by_child_id=child.id
            if returned is not None
            else parent.item.completed_by_child_id,
        )
        if returned is None:
            await self._journal.write(update_task(parent.item))
        else:
            await self._journal.emit(returned, update_task(parent.item))

    def _is_running(self, task_id: str) -> bool:
        return self._loaded.is_busy(task_id)

    async def stop_below(self, top: Task) -> None:
        """Stop every task below `top` that still runs or waits (Stop on any task
        of a tree of agents stops its subtree). Stopping a caller stops the
        children its calls wait for; this also reaches the children a restart
        left waiting for a caller that was stopped before it came back for them."""
        below = list(top.item.child_ids or [])
        if below:
            await self._journal.flush_for_read()  # unloaded tasks' rows as they stand
        while below:
            task_id = below.pop()
            task = self._loaded.get(task_id)
            if task is None:
                row = await self._store.read(self._store.db.get_task, task_id)
                if row is None or TaskState(row[3]) in _FINAL_STATES:
                    continue  # nothing of it runs, nor (so) below it
            elif not task.busy and task.state in _FINAL_STATES:
                continue
            async with self._loaded.lease(task_id) as task:
                if task.busy:
                    await task.stop()
                await task.abandon()
                below += task.item.child_ids or []

    def list_agents(self) -> AgentList:
        """ListAgents: the built-in agents and the settings' (which replace a
        built-in one of the same name), with the tree limits."""
        catalog = self.agents
        built_in = {a.name: a for a in BUILT_IN_AGENTS}
        return AgentList(
            agents=[
                AgentInfo(
                    name=a.name,
                    instructions=a.instructions,
                    profile=a.profile,
                    groups=[str(g) for g in a.groups],
                    mode=a.mode,
                    source="built-in" if built_in.get(a.name) is a else "settings",
                )
                for a in catalog.all()
            ],
            max_depth=catalog.limits.max_depth,
            max_fan_out=catalog.limits.max_fan_out,
        )
