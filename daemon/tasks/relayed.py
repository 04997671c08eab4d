"""Tool calls relayed from another agent (CallTool, issue 23): which tools may be
relayed, and the reply a finished call gives.

A relayed call runs in its task like a call of the task's own model (see
:meth:`.task.Task.run_relayed_call`): what decides whether it runs is the
daemon's approval policy, never the relaying client. Only tools that read, write
or run code or commands may be relayed: the tools that steer a task (complete
it, ask its user a question, switch its mode, keep its todo list) belong to the
task's own model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.errors import BadRequest
from hdsp.daemon.kernels import KernelNotFound
from hdsp.daemon.modes import DEFAULT_MODE
from hdsp.daemon.store import insert_task
from hdsp.daemon.tools import ToolCategory, ToolRegistry
from hdsp.protocol import (
    CallToolData,
    CreateTaskData,
    HistoryItem,
    RelayedImage,
    Say,
    TaskCreated,
    TaskRef,
    TaskState,
    ToolCallResult,
)

from .commits import committed_unless_failing
from .deps import TaskDeps
from .errors import TaskBusy
from .loaded import LoadedTasks
from .task_mode import entered, task_mode
from .turn import CallState
from .workspaces import TaskWorkspaces

__all__ = ["RELAYABLE", "RelayedCalls", "relay_refusal", "relayed_result"]

log = structlog.get_logger("hdsp.tasks")

#: The categories of tools a client may relay calls to.
RELAYABLE = frozenset(
    {ToolCategory.READ, ToolCategory.WRITE, ToolCategory.EXECUTE, ToolCategory.COMMAND}
)

#: How a finished call's result text starts when it did not run.
_DENIED = "The user denied this operation."


def relay_refusal(tools: ToolRegistry, name: str) -> str | None:
    """Why a call to the tool `name` cannot be relayed, or None when it can."""
    tool = tools.get(name)
    relayable = sorted(n for n in tools.names() if tools[n].category in RELAYABLE)
    if tool is None:
        return f"There is no tool named {name[:80]!r}. The tools are: {', '.join(relayable)}."
    if tool.category not in RELAYABLE:
        return (
            f"The tool {name} steers a task and belongs to its own model; relayed calls may "
            f"use: {', '.join(relayable)}."
        )
    return None


def relayed_result(task_id: str, call: CallState) -> ToolCallResult:
    """The reply to CallTool for `call`, as far as it got."""
    blocks = call.result or []
    text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
    images = [
        RelayedImage(media_type=b.media_type, data=b.data)
        for b in blocks
        if isinstance(b, ImageBlock)
    ]
    status: Literal["done", "denied", "cancelled"]
    if call.status != "done":
        status = "cancelled"
        text = text or "The call was cancelled before it finished."
    elif call.result is not None and text.startswith(("Denied: ", _DENIED)):
        status = "denied"
    else:
        status = "done"
    return ToolCallResult(
        task_id=task_id,
        tool=call.name,
        status=status,
        is_error=call.is_error or status != "done",
        text=text,
        images=images,
    )


class RelayedCalls:
    """CreateTask and CallTool: a task that runs no model turn of its own, and
    the tool calls a client relays into it. `check_open` refuses while the
    daemon shuts down; `next_number` numbers a new task as the manager numbers
    every one; the calls run in `task_group` (the manager's)."""

    def __init__(
        self,
        deps: TaskDeps,
        loaded: LoadedTasks,
        workspaces: TaskWorkspaces,
        *,
        check_open: Callable[[], None],
        next_number: Callable[[], int],
        task_group: Callable[[], TaskGroup],
    ) -> None:
        self._deps = deps
        self._loaded = loaded
        self._workspaces = workspaces
        self._check_open = check_open
        self._next_number = next_number
        self._task_group = task_group

    async def create_task(self, data: CreateTaskData) -> TaskRef:
        """CreateTask: a task that runs no model turn and waits (issue 23), for a
        client that relays another agent's tool calls into it (CallTool)."""
        self._check_open()
        deps = self._deps
        workspace = await self._workspaces.checked(data.workspace, data.allow_broad_workspace)
        mode = deps.modes.get(data.mode or DEFAULT_MODE, Path(workspace)).slug
        task_id = str(uuid.uuid4())
        item = HistoryItem(
            id=task_id,
            number=self._next_number(),
            ts=0,
            task=data.title,
            workspace=workspace,
            mode=mode,
            api_config_name=None,  # the current profile, if a message ever starts a turn
            status="active",
            state=TaskState.IDLE,
        )
        task = self._loaded.create(entered(item, task_mode(deps, item)))
        with self._loaded.settling(task):
            await deps.journal.emit(TaskCreated(payload=(task_id,)), insert_task(task.item))
            await task.messages.say(Say.TEXT, data.title)
            await committed_unless_failing(deps.store, deps.journal)
        log.info("task created", task_id=task_id)
        return TaskRef(task_id=task_id, state=TaskState.IDLE)

    async def call_tool(self, task_id: str, data: CallToolData) -> ToolCallResult:
        """CallTool: one of hdsp's tools run in a task that is not working, on
        the path of its model's calls (schema, mode, approval, checkpoint)."""
        self._check_open()
        problem = relay_refusal(self._deps.tools, data.tool)
        if problem is not None:
            raise BadRequest(problem)
        async with self._loaded.lease(task_id) as task:
            kernels = self._deps.kernels
            if data.kernel_id is not None:
                if kernels is None or not kernels.has_kernel(data.kernel_id):
                    raise KernelNotFound(
                        f"No kernel {data.kernel_id!r}; ListKernels lists the kernels.",
                    )
            if task.busy or task.pending_ask is not None:
                raise TaskBusy(
                    f"Task {task_id} is working; a relayed call waits until it is not.",
                )
            if data.kernel_id is not None and kernels is not None:
                kernels.bind_task(task_id, data.kernel_id)
            call = await task.run_relayed_call(self._task_group(), data.tool, data.arguments)
        return relayed_result(task_id, call)
