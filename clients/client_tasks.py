"""The `Client`'s typed requests about tasks: :class:`TaskRequests`."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from hdsp.protocol import (
    CallTool,
    CallToolData,
    CancelTask,
    CheckpointDiff,
    CheckpointList,
    CheckpointRestoreResult,
    CloseTask,
    CondenseTask,
    CreateTask,
    CreateTaskData,
    DeleteMessage,
    DeleteMessageData,
    DeleteQueuedMessage,
    DiffCheckpoints,
    DiffCheckpointsData,
    EditMessage,
    EditMessageData,
    ForkTask,
    ForkTaskData,
    GetSystemPrompt,
    GetSystemPromptData,
    GetTask,
    GetTaskData,
    GetTaskPage,
    GetTaskPageData,
    ListCheckpoints,
    ListCheckpointsData,
    ListTasks,
    ListTasksData,
    OfferedMcpServer,
    PromptContext,
    Replay,
    ReplayData,
    ReplayPage,
    RespondToAsk,
    RespondToAskData,
    RestoreCheckpoint,
    RestoreCheckpointData,
    ResumeTask,
    RewindTask,
    RewindTaskData,
    SendMessage,
    SendMessageData,
    StartNewTask,
    StartNewTaskData,
    SwitchMode,
    SwitchModeData,
    SystemPromptText,
    TaskConfiguration,
    TaskList,
    TaskPage,
    TaskRef,
    TaskSnapshot,
    ToolCallResult,
    UpdateTodoList,
    UpdateTodoListData,
)

from .client_requests import Requests

__all__ = ["TaskRequests"]


class TaskRequests(Requests):
    """Start, steer and stop tasks, edit their history, read them back, call
    tools in them and restore their checkpoints."""

    async def start_task(
        self,
        text: str,
        *,
        profile: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        mode: str | None = None,
        images: list[str] | None = None,
        kernel_id: str | None = None,
        approvals: dict[str, Any] | None = None,
        allow_broad_workspace: bool = False,
        context: PromptContext | None = None,
        agent: str | None = None,
        mcp_servers: list[OfferedMcpServer] | None = None,
        kernel_provider: Literal["local", "gateway"] | None = None,
    ) -> TaskRef:
        """Start a task in `workspace` (by default the caller's working
        directory; a relative path is taken from it too). `approvals` overrides
        the daemon's auto-approval settings for this task (for example
        {"always_allow_write": True}). The daemon refuses `/`, the home directory
        itself and its own directories as a workspace unless
        `allow_broad_workspace` says that one was meant. `context` says what the
        message is about (a notebook, its active cell; see `PromptContext`);
        `agent` names the agent the task runs (seed 002); `mcp_servers` are MCP
        servers this client offers the task (kept in hdspd's memory only);
        `kernel_provider` where its kernels run (local, or gateway: a Jupyter
        server)."""
        config = TaskConfiguration(
            api_config_name=profile,
            workspace=self._workspace(workspace),
            mode=mode,
            kernel_id=kernel_id,
            approvals=approvals,
            allow_broad_workspace=allow_broad_workspace,
            agent=agent,
            kernel_provider=kernel_provider,
        )
        data = StartNewTaskData(
            text=text,
            configuration=config,
            images=images,
            context=context,
            mcp_servers=mcp_servers,
        )
        return await self.request(StartNewTask(data=data))

    async def send_message(
        self,
        task_id: str,
        text: str | None = None,
        *,
        images: list[str] | None = None,
        steer: bool = False,
        context: PromptContext | None = None,
        mcp_servers: list[OfferedMcpServer] | None = None,
    ) -> TaskRef:
        """Send a message; to a working task it waits for the turn to end, or, with
        `steer`, joins the running turn before its next model request. `context`
        says what it is about (see `PromptContext`); `mcp_servers`, if given,
        replace the MCP servers this client offered the task."""
        data = SendMessageData(
            text=text,
            images=images,
            delivery="steer" if steer else "queue",
            context=context,
            mcp_servers=mcp_servers,
        )
        return await self.request(SendMessage(task_id=task_id, data=data))

    async def respond_to_ask(
        self,
        task_id: str,
        ask_ts: int,
        response: str = "yesButtonClicked",
        text: str | None = None,
        *,
        images: list[str] | None = None,
        context: PromptContext | None = None,
    ) -> TaskRef:
        """Answer a waiting ask: "yesButtonClicked", "noButtonClicked" or
        "messageResponse" (with text); `context`: what an answer with text is
        about (a notebook, a cell), as a message's."""
        data = msgspec.convert(
            {"askTs": ask_ts, "response": response, "text": text, "images": images},
            RespondToAskData,
        )
        if context is not None:
            data = msgspec.structs.replace(data, context=context)
        return await self.request(RespondToAsk(task_id=task_id, data=data))

    async def delete_queued_message(self, task_id: str, message_id: str) -> TaskRef:
        return await self.request(DeleteQueuedMessage(task_id=task_id, data=message_id))

    async def cancel_task(self, task_id: str) -> TaskRef:
        return await self.request(CancelTask(task_id=task_id))

    async def close_task(self, task_id: str) -> TaskRef:
        return await self.request(CloseTask(task_id=task_id))

    async def condense_task(self, task_id: str) -> TaskRef:
        """Condense the task's conversation now (see `CondenseTask`)."""
        return await self.request(CondenseTask(task_id=task_id))

    async def rewind_task(self, task_id: str, ts: int, *, include: bool = True) -> TaskRef:
        """Take the task back to its message `ts` (removing it too with `include`)."""
        data = RewindTaskData(task_id=task_id, ts=ts, include=include)
        return await self.request(RewindTask(data=data))

    async def edit_message(
        self,
        task_id: str,
        ts: int,
        text: str,
        *,
        images: list[str] | None = None,
        context: PromptContext | None = None,
    ) -> TaskRef:
        """Replace the user's message `ts` with `text` (about `context`, if given)
        and go on from there."""
        data = EditMessageData(task_id=task_id, ts=ts, text=text, images=images, context=context)
        return await self.request(EditMessage(data=data))

    async def delete_message(self, task_id: str, ts: int) -> TaskRef:
        """Delete the user's message `ts` from the task's history (see DeleteMessage)."""
        data = DeleteMessageData(task_id=task_id, ts=ts)
        return await self.request(DeleteMessage(data=data))

    async def fork_task(self, task_id: str, ts: int) -> TaskRef:
        """A new task with this one's history up to its message `ts`: its TaskRef."""
        return await self.request(ForkTask(data=ForkTaskData(task_id=task_id, ts=ts)))

    async def create_task(
        self,
        title: str,
        *,
        workspace: str | os.PathLike[str] | None = None,
        mode: str | None = None,
    ) -> TaskRef:
        """A task that runs no model turn and waits, for `call_tool` (CreateTask);
        `workspace` defaults to this process's working directory."""
        data = CreateTaskData(title=title, workspace=self._workspace(workspace), mode=mode)
        return await self.request(CreateTask(data=data))

    async def call_tool(
        self,
        task_id: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        kernel_id: str | None = None,
    ) -> ToolCallResult:
        """Run one of hdsp's tools in the task as its model would (CallTool): the
        approval policy decides, and an ask waits for any client's answer; so
        the reply waits without a time limit (cancel the task to stop it)."""
        data = CallToolData(tool=tool, arguments=dict(arguments), kernel_id=kernel_id)
        return await self.request(CallTool(task_id=task_id, data=data), timeout=math.inf)

    async def list_checkpoints(self, task_id: str) -> CheckpointList:
        """The task's checkpoints, oldest first (see ListCheckpoints)."""
        return await self.request(ListCheckpoints(data=ListCheckpointsData(task_id=task_id)))

    async def diff_checkpoints(
        self, task_id: str, checkpoint: int, to: int | None = None
    ) -> CheckpointDiff:
        """What changed from checkpoint `checkpoint` to `to` (None: to the files now)."""
        data = DiffCheckpointsData(task_id=task_id, checkpoint=checkpoint, to=to)
        return await self.request(DiffCheckpoints(data=data))

    async def restore_checkpoint(
        self,
        task_id: str,
        checkpoint: int,
        *,
        restore: Literal["files", "history", "both"] = "files",
        with_kernel: bool = False,
        skip: Sequence[int] = (),
        timeout: float | None = None,
    ) -> CheckpointRestoreResult:
        """Restore a checkpoint (see RestoreCheckpoint). With `with_kernel`, the
        reply waits for someone to answer the task's replay ask."""
        data = RestoreCheckpointData(
            task_id=task_id,
            checkpoint=checkpoint,
            restore=restore,
            with_kernel=with_kernel,
            skip=list(skip),
        )
        return await self.request(RestoreCheckpoint(data=data), timeout=timeout)

    async def resume_task(self, task_id: str) -> TaskRef:
        return await self.request(ResumeTask(data=task_id))

    async def list_tasks(
        self, *, cursor: str | None = None, limit: int = 50, id_prefix: str | None = None
    ) -> TaskList:
        """A page of tasks, newest first; with `id_prefix`, only (up to `limit` of)
        those whose id starts with it."""
        data = ListTasksData(cursor=cursor, limit=limit, id_prefix=id_prefix)
        return await self.request(ListTasks(data=data))

    async def get_task(self, task_id: str) -> TaskSnapshot:
        return await self.request(GetTask(data=GetTaskData(task_id=task_id)))

    async def get_task_page(
        self,
        task_id: str,
        *,
        start: int | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> TaskPage:
        """Up to `limit` of a task's messages, oldest first, from index `start` (0
        by default) or after a previous page (its `next_cursor`); the last page has
        no `next_cursor`."""
        data = GetTaskPageData(task_id=task_id, start=start, cursor=cursor, limit=limit)
        return await self.request(GetTaskPage(data=data))

    async def replay(
        self, since_seq: int, *, task_id: str | None = None, limit: int = 1000
    ) -> ReplayPage:
        return await self.request(
            Replay(data=ReplayData(since_seq=since_seq, task_id=task_id, limit=limit))
        )

    async def get_system_prompt(
        self,
        task_id: str | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        mode: str | None = None,
    ) -> SystemPromptText:
        """The exact system prompt of the task's next request, or, without a
        task, of a new task in `workspace` and `mode`."""
        data = GetSystemPromptData(
            task_id=task_id,
            workspace=None if task_id else self._workspace(workspace),
            mode=mode,
        )
        return await self.request(GetSystemPrompt(data=data))

    async def switch_mode(self, task_id: str, mode: str) -> TaskRef:
        return await self.request(SwitchMode(task_id=task_id, data=SwitchModeData(mode=mode)))

    async def update_todo_list(self, task_id: str, markdown: str) -> TaskRef:
        """Replace the task's todo list with a markdown checklist (`- [ ] item`,
        `- [-] in progress`, `- [x] done`); the model is told of the edit."""
        data = UpdateTodoListData(markdown=markdown)
        return await self.request(UpdateTodoList(task_id=task_id, data=data))
