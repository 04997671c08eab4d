"""New tasks: the user's (StartNewTask) and an agent's call (a child task, seed
002), created and started one way, and numbered in the order they were made.

What a new task is given is checked first: its text's size, its workspace, the
kernel its notebook context or its configuration names, its kernel provider,
its mode, its agent and its approval settings; the MCP servers its client
offers are handed on before its first turn asks the model anything.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import msgspec
import structlog
from anyio.abc import TaskGroup

from hdsp.daemon.config import ProfileNotFound
from hdsp.daemon.config.agents import AgentDefinition
from hdsp.daemon.conversation import ApiMessage
from hdsp.daemon.errors import BadRequest, HdspError
from hdsp.daemon.kernels import KernelNotFound
from hdsp.daemon.modes import DEFAULT_MODE, instruction_sources, instructions_text
from hdsp.daemon.store import Write, insert_task, update_task
from hdsp.daemon.tools import ToolError
from hdsp.protocol import (
    HistoryItem,
    PromptContext,
    Say,
    StartNewTaskData,
    SystemPromptText,
    TaskCreated,
    TaskDelegated,
    TaskRef,
    TaskSpawned,
    TaskState,
)

from .commits import committed_unless_failing
from .deps import TaskDeps
from .loaded import LoadedTasks
from .mcp_offers import McpOffers, offer_mcp
from .notebook_context import resolve_context
from .prompt import system_prompt
from .prompt_size import check_prompt_size
from .slash_commands import expand_command
from .task import Task
from .task_mode import entered, task_mode
from .turn import user_content
from .workspaces import TaskWorkspaces

__all__ = ["NewTasks"]

log = structlog.get_logger("hdsp.tasks")


class NewTasks:
    """Creates and starts new tasks, and numbers every task the daemon makes
    (:meth:`next_number`, for the other ways a task is made too). The first
    turns run in `task_group` (the manager's); `check_open` refuses while the
    daemon shuts down. It is the :class:`~.subtasks.TaskHost` of agent calls."""

    def __init__(
        self,
        deps: TaskDeps,
        loaded: LoadedTasks,
        workspaces: TaskWorkspaces,
        mcp_offers: McpOffers | None,
        *,
        check_open: Callable[[], None],
        task_group: Callable[[], TaskGroup],
    ) -> None:
        self._deps = deps
        self._loaded = loaded
        self._workspaces = workspaces
        self._mcp_offers = mcp_offers
        self._check_open = check_open
        self._task_group = task_group
        #: The number of the newest task (read from the store when the manager runs).
        self.number = 0

    @property
    def closing(self) -> bool:
        """Whether the daemon is stopping (TaskHost of .subtasks)."""
        return self._deps.closing()

    def task_group(self) -> TaskGroup:
        """Where new tasks' first turns run (TaskHost of .subtasks)."""
        return self._task_group()

    def next_number(self) -> int:
        """The number of the next task made."""
        self.number += 1
        return self.number

    def preview_system_prompt(self, workspace: str | None, mode: str | None) -> SystemPromptText:
        """The system prompt a new task in `workspace` and `mode` would get."""
        where = Path(workspace or self._workspaces.default)
        found = self._deps.modes.get(mode or DEFAULT_MODE, where)
        tools = self._deps.tools.scoped(where)
        sources = instruction_sources(
            workspace=where,
            mode=found,
            global_instructions=self._deps.custom_instructions,
            task_instructions=None,
        )
        text = system_prompt(
            workspace=str(where),
            mode=f"{found.slug} ({found.name})",
            tools=[n for n in tools.names() if found.allows(tools[n])],
            role=found.definition.role_definition,
            instructions=instructions_text(sources),
        )
        return SystemPromptText(text=text, mode=found.slug)

    async def start_task(self, data: StartNewTaskData, *, sender: str | None = None) -> TaskRef:
        """StartNewTask (`sender`: over TCP, the name the client's key is
        authorised under, recorded on the task's first message)."""
        self._check_open()
        tg = self._task_group()
        deps = self._deps
        config = data.configuration
        profile = deps.providers.resolve_name(config.api_config_name)
        if not data.text.strip() and not data.images:
            raise BadRequest("A new task needs text or images.")
        check_prompt_size(data.text, deps.providers, profile)
        workspace = await self._workspaces.directory(config.workspace)
        if not config.allow_broad_workspace:
            problem = await self._workspaces.breadth(workspace)
            if problem is not None:
                given = "" if config.workspace else " (no workspace was given: the daemon's own)"
                raise BadRequest(
                    f"Refusing {workspace} as the workspace{given}: it is {problem}, and the "
                    "agent reads everything in its workspace without asking. Run hdsp in "
                    "the project's directory or pass --workspace DIR; to use it anyway, "
                    "name it with --workspace and add --allow-broad-workspace "
                    "(allowBroadWorkspace in the task's configuration).",
                )
        kernels = deps.kernels
        context = await resolve_context(data.context, Path(workspace))
        # The notebook's own kernel (the context names it) wins over the configuration's.
        kernel_id = (context.kernel_id if context else None) or config.kernel_id
        if kernel_id is not None and not (kernels and kernels.has_kernel(kernel_id)):
            raise KernelNotFound(
                f"No kernel {kernel_id!r}; ListKernels lists the kernels.",
            )
        if kernels is not None and config.kernel_provider is not None:
            try:
                kernels.check_provider(config.kernel_provider, profile)
            except HdspError as exc:
                raise BadRequest(exc.message) from None
        chosen = deps.modes.get(config.mode or DEFAULT_MODE, Path(workspace))
        text, command_mode = await expand_command(
            deps.slash_commands, deps.modes, data.text, Path(workspace), chosen
        )
        mode = command_mode or chosen.slug
        if config.agent is not None:
            deps.agents.get(config.agent)
        task_id = str(uuid.uuid4())
        if config.approvals:
            try:
                deps.approvals.configure_task(task_id, config.approvals)
            except ValueError as exc:
                raise BadRequest(f"Invalid approval settings: {exc}") from None
        if kernel_id is not None and kernels is not None:
            kernels.bind_task(task_id, kernel_id)
        item = HistoryItem(
            id=task_id,
            number=0,
            ts=0,
            task=data.text,
            workspace=workspace,
            mode=mode,
            custom_instructions=config.custom_instructions,
            api_config_name=profile,
            status="active",
            agent=config.agent,
            kernel_provider=config.kernel_provider,
        )
        # Offered before its first turn starts: that turn's first request has them.
        offer_mcp(self._mcp_offers, task_id, workspace, data.mcp_servers)
        await self._start(tg, item, text, data.images, context, sent_by=sender)
        if kernels is not None and kernel_id is None:
            kernels.prewarm_for_task(task_id, workspace)  # while the model thinks
        log.info("task started", task_id=task_id, profile=profile, agent=config.agent)
        # The reply hands out the task's id: the task must be on disk first, or a
        # crash right after it leaves the client an id that names nothing.
        await committed_unless_failing(deps.store, deps.journal)
        return TaskRef(task_id=task_id, state=TaskState.RUNNING)

    async def spawn_agent(
        self, agent: AgentDefinition, message: str, *, parent: Task, call_id: str
    ) -> Task:
        """Start `agent` with `message` as a child task of `parent` (its call `call_id`):
        in the parent's workspace, with the agent's profile or the parent's."""
        tg = self._task_group()
        profile = parent.item.api_config_name
        if agent.profile is not None:
            try:
                profile = self._deps.providers.resolve_name(agent.profile)
            except ProfileNotFound as exc:
                raise ToolError(f"{agent.name} cannot run: {exc}") from None
        item = HistoryItem(
            id=str(uuid.uuid4()),
            number=0,
            ts=0,
            task=message,
            workspace=parent.item.workspace,
            mode=agent.mode,
            api_config_name=profile,
            status="active",
            agent=agent.name,
            kernel_provider=parent.item.kernel_provider,
            parent_task_id=parent.id,
            root_task_id=parent.item.root_task_id or parent.id,
            parent_call_id=call_id,
        )
        child = await self._start(tg, item, message, parent=parent)
        log.info("agent called", task_id=parent.id, child_id=child.id, agent=agent.name)
        return child

    async def _start(
        self,
        tg: TaskGroup,
        item: HistoryItem,
        text: str,
        images: list[str] | None = None,
        context: PromptContext | None = None,
        *,
        parent: Task | None = None,
        sent_by: str | None = None,
    ) -> Task:
        """Create the task `item` (with its first message `text`) and start its
        first turn: a user's new task and an agent's call (a child of `parent`)
        go this one way (seed 002, §8). A child is inserted with its parent's
        new `childIds` in one transaction."""
        journal = self._deps.journal
        item = msgspec.structs.replace(
            item,
            number=self.next_number(),
            # Stored as running from the start: a crash before the turn records
            # anything leaves a task that recovery makes resumable, not idle.
            state=TaskState.RUNNING,
        )
        task = self._loaded.create(entered(item, task_mode(self._deps, item)))
        writes: list[Write] = [insert_task(task.item)]
        if parent is not None:
            parent.item = msgspec.structs.replace(
                parent.item,
                child_ids=[*(parent.item.child_ids or []), task.id],
                delegated_to_id=task.id,
                status="delegated",
            )
            writes.append(update_task(parent.item))
        await journal.emit(TaskCreated(payload=(task.id,)), *writes)
        if parent is not None:
            await journal.emit(TaskSpawned(payload=(parent.id, task.id)))
            await journal.emit(TaskDelegated(payload=(parent.id, task.id)))
        await task.messages.say(Say.TEXT, text, images=images, context=context, sent_by=sent_by)
        await task.history.append(
            ApiMessage(role="user", content=user_content(text, images, context), ts=task.item.ts)
        )
        task.start_turn(tg, first=True)
        return task
