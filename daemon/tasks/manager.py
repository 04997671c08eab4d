"""The TaskManager: creates, loads, steers and stops tasks. It owns the task group
in which every agent turn runs.

A task is loaded (a :class:`Task` in memory, its API history with it) while it
works, and for a while after: the `max_idle_loaded` idle tasks used most recently
stay loaded, and the least recently used idle task beyond them is unloaded. An
idle task is one whose turn is over with nothing left waiting: no ask, no queued
message, no open turn; its history, state and item are all in the store, and the
few counters the store has no place for (tool usage, context size, consecutive
mistakes) stay behind in a small :class:`TaskCarry`. A command that needs
the task loads it again from the store. So the daemon's memory grows with the
tasks that work, not with every task it has run since it started.
"""

from __future__ import annotations

import json
import os
import pwd
import time
import uuid
from collections import OrderedDict
from collections.abc import Collection, Sequence
from functools import partial
from pathlib import Path
from typing import Protocol, cast

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup, TaskStatus

from hdsp.daemon.agents import BUILT_IN_AGENTS, AgentCatalog, UnknownAgent
from hdsp.daemon.approvals import ApprovalPolicy
from hdsp.daemon.checkpoints import (
    CheckpointService,
    GitFailed,
    PendingReplay,
    WorkspaceRefused,
    skip_reason,
)
from hdsp.daemon.config import ProfileNotFound
from hdsp.daemon.config.agents import AgentDefinition, AgentLimits
from hdsp.daemon.config.modes import ModeDefinition
from hdsp.daemon.conversation import ApiMessage
from hdsp.daemon.errors import CommandError, HdspError
from hdsp.daemon.llm.registry import Providers
from hdsp.daemon.llm.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from hdsp.daemon.memory import give_back
from hdsp.daemon.modes import (
    DEFAULT_MODE,
    Mode,
    ModeCatalog,
    UnknownMode,
    instruction_sources,
    instructions_text,
)
from hdsp.daemon.store import (
    INLINE_BYTES,
    Database,
    Journal,
    Store,
    TaskRow,
    Write,
    delete_api_messages_from,
    delete_ui_message,
    delete_ui_messages_from,
    insert_task,
    save_queued,
    save_ui_message,
    update_task,
)
from hdsp.daemon.tools import AskAnswer, ToolError, ToolRegistry, default_tools
from hdsp.protocol import (
    MAX_TASK_PAGE,
    AgentInfo,
    AgentList,
    Ask,
    AskResponse,
    CallToolData,
    CheckpointDiff,
    CheckpointInfo,
    CheckpointList,
    CheckpointRestoreResult,
    ClineMessage,
    CreateTaskData,
    DiffCheckpointsData,
    ErrorCode,
    ExecutionResult,
    HistoryItem,
    KernelReplay,
    OfferedMcpServer,
    PromptContext,
    RespondToAskData,
    RestoreCheckpointData,
    Say,
    SendMessageData,
    StartNewTaskData,
    SystemPromptText,
    TaskClosed,
    TaskCreated,
    TaskDelegated,
    TaskIdle,
    TaskList,
    TaskMessagesDeleted,
    TaskPage,
    TaskRef,
    TaskResumable,
    TaskRewound,
    TaskSnapshot,
    TaskSpawned,
    TaskState,
    TodoItem,
    ToolCallResult,
    ToolUsageEntry,
)

from .deletion import plan_delete
from .deps import TaskDeps, TaskKernels
from .notebook_context import context_block, resolve_context
from .prompt import system_prompt
from .queued import decode_queued
from .relayed import relay_refusal, relayed_result
from .rewind import RewindRefused, plan_rewind
from .subtasks import Subtasks
from .task import Task, entered, task_mode
from .turn import TurnState, api_write, turn_decoder, turn_write, user_content

__all__ = ["MAX_IDLE_LOADED", "TaskCarry", "TaskManager"]

log = structlog.get_logger("hdsp.tasks")

_item_decoder = msgspec.json.Decoder(HistoryItem)
_message_decoder = msgspec.json.Decoder(ClineMessage)
_api_decoder = msgspec.json.Decoder(ApiMessage)
_message_encoder = msgspec.json.Encoder()

#: Idle tasks kept loaded, the most recently used; the others are unloaded.
MAX_IDLE_LOADED = 16
#: Unloads after which the memory they freed is given back to the system (see
#: hdsp.daemon.memory): a full collection costs milliseconds, so not after each.
GIVE_BACK_AFTER_UNLOADS = 64
#: States in which nothing of a task runs or waits, nor of the tasks it called.
_FINAL_STATES = (TaskState.COMPLETED, TaskState.ABORTED)


def _stored_messages(
    bodies: Sequence[bytes], partial: dict[int, ClineMessage], *, as_stored: bool
) -> list[ClineMessage]:
    """A task's stored UI messages, with the ones still streaming (`partial`: newer
    in memory than stored) taken from memory. `as_stored`, for a reply: while none
    streams, the stored JSON is spliced in as it is (the journal encoded and
    scrubbed it once) as `msgspec.Raw`, not decoded to be encoded again: only for
    encoding."""
    if as_stored and not partial:
        return cast(list[ClineMessage], [msgspec.Raw(b) for b in bodies])
    return [partial.get(m.ts, m) for m in (_message_decoder.decode(b) for b in bodies)]


#: The most MCP servers a client may offer one task.
MAX_OFFERED_MCP_SERVERS = 16


class McpOffers(Protocol):
    """Where MCP servers a client offers a task go (the daemon's MCP hub)."""

    def offer(self, task_id: str, workspace: str, servers: Sequence[OfferedMcpServer]) -> None: ...

    def forget_task(self, task_id: str) -> None: ...


class TaskCarry(msgspec.Struct, kw_only=True, gc=False):
    """What an unloaded task keeps in memory: the counters the store has no place
    for, which a user sees (tool usage, context size in `taskCompleted` and
    `taskTokenUsageUpdated`) or which guard the next turn (mistakes, repetition)."""

    tool_usage: dict[str, ToolUsageEntry] = {}
    context_tokens: int = 0
    mistakes: int = 0
    #: The last tool call: its name and a digest of its arguments.
    last_call: tuple[str, bytes] | None = None
    repeats: int = 0


_NOTHING_CARRIED = TaskCarry()


def _carry(task: Task) -> TaskCarry | None:
    """What to keep of `task` when it is unloaded; None: nothing."""
    calls = task.calls
    carry = TaskCarry(
        tool_usage=calls.tool_usage,
        context_tokens=task.context_tokens,
        mistakes=calls.mistakes,
        last_call=calls.last_call,
        repeats=calls.repeats,
    )
    return None if carry == _NOTHING_CARRIED else carry


def _restore(task: Task, carry: TaskCarry) -> None:
    """Give `task` back what `carry` kept when it was unloaded."""
    task.context_tokens = carry.context_tokens
    calls = task.calls
    calls.tool_usage, calls.mistakes = carry.tool_usage, carry.mistakes
    calls.last_call, calls.repeats = carry.last_call, carry.repeats


def _read_task(
    db: Database, task_id: str, max_bytes: int | None = None
) -> tuple[TaskRow | None, list[bytes], int, bytes | None] | None:
    """A task's row, API history, newest message ts and queued messages, with one
    trip to the reader; None if its history passes `max_bytes` (if given)."""
    row = db.get_task(task_id)
    if row is None:
        return None, [], 0, None
    bodies = db.api_messages(task_id, max_bytes)
    if bodies is None:
        return None
    return row, bodies, db.last_message_ts(task_id), db.queued_messages(task_id)


def _read_history(db: Database, task_id: str) -> tuple[list[bytes], int, bytes | None]:
    return db.api_messages(task_id), db.last_message_ts(task_id), db.queued_messages(task_id)


class TaskManager:
    def __init__(
        self,
        store: Store,
        journal: Journal,
        providers: Providers,
        *,
        tools: ToolRegistry | None = None,
        approvals: ApprovalPolicy | None = None,
        retry_policy: RetryPolicy | None = None,
        kernels: TaskKernels | None = None,
        checkpoints: CheckpointService | None = None,
        default_workspace: str | None = None,
        private_dirs: Sequence[Path] = (),
        mcp_offers: McpOffers | None = None,
    ) -> None:
        #: What every task of this manager works with (one object: a change here,
        #: such as new settings, reaches them all).
        self.deps = TaskDeps(
            store=store,
            journal=journal,
            providers=providers,
            tools=tools if tools is not None else default_tools(),
            approvals=approvals if approvals is not None else ApprovalPolicy(),
            retry_policy=retry_policy or DEFAULT_RETRY_POLICY,
            kernels=kernels,
            checkpoints=checkpoints,
            closing=lambda: self._closing,
        )
        #: Agent calls: child tasks (seed 002).
        self.subtasks = Subtasks(self, journal, self.deps.agents)
        self.deps.subtasks = self.subtasks
        self.store = store
        self.journal = journal
        self.providers = providers
        #: For a StartNewTask that names no workspace (an old client): the
        #: daemon's working directory, checked like any other workspace.
        self.default_workspace = default_workspace or os.getcwd()
        #: The daemon's own directories (data, runtime): never a workspace, nor
        #: anything inside them, unless a person says so.
        self.private_dirs = [Path(os.path.realpath(d)) for d in private_dirs]
        #: Where MCP servers a client offers a task go (the daemon's MCP hub).
        self.mcp_offers = mcp_offers
        #: Idle tasks beyond this many are unloaded, the least recently used first.
        self.max_idle_loaded = MAX_IDLE_LOADED
        self._tasks: dict[str, Task] = {}
        #: Loaded tasks that are idle, least recently used first (values unused).
        self._idle: OrderedDict[str, None] = OrderedDict()
        #: What unloaded tasks keep in memory (only those with something to keep).
        self._carried: dict[str, TaskCarry] = {}
        #: Tasks unloaded since memory was last given back.
        self._unloads = 0
        self._tg: TaskGroup | None = None
        self._number = 0
        self._closing = False
        #: Restores "with kernel" whose replay waits for approval or runs, by task.
        self._replays: dict[str, _ReplayOutcome] = {}

    @property
    def tools(self) -> ToolRegistry:
        return self.deps.tools

    @property
    def approvals(self) -> ApprovalPolicy:
        return self.deps.approvals

    @property
    def retry_policy(self) -> RetryPolicy:
        return self.deps.retry_policy

    @retry_policy.setter
    def retry_policy(self, policy: RetryPolicy) -> None:
        self.deps.retry_policy = policy

    def apply_mode_settings(
        self, custom_modes: Sequence[ModeDefinition], custom_instructions: str
    ) -> None:
        """The settings' custom modes and global instructions, for every task."""
        self.deps.modes = ModeCatalog(custom_modes)
        self.deps.custom_instructions = custom_instructions

    def preview_system_prompt(self, workspace: str | None, mode: str | None) -> SystemPromptText:
        """The system prompt a new task in `workspace` and `mode` would get."""
        where = Path(workspace or self.default_workspace)
        try:
            found = self.deps.modes.get(mode or DEFAULT_MODE, where)
        except UnknownMode as exc:
            raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        tools = self.deps.tools.scoped(where)
        sources = instruction_sources(
            workspace=where,
            mode=found,
            global_instructions=self.deps.custom_instructions,
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

    @property
    def mistake_limit(self) -> int:
        """Consecutive tool errors before a task asks mistake_limit_reached."""
        return self.deps.mistake_limit

    @mistake_limit.setter
    def mistake_limit(self, limit: int) -> None:
        self.deps.mistake_limit = limit

    # ---- lifetime -----------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._number = await self.store.read(self.store.db.max_task_number)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            service = self.deps.checkpoints
            replays = await service.pending_replays() if service is not None else []
            await self._recover(tg, replaying={p.task_id for p in replays})
            await self._recover_replays(tg, replays)
            task_status.started()
            await anyio.sleep_forever()

    async def _recover(self, tg: TaskGroup, replaying: Collection[str] = ()) -> None:
        """Pick up every turn the daemon left open when it stopped or crashed.

        A turn that waited on an ask keeps waiting on it (answering it goes on
        where the turn stood). A turn that was working becomes resumable: the task
        asks `resume_task`, as Roo does on load, and answering it (or ResumeTask)
        goes on where the turn stood. A task whose restore waited for the
        approval of its kernel replay (`replaying`) waits for it again.
        """
        rows = await self.store.read(self.store.db.open_turns)
        for row, turn_body in rows:
            task = await self._load_row(row)
            await self._finish_partial_messages(task)
            turn = turn_decoder.decode(turn_body) if turn_body is not None else None
            if turn is None:
                if not task.history.awaits_reply or task.id in replaying:
                    # Nothing was in flight; only the state was stale.
                    await task.set_state(TaskState.IDLE)
                    self.settle(task)
                    continue
                turn = TurnState()
            task.turn = turn
            if not await self._waits_on_ask(task, turn) and task.item.parent_task_id is not None:
                # An agent's child task goes on when its caller's call attaches to it
                # again (after the tree's root is resumed), not on an ask of its own.
                await task.set_state(TaskState.RESUMABLE, TaskResumable(payload=(task.id,)))
                await task.save_turn()
                log.info("child task waits for its caller", task_id=task.id)
                continue
            if not await self._waits_on_ask(task, turn):
                await task.set_state(TaskState.RESUMABLE, TaskResumable(payload=(task.id,)))
                ask = await task.asks.post(Ask.RESUME_TASK)
                turn.resume_ask_ts = ask.ts
                await task.save_turn()
            task.start_turn(tg, resume=True)
            log.info("task picked up after restart", task_id=task.id)
        await self.journal.flush_for_read()

    async def _finish_partial_messages(self, task: Task) -> None:
        """Messages that were streaming when the daemon stopped stream no more:
        finish them as they were saved (a durable update every client sees), or
        they would show as streaming for ever."""
        bodies = await self.store.read(self.store.db.partial_ui_messages, task.id)
        for body in bodies:
            message = _message_decoder.decode(body)
            if message.partial:
                await task.messages.update(message, partial=False)
                log.info("finished a message left streaming", task_id=task.id, ts=message.ts)

    async def _waits_on_ask(self, task: Task, turn: TurnState) -> bool:
        """Whether the open turn stood at an ask that is still unanswered."""
        waiting = [turn.resume_ask_ts, turn.ask_ts, *(c.ask_ts for c in turn.calls)]
        for ts in waiting:
            if ts is None:
                continue
            body = await self.store.read(self.store.db.ui_message, task.id, ts)
            if body is not None and not _message_decoder.decode(body).is_answered:
                return True
        return False

    @property
    def closing(self) -> bool:
        return self._closing

    async def shutdown(self) -> None:
        """Stop every running turn, saving its task as resumable."""
        self._closing = True
        async with anyio.create_task_group() as tg:
            for task in list(self._tasks.values()):
                if task.busy:
                    tg.start_soon(partial(task.stop, as_state=TaskState.RESUMABLE))

    # ---- queries ------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        return {
            "loaded": len(self._tasks),
            "running": sum(1 for t in self._tasks.values() if t.busy),
            "idle_loaded": len(self._idle),
        }

    def is_busy(self, task_id: str) -> bool:
        """Whether `task_id` is working now (a turn runs); False for a task not loaded."""
        task = self._tasks.get(task_id)
        return task is not None and task.busy

    def kernel_choice(self, task_id: str) -> tuple[str | None, str | None]:
        """Where the task wants its kernels (its configuration's provider, or
        None) and its profile, for the kernel service; (None, None) for a task
        not loaded."""
        task = self._tasks.get(task_id)
        if task is None:
            return None, None
        return task.item.kernel_provider, task.item.api_config_name

    async def note_kernel_culled(self, task_id: str, note: str) -> None:
        """Record in the task's history that its kernel was shut down for idling."""
        if self.closing:
            return
        try:
            task = await self._load(task_id)
        except CommandError:
            return  # closed or gone meanwhile
        try:
            await task.messages.say(Say.KERNEL_CULLED, note)
        finally:
            self.settle(task)

    async def note_notebook_kernel(self, task_id: str, note: str) -> None:
        """Record in the task's history what befell the notebook's kernel it used
        (restarted where it runs, or gone and detached from)."""
        if self.closing:
            return
        try:
            task = await self._load(task_id)
        except CommandError:
            return  # closed or gone meanwhile
        try:
            await task.messages.say(Say.NOTEBOOK_KERNEL, note)
        finally:
            self.settle(task)

    def is_loaded(self, task_id: str) -> bool:
        """Whether `task_id` is in memory now (not only in the store)."""
        return task_id in self._tasks

    async def list_tasks(
        self, cursor: str | None, limit: int, id_prefix: str | None = None
    ) -> TaskList:
        if limit < 1 or limit > 1000:
            raise CommandError(ErrorCode.INVALID_REQUEST, "limit must be between 1 and 1000.")
        if id_prefix is not None:
            if cursor is not None:
                raise CommandError(
                    ErrorCode.INVALID_REQUEST, "idPrefix gives one page: send it without cursor."
                )
            await self.journal.flush_for_read()
            rows = await self.store.read(self.store.db.tasks_with_prefix, id_prefix, limit)
            return TaskList(tasks=[self._live_item(_item_decoder.decode(r[4])) for r in rows])
        before: int | None = None
        if cursor is not None:
            try:
                before = int(cursor)
            except ValueError:
                raise CommandError(
                    ErrorCode.INVALID_REQUEST,
                    f"Invalid cursor {cursor!r}: pass the nextCursor of a previous ListTasks.",
                ) from None
        await self.journal.flush_for_read()
        rows = await self.store.read(self.store.db.list_tasks, before, limit + 1)
        items = [_item_decoder.decode(r[4]) for r in rows[:limit]]
        items = [self._live_item(i) for i in items]
        next_cursor = str(rows[limit - 1][1]) if len(rows) > limit else None
        return TaskList(tasks=items, next_cursor=next_cursor)

    def _live_item(self, item: HistoryItem) -> HistoryItem:
        task = self._tasks.get(item.id)
        return task.item if task is not None else item

    async def snapshot(self, task_id: str, *, as_stored: bool = False) -> TaskSnapshot:
        """The task and its messages (`as_stored`: as their stored JSON, for a reply
        that is encoded at once; see `_stored_messages`)."""
        await self.journal.flush_for_read()
        snap = await self.store.read(self.store.db.snapshot, task_id)
        if snap is None:
            raise self._not_found(task_id)
        row, bodies, head_seq = snap
        task = self._tasks.get(task_id)
        messages = _stored_messages(
            bodies, task.messages.partial if task is not None else {}, as_stored=as_stored
        )
        item = _item_decoder.decode(row[4])
        state = TaskState(row[3])
        if task is not None:
            item, state = task.item, task.state
            queue = list(task.queue)
        else:
            queue = decode_queued(await self.store.read(self.store.db.queued_messages, task_id))
        pending = task.pending_ask if task is not None else None
        return TaskSnapshot(
            item=item,
            state=state,
            messages=messages,
            head_seq=head_seq,
            queue=queue,
            pending_ask=pending,
        )

    async def page(
        self, task_id: str, start: int, after_ts: int | None, limit: int, *, as_stored: bool = False
    ) -> TaskPage:
        """Up to `limit` of a task's UI messages, as `snapshot` has them, from
        index `start` or after the message `after_ts` (a previous page's cursor)."""
        if not 1 <= limit <= MAX_TASK_PAGE:
            raise CommandError(
                ErrorCode.INVALID_REQUEST, f"limit must be between 1 and {MAX_TASK_PAGE}."
            )
        if start < 0:
            raise CommandError(ErrorCode.INVALID_REQUEST, "start must be 0 or more.")
        await self.journal.flush_for_read()
        read = await self.store.read(self.store.db.message_page, task_id, start, after_ts, limit)
        if read is None:
            raise self._not_found(task_id)
        total, first, rows, head_seq = read
        if first > total:
            raise CommandError(
                ErrorCode.INVALID_REQUEST,
                f"start {first} is past the end of the task's history ({total} messages).",
            )
        task = self._tasks.get(task_id)
        partial = task.messages.partial if task is not None else {}
        messages = _stored_messages([body for _, body in rows], partial, as_stored=as_stored)
        more = first + len(rows) < total
        return TaskPage(
            messages=messages,
            start=first,
            total=total,
            next_cursor=str(rows[-1][0]) if more and rows else None,
            head_seq=head_seq,
        )

    # ---- commands -----------------------------------------------------------

    async def start_task(self, data: StartNewTaskData, *, sender: str | None = None) -> TaskRef:
        """StartNewTask (`sender`: over TCP, the name the client's key is
        authorised under, recorded on the task's first message)."""
        self._check_open()
        tg = self._require_tg()
        config = data.configuration
        try:
            profile = self.providers.resolve_name(config.api_config_name)
        except ProfileNotFound as exc:
            raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        if not data.text.strip() and not data.images:
            raise CommandError(ErrorCode.INVALID_REQUEST, "A new task needs text or images.")
        workspace = str(await anyio.Path(config.workspace or self.default_workspace).absolute())
        if not await anyio.Path(workspace).is_dir():
            raise CommandError(
                ErrorCode.INVALID_REQUEST, f"The workspace {workspace} is not a directory."
            )
        if not config.allow_broad_workspace:
            problem = await anyio.to_thread.run_sync(self._broad_workspace, workspace)
            if problem is not None:
                given = "" if config.workspace else " (no workspace was given: the daemon's own)"
                raise CommandError(
                    ErrorCode.INVALID_REQUEST,
                    f"Refusing {workspace} as the workspace{given}: it is {problem}, and the "
                    "agent reads everything in its workspace without asking. Run hdsp in "
                    "the project's directory or pass --workspace DIR; to use it anyway, "
                    "name it with --workspace and add --allow-broad-workspace "
                    "(allowBroadWorkspace in the task's configuration).",
                )
        kernels = self.deps.kernels
        context = await resolve_context(data.context, Path(workspace))
        # The notebook's own kernel (the context names it) wins over the configuration's.
        kernel_id = (context.kernel_id if context else None) or config.kernel_id
        if kernel_id is not None and not (kernels and kernels.has_kernel(kernel_id)):
            raise CommandError(
                ErrorCode.KERNEL_NOT_FOUND,
                f"No kernel {kernel_id!r}; ListKernels lists the kernels.",
            )
        if kernels is not None and config.kernel_provider is not None:
            try:
                kernels.check_provider(config.kernel_provider, profile)
            except HdspError as exc:
                raise CommandError(ErrorCode.INVALID_REQUEST, exc.message) from None
        try:
            chosen = self.deps.modes.get(config.mode or DEFAULT_MODE, Path(workspace))
        except UnknownMode as exc:
            raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        text, command_mode = await self._expanded(data.text, Path(workspace), chosen)
        mode = command_mode or chosen.slug
        if config.agent is not None:
            try:
                self.deps.agents.get(config.agent)
            except UnknownAgent as exc:
                raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        task_id = str(uuid.uuid4())
        if config.approvals:
            try:
                self.approvals.configure_task(task_id, config.approvals)
            except ValueError as exc:
                raise CommandError(
                    ErrorCode.INVALID_REQUEST, f"Invalid approval settings: {exc}"
                ) from None
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
        self._offer_mcp(task_id, workspace, data.mcp_servers)
        await self._start(tg, item, text, data.images, context, sent_by=sender)
        log.info("task started", task_id=task_id, profile=profile, agent=config.agent)
        # The reply hands out the task's id: the task must be on disk first, or a
        # crash right after it leaves the client an id that names nothing.
        await self._committed_unless_failing()
        return TaskRef(task_id=task_id, state=TaskState.RUNNING)

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
        self._number += 1
        item = msgspec.structs.replace(
            item,
            number=self._number,
            # Stored as running from the start: a crash before the turn records
            # anything leaves a task that recovery makes resumable, not idle.
            state=TaskState.RUNNING,
        )
        item = entered(item, task_mode(self.deps, item))
        task = Task(self.deps, item, api=[], state=TaskState.IDLE, settle=self.settle)
        task.item = msgspec.structs.replace(item, ts=task.messages.next_ts())
        self._tasks[task.id] = task
        writes: list[Write] = [insert_task(task.item)]
        if parent is not None:
            parent.item = msgspec.structs.replace(
                parent.item,
                child_ids=[*(parent.item.child_ids or []), task.id],
                delegated_to_id=task.id,
                status="delegated",
            )
            writes.append(update_task(parent.item))
        await self.journal.emit(TaskCreated(payload=(task.id,)), *writes)
        if parent is not None:
            await self.journal.emit(TaskSpawned(payload=(parent.id, task.id)))
            await self.journal.emit(TaskDelegated(payload=(parent.id, task.id)))
        await task.messages.say(Say.TEXT, text, images=images, context=context, sent_by=sent_by)
        await task.history.append(
            ApiMessage(role="user", content=user_content(text, images, context), ts=task.item.ts)
        )
        task.start_turn(tg, first=True)
        return task

    # ---- agent calls (TaskHost of .subtasks) ----------------------------------

    async def load_task(self, task_id: str) -> Task:
        return await self._load(task_id)

    def task_group(self) -> TaskGroup:
        return self._require_tg()

    async def spawn_agent(
        self, agent: AgentDefinition, message: str, *, parent: Task, call_id: str
    ) -> Task:
        """Start `agent` with `message` as a child task of `parent` (its call `call_id`):
        in the parent's workspace, with the agent's profile or the parent's."""
        tg = self._require_tg()
        profile = parent.item.api_config_name
        if agent.profile is not None:
            try:
                profile = self.providers.resolve_name(agent.profile)
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

    def apply_agent_settings(self, agents: Sequence[AgentDefinition], limits: AgentLimits) -> None:
        """The settings' agents and tree limits, for every task."""
        catalog = AgentCatalog(agents, limits)
        self.deps.agents = catalog
        self.subtasks.agents = catalog

    def list_agents(self) -> AgentList:
        """ListAgents: the built-in agents and the settings' (which replace a
        built-in one of the same name), with the tree limits."""
        catalog = self.deps.agents
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

    async def _committed_unless_failing(self) -> None:
        """Wait until what is queued is committed, or until the storage fails:
        then the journal holds it until the disk takes it (every client was told),
        and waiting here would only leave the client without an answer."""
        monitor = self.store.monitor
        if not monitor.writable:
            return
        async with anyio.create_task_group() as tg:

            async def until_failing() -> None:
                seen = monitor.version
                while monitor.writable:
                    seen = await monitor.wait_changed(seen)
                tg.cancel_scope.cancel()

            tg.start_soon(until_failing)
            await self.journal.flush()
            tg.cancel_scope.cancel()

    async def send_message(
        self,
        task_id: str,
        data: SendMessageData,
        *,
        by: str | None = None,
        sender: str | None = None,
    ) -> TaskRef:
        """A message from the user: it answers a waiting ask, waits in the queue of
        a busy task, or starts the next turn. `by` names the client (who answered
        an ask); `sender`, over TCP, the name its key is authorised under, kept on
        the message."""
        self._check_open()
        if not (data.text or "").strip() and not data.images:
            raise CommandError(ErrorCode.INVALID_REQUEST, "The message has no text and no images.")
        task = await self._load(task_id)
        try:
            self._offer_mcp(task_id, str(task.workspace), data.mcp_servers)
            if data.text:
                text, mode = await self._expanded(data.text, task.workspace, task.mode())
                if mode is not None and mode != task.item.mode:
                    try:
                        await task.switch_mode(mode)
                    except UnknownMode as exc:
                        raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
                data = msgspec.structs.replace(data, text=text)
            data = await self._with_context(task, data)
            ask = task.pending_ask
            if ask is not None:
                answer = AskAnswer(
                    AskResponse.MESSAGE,
                    data.text,
                    list(data.images or []),
                    by=by,
                    context=data.context,
                    context_block=None if data.context is None else context_block(data.context),
                    sent_by=sender,
                )
                await task.asks.respond(ask.ts, answer)
                return TaskRef(task_id=task_id, state=TaskState.RUNNING)
            if task.busy:
                # Queued, or, to steer, taken by the running turn before its next request.
                await task.queue.put(data, sent_by=sender)
                # A reply that says queued is a promise: a crash must not break it.
                await self._committed_unless_failing()
                return TaskRef(task_id=task_id, state=task.state, queued=True)
            task.start_turn(self._require_tg(), message=data, sent_by=sender)
            return TaskRef(task_id=task_id, state=TaskState.RUNNING)
        finally:
            self.settle(task)

    async def _expanded(self, text: str, workspace: Path, current: Mode) -> tuple[str, str | None]:
        """`text` with a leading `/command` expanded, and the mode the command
        puts the task in (None: it stays in `current`). A workspace command is
        untrusted: it may narrow the mode, never widen it; then the task stays
        and the text says why (the model may call switch_mode, which asks)."""
        commands = self.deps.slash_commands
        expanded = await anyio.to_thread.run_sync(commands.expand, text, workspace)
        if expanded is None:
            return text, None
        command = expanded.command
        if command.mode is None:
            return expanded.text, None
        try:
            wanted = await anyio.to_thread.run_sync(self.deps.modes.get, command.mode, workspace)
        except UnknownMode as exc:
            raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        wider = wanted.widens(current) if command.source == "project" else []
        if not wider:
            return expanded.text, wanted.slug
        try:
            where = str(command.path.relative_to(workspace))
        except ValueError:
            where = str(command.path)
        note = (
            f"[hdsp: /{command.name} ({where}, a workspace file) asks for {wanted.slug} mode, "
            f"which would add {' and '.join(wider)} to {current.slug} mode. A workspace "
            f"command may not widen a task's mode, so the task stays in {current.slug} mode; "
            f"to work in {wanted.slug} mode, call switch_mode (the user decides).]"
        )
        return expanded.text + "\n\n" + note, None

    async def switch_mode(self, task_id: str, slug: str) -> TaskRef:
        """SwitchMode: the task's next request uses mode `slug`."""
        task = await self._load(task_id)
        try:
            await task.switch_mode(slug)
        except UnknownMode as exc:
            raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        finally:
            self.settle(task)
        return TaskRef(task_id=task_id, state=task.state)

    async def update_todo_list(self, task_id: str, todos: list[TodoItem]) -> TaskRef:
        """UpdateTodoList: a person's edit, told to the model."""
        task = await self._load(task_id)
        try:
            await task.set_todos(todos, by="user")
        finally:
            self.settle(task)
        return TaskRef(task_id=task_id, state=task.state)

    async def system_prompt(self, task_id: str) -> SystemPromptText:
        task = await self._load(task_id)
        try:
            return SystemPromptText(text=task.system_prompt(), mode=task.mode().slug)
        finally:
            self.settle(task)

    async def _with_context(self, task: Task, data: SendMessageData) -> SendMessageData:
        """`data` with its context checked against the task's workspace (an
        outline read from the file if it came without one); the task's code runs
        in the kernel the context names from now on."""
        if data.context is None:
            return data
        context = await resolve_context(data.context, task.workspace)
        kernel_id = context.kernel_id if context else None
        if kernel_id is not None:
            kernels = self.deps.kernels
            if kernels is None or not kernels.has_kernel(kernel_id):
                raise CommandError(
                    ErrorCode.KERNEL_NOT_FOUND,
                    f"No kernel {kernel_id!r}; ListKernels lists the kernels.",
                )
            kernels.bind_task(task.id, kernel_id)
        return msgspec.structs.replace(data, context=context)

    async def respond_to_ask(
        self,
        task_id: str,
        data: RespondToAskData,
        *,
        by: str | None = None,
        sender: str | None = None,
    ) -> TaskRef:
        task = self._tasks.get(task_id)
        if task is None:
            # Not loaded, so no turn runs and no ask waits (a waiting ask keeps
            # its task loaded): say whether the ask was answered already.
            await self.journal.flush_for_read()
            row = await self.store.read(self.store.db.get_task, task_id)
            if row is None:
                raise self._not_found(task_id)
            body = await self.store.read(self.store.db.ui_message, task_id, data.ask_ts)
            if body is not None:
                message = _message_decoder.decode(body)
                if message.type == "ask" and message.is_answered:
                    raise CommandError(
                        ErrorCode.ALREADY_ANSWERED,
                        f"The ask {data.ask_ts} of task {task_id} was already answered.",
                    )
            raise CommandError(ErrorCode.INVALID_STATE, f"No ask waits in task {task_id}.")
        context = None
        if data.context is not None and (data.text or data.images):
            # (The context checked, its kernel bound, as a message's.)
            context = (
                await self._with_context(task, SendMessageData(context=data.context))
            ).context
        answer = AskAnswer(
            AskResponse(data.response),
            data.text,
            list(data.images or []),
            by=by,
            context=context,
            context_block=None if context is None else context_block(context),
            sent_by=sender,
        )
        await task.asks.respond(data.ask_ts, answer)
        return TaskRef(task_id=task_id, state=task.state)

    async def delete_queued_message(self, task_id: str, message_id: str) -> TaskRef:
        task = await self._load(task_id)
        try:
            await task.queue.delete(message_id)
            return TaskRef(task_id=task_id, state=task.state)
        finally:
            self.settle(task)

    async def cancel(self, task_id: str) -> TaskRef:
        task = self._tasks.get(task_id)
        if task is None:
            row = await self.store.read(self.store.db.get_task, task_id)
            if row is None:
                raise self._not_found(task_id)
            return TaskRef(task_id=task_id, state=TaskState(row[3]))
        await task.stop()
        if task.item.parent_task_id is not None:
            await task.abandon()  # a child a restart left waiting for its caller
        await self._stop_subtree(task)
        return TaskRef(task_id=task_id, state=task.state)

    async def _stop_subtree(self, top: Task) -> None:
        """Stop every task below `top` that still runs or waits (Stop on any task
        of a tree of agents stops its subtree). Stopping a caller stops the
        children its calls wait for; this also reaches the children a restart
        left waiting for a caller that was stopped before it came back for them."""
        below = list(top.item.child_ids or [])
        if below:
            await self.journal.flush_for_read()  # unloaded tasks' rows as they stand
        while below:
            task_id = below.pop()
            task = self._tasks.get(task_id)
            if task is None:
                row = await self.store.read(self.store.db.get_task, task_id)
                if row is None or TaskState(row[3]) in _FINAL_STATES:
                    continue  # nothing of it runs, nor (so) below it
                task = await self._load(task_id)
            elif not task.busy and task.state in _FINAL_STATES:
                continue
            try:
                if task.busy:
                    await task.stop()
                await task.abandon()
                below += task.item.child_ids or []
            finally:
                self.settle(task)

    async def close(self, task_id: str) -> TaskRef:
        """Stop the task and forget what the daemon keeps of it beside its history
        (loaded or not: an idle task may have been unloaded already)."""
        ref = await self.cancel(task_id)
        self._tasks.pop(task_id, None)
        self._idle.pop(task_id, None)
        self._carried.pop(task_id, None)
        self.approvals.forget(task_id)
        if self.mcp_offers is not None:
            self.mcp_offers.forget_task(task_id)
        if self.deps.kernels is not None:
            await self.deps.kernels.release_task(task_id)
        await self.journal.emit(TaskClosed(payload=(task_id,)))
        return ref

    async def condense(self, task_id: str) -> TaskRef:
        """Condense the task's conversation now (CondenseTask): not while it works."""
        self._check_open()
        task = await self._load(task_id)
        try:
            if task.busy or task.turn is not None:
                raise CommandError(
                    ErrorCode.TASK_BUSY,
                    f"Task {task_id} is working; condense it when its turn is over "
                    "(it condenses by itself when its context fills up).",
                )
            provider = self.providers.get(task.item.api_config_name)
            before = await task.budget.count(provider, task.model_request())
            await task.condense(provider, before.tokens, manual=True)
            return TaskRef(task_id=task_id, state=task.state)
        finally:
            self.settle(task)

    async def rewind(self, task_id: str, ts: int, *, include: bool) -> TaskRef:
        """Take the task back to its message `ts` (see RewindTask): a running turn
        is cancelled first, then the messages after the point are removed, what
        their summaries and truncations hid comes back, in one transaction with the
        `taskRewound` event; the task is loaded again from the store."""
        self._check_open()
        task = await self._load(task_id)
        try:
            await task.stop()
            ui, api = await self._history_of(task)
            try:
                plan = plan_rewind(ui, api, ts, include=include)
            except RewindRefused as exc:
                raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
            writes: list[Write] = []
            if plan.ui_from_ts is not None:
                writes.append(delete_ui_messages_from(task_id, plan.ui_from_ts))
            writes.append(delete_api_messages_from(task_id, plan.api_kept))
            for index, message in plan.restored.items():
                writes.append(api_write(task_id, index, message)[1])
            writes.append(turn_write(task_id, None))
            # What waited for the task went with the rewind.
            writes.append(save_queued(task_id, None))
            item = msgspec.structs.replace(task.item, state=TaskState.IDLE)
            writes.append(update_task(item))
            await self.journal.emit(
                TaskRewound(payload=(task_id, plan.ui_from_ts or ts + 1)), *writes
            )
            await self._committed_unless_failing()
        finally:
            self.settle(task)
        # What is in memory (queue, partial messages) went with the rewind.
        self._tasks.pop(task_id, None)
        self._idle.pop(task_id, None)
        task = await self._load(task_id)
        self.settle(task)
        log.info("task rewound", task_id=task_id, ts=ts, include=include)
        return TaskRef(task_id=task_id, state=task.state)

    # ---- checkpoints (issue 20) --------------------------------------------------

    def _checkpoint_service(self) -> CheckpointService:
        if self.deps.checkpoints is None:
            raise CommandError(ErrorCode.INVALID_STATE, "This hdsp daemon keeps no checkpoints.")
        return self.deps.checkpoints

    async def _workspace_of(self, task_id: str) -> Path:
        task = await self._load(task_id)
        try:
            return task.workspace
        finally:
            self.settle(task)

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
            raise CommandError(ErrorCode.INVALID_STATE, f"No diff: {exc}") from None

    async def record_execution(self, task_id: str, result: ExecutionResult, code: str) -> None:
        """Write code a client ran in the task's kernel (ExecuteCode) to the task's
        execution log."""
        if self.deps.checkpoints is not None:
            await self.deps.checkpoints.record_execution(
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
            raise CommandError(
                ErrorCode.INVALID_STATE,
                f"The restore of checkpoint {waiting.checkpoint} waits for the approval of "
                "its kernel replay (an ask of the task): answer it first.",
            )
        task = await self._load(task_id)
        try:
            await task.stop()
            workspace = task.workspace
        finally:
            self.settle(task)
        rewound = False
        if data.restore in ("history", "both"):
            if info.message_ts is None:
                raise CommandError(
                    ErrorCode.INVALID_STATE,
                    f"Checkpoint {info.number} has no message to rewind the history to.",
                )
            await self.rewind(task_id, info.message_ts, include=True)
            rewound = True
        restored = None
        if data.restore in ("files", "both"):
            task = await self._load(task_id)
            try:

                async def announce(text: str, checkpoint: dict[str, object]) -> int:
                    message = await task.messages.say(
                        Say.CHECKPOINT_SAVED, text, checkpoint=checkpoint
                    )
                    return message.ts

                restored = await service.restore_files(task_id, workspace, info, announce)
            except (GitFailed, WorkspaceRefused, TimeoutError) as exc:
                raise CommandError(ErrorCode.INVALID_STATE, f"Not restored: {exc}") from None
            finally:
                self.settle(task)
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
        task = await self._load(result.task_id)
        try:
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
        finally:
            self.settle(task)
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
        tg = self._require_tg()
        task = await self._load(data.task_id)
        try:
            ask = await task.asks.post(Ask.TOOL, text)
        finally:
            self.settle(task)
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

    async def _recover_replays(self, tg: TaskGroup, replays: list[PendingReplay]) -> None:
        """Restores whose kernel replay waited for approval when the daemon
        stopped: their ask is posted again (the same ask, published anew) and
        answering it replays and finishes the restore; one answered before the
        stop replays now."""
        service = self.deps.checkpoints
        if service is None:
            return
        for pending in replays:
            try:
                task = await self._load(pending.task_id)
            except CommandError:
                await service.drop_pending(pending.task_id)
                continue
            try:
                body = await self.store.read(self.store.db.ui_message, task.id, pending.ask_ts)
                if body is None:
                    await service.drop_pending(pending.task_id)
                    continue
                ask = _message_decoder.decode(body)
                if not ask.is_answered:
                    ask = await task.messages.update(ask)  # asked again, for every client
            finally:
                self.settle(task)
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
            task = await self._load(task_id)
            try:
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
            finally:
                self.settle(task)
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

    async def edit_message(
        self,
        task_id: str,
        ts: int,
        text: str,
        images: list[str] | None,
        context: PromptContext | None = None,
    ) -> TaskRef:
        """Replace the user's message `ts` and go on from there (EditMessage)."""
        self._check_open()
        await self.journal.flush_for_read()
        body = await self.store.read(self.store.db.ui_message, task_id, ts)
        message = None if body is None else _message_decoder.decode(body)
        if message is None or message.say != Say.USER_FEEDBACK:
            raise CommandError(
                ErrorCode.INVALID_REQUEST,
                f"Message {ts} of task {task_id} is not a message of yours that can be "
                "edited (the task's first message cannot: fork the task instead).",
            )
        await self.rewind(task_id, ts, include=True)
        edited = SendMessageData(text=text, images=images, context=context)
        return await self.send_message(task_id, edited)

    async def delete_message(self, task_id: str, ts: int) -> TaskRef:
        """Delete the message `ts` (see DeleteMessage): a running turn is
        cancelled first, then the message goes from both histories (a tool call
        with its result and all its messages, a summary that condensed it), in one
        transaction with the `taskMessagesDeleted` event; the task is loaded again
        from the store. A turn saved to be resumed goes too if a call of it goes."""
        self._check_open()
        task = await self._load(task_id)
        try:
            was_busy = task.busy
            await task.stop()
            ui, api = await self._history_of(task)
            try:
                plan = plan_delete(ui, api, ts)
            except RewindRefused as exc:
                raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
            writes: list[Write] = [delete_ui_message(task_id, gone) for gone in plan.ui_removed]
            writes.append(delete_api_messages_from(task_id, plan.api_from))
            for offset, message in enumerate(plan.api_tail):
                writes.append(api_write(task_id, plan.api_from + offset, message)[1])
            if was_busy or (plan.tool_calls and task.turn is not None):
                # The turn was cancelled (or its call is gone): nothing of it is
                # to be resumed.
                writes.append(turn_write(task_id, None))
                item = msgspec.structs.replace(task.item, state=TaskState.IDLE)
                writes.append(update_task(item))
            await self.journal.emit(
                TaskMessagesDeleted(payload=(task_id, plan.ui_removed)), *writes
            )
            await self._committed_unless_failing()
        finally:
            self.settle(task)
        self._tasks.pop(task_id, None)
        self._idle.pop(task_id, None)
        task = await self._load(task_id)
        self.settle(task)
        log.info("message deleted", task_id=task_id, ts=ts, removed=len(plan.ui_removed))
        return TaskRef(task_id=task_id, state=task.state)

    async def fork(self, task_id: str, ts: int) -> TaskRef:
        """A new task with the history of `task_id` up to its message `ts` (ForkTask)."""
        self._check_open()
        task = await self._load(task_id)
        try:
            ui, api = await self._history_of(task)
        finally:
            self.settle(task)
        try:
            plan = plan_rewind(ui, api, ts, include=False)
        except RewindRefused as exc:
            raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        new_id = str(uuid.uuid4())
        self._number += 1
        item = msgspec.structs.replace(
            task.item,
            id=new_id,
            number=self._number,
            ts=int(time.time() * 1000),
            state=TaskState.IDLE,
            tokens_in=0,
            tokens_out=0,
            total_cost=0.0,
            cache_reads=None,
            cache_writes=None,
            child_ids=None,
            parent_task_id=None,
            root_task_id=None,
        )
        writes: list[Write] = [insert_task(item)]
        for shown in ui[: plan.ui_kept]:
            writes.append(save_ui_message(new_id, shown.ts, _message_encoder.encode(shown)))
        for index, sent in enumerate(api[: plan.api_kept]):
            writes.append(api_write(new_id, index, plan.restored.get(index, sent))[1])
        await self.journal.emit(TaskCreated(payload=(new_id,)), *writes)
        await self._committed_unless_failing()
        log.info("task forked", task_id=task_id, ts=ts, new_task_id=new_id)
        return TaskRef(task_id=new_id, state=TaskState.IDLE)

    async def create_task(self, data: CreateTaskData) -> TaskRef:
        """CreateTask: a task that runs no model turn and waits (issue 23), for a
        client that relays another agent's tool calls into it (CallTool)."""
        self._check_open()
        workspace = await self._checked_workspace(data.workspace, data.allow_broad_workspace)
        try:
            mode = self.deps.modes.get(data.mode or DEFAULT_MODE, Path(workspace)).slug
        except UnknownMode as exc:
            raise CommandError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        task_id = str(uuid.uuid4())
        self._number += 1
        item = HistoryItem(
            id=task_id,
            number=self._number,
            ts=0,
            task=data.title,
            workspace=workspace,
            mode=mode,
            api_config_name=None,  # the current profile, if a message ever starts a turn
            status="active",
            state=TaskState.IDLE,
        )
        item = entered(item, task_mode(self.deps, item))
        task = Task(self.deps, item, api=[], state=TaskState.IDLE, settle=self.settle)
        task.item = msgspec.structs.replace(item, ts=task.messages.next_ts())
        self._tasks[task_id] = task
        try:
            await self.journal.emit(TaskCreated(payload=(task_id,)), insert_task(task.item))
            await task.messages.say(Say.TEXT, data.title)
            await self._committed_unless_failing()
        finally:
            self.settle(task)
        log.info("task created", task_id=task_id)
        return TaskRef(task_id=task_id, state=TaskState.IDLE)

    async def call_tool(self, task_id: str, data: CallToolData) -> ToolCallResult:
        """CallTool: one of hdsp's tools run in a task that is not working, on
        the path of its model's calls (schema, mode, approval, checkpoint)."""
        self._check_open()
        problem = relay_refusal(self.tools, data.tool)
        if problem is not None:
            raise CommandError(ErrorCode.INVALID_REQUEST, problem)
        task = await self._load(task_id)
        try:
            if data.kernel_id is not None:
                kernels = self.deps.kernels
                if kernels is None or not kernels.has_kernel(data.kernel_id):
                    raise CommandError(
                        ErrorCode.KERNEL_NOT_FOUND,
                        f"No kernel {data.kernel_id!r}; ListKernels lists the kernels.",
                    )
            if task.busy or task.pending_ask is not None:
                raise CommandError(
                    ErrorCode.TASK_BUSY,
                    f"Task {task_id} is working; a relayed call waits until it is not.",
                )
            if data.kernel_id is not None and self.deps.kernels is not None:
                self.deps.kernels.bind_task(task_id, data.kernel_id)
            call = await task.run_relayed_call(self._require_tg(), data.tool, data.arguments)
        finally:
            self.settle(task)
        return relayed_result(task_id, call)

    async def _checked_workspace(self, given: str | None, allow_broad: bool) -> str:
        """The absolute workspace a new task gets (the daemon's own when none is
        given); one that is not a directory, or too broad, is refused."""
        workspace = str(await anyio.Path(given or self.default_workspace).absolute())
        if not await anyio.Path(workspace).is_dir():
            raise CommandError(
                ErrorCode.INVALID_REQUEST, f"The workspace {workspace} is not a directory."
            )
        if not allow_broad:
            problem = await anyio.to_thread.run_sync(self._broad_workspace, workspace)
            if problem is not None:
                raise CommandError(
                    ErrorCode.INVALID_REQUEST,
                    f"Refusing {workspace} as the workspace: it is {problem}, and the agent "
                    "reads everything in its workspace without asking.",
                )
        return workspace

    async def _history_of(self, task: Task) -> tuple[list[ClineMessage], list[ApiMessage]]:
        """The task's UI messages as stored and its API history."""
        await self.journal.flush_for_read()
        bodies = await self.store.read(self.store.db.ui_messages, task.id)
        return [_message_decoder.decode(b) for b in bodies], list(task.history.messages)

    async def resume(self, task_id: str) -> TaskRef:
        """Continue a task: answer its resume ask, make an unanswered request
        again, or ask how to go on (resume_task, or resume_completed_task)."""
        self._check_open()
        task = await self._load(task_id)
        try:
            return await self._resume(task)
        finally:
            self.settle(task)

    async def _resume(self, task: Task) -> TaskRef:
        task_id = task.id
        ask = task.pending_ask
        if ask is not None and ask.ask in (Ask.RESUME_TASK, Ask.RESUME_COMPLETED_TASK):
            await task.asks.respond(ask.ts, AskAnswer(AskResponse.YES, by="resume"))
            return TaskRef(task_id=task_id, state=TaskState.RUNNING)
        if task.busy:
            what = "waits for an answer to its ask" if ask is not None else "is running"
            raise CommandError(ErrorCode.TASK_BUSY, f"Task {task_id} {what}.")
        tg = self._require_tg()
        if task.history.awaits_reply:
            # The last request was never answered (cancelled, or the daemon stopped).
            task.start_turn(tg)
            return TaskRef(task_id=task_id, state=TaskState.RUNNING)
        kind = Ask.RESUME_COMPLETED_TASK if task.state is TaskState.COMPLETED else Ask.RESUME_TASK
        task.turn = TurnState()
        task.turn.resume_ask_ts = (await task.asks.post(kind)).ts
        await task.save_turn()
        task.start_turn(tg, resume=True)
        return TaskRef(task_id=task_id, state=task.state)

    # ---- helpers ------------------------------------------------------------

    def _broad_workspace(self, workspace: str) -> str | None:
        """What `workspace` is if it is too broad (or too private) to be one: the
        root, the daemon's user's home itself, or a daemon directory; else None."""
        real = Path(os.path.realpath(workspace))
        if real == real.parent:
            return "the root directory"
        homes = {os.path.expanduser("~")}
        try:
            homes.add(pwd.getpwuid(os.geteuid()).pw_dir)
        except KeyError:
            pass
        if any(real == Path(os.path.realpath(home)) for home in homes if home):
            return "your home directory (its keys, keyring and dotfiles)"
        for private in self.private_dirs:
            if real == private or real.is_relative_to(private):
                return f"inside hdspd's own directory {private}"
        return None

    def _offer_mcp(
        self, task_id: str, workspace: str, servers: Sequence[OfferedMcpServer] | None
    ) -> None:
        """The MCP servers a client offers the task now (None: it says nothing)."""
        if servers is None:
            return
        if len(servers) > MAX_OFFERED_MCP_SERVERS:
            raise CommandError(
                ErrorCode.INVALID_REQUEST,
                f"{len(servers)} MCP servers offered: a task takes at most "
                f"{MAX_OFFERED_MCP_SERVERS}.",
            )
        if len({s.name for s in servers}) < len(servers):
            raise CommandError(ErrorCode.INVALID_REQUEST, "Two offered MCP servers share a name.")
        if self.mcp_offers is None:
            if servers:
                raise CommandError(ErrorCode.UNAVAILABLE, "This daemon runs no MCP servers.")
            return
        self.mcp_offers.offer(task_id, workspace, servers)

    def _check_open(self) -> None:
        if self._closing:
            raise CommandError(ErrorCode.SHUTTING_DOWN, "The daemon is shutting down.")

    def _require_tg(self) -> TaskGroup:
        if self._tg is None:
            raise CommandError(ErrorCode.SHUTTING_DOWN, "The task manager is not running.")
        return self._tg

    @staticmethod
    def _not_found(task_id: str) -> CommandError:
        return CommandError(
            ErrorCode.TASK_NOT_FOUND, f"No task {task_id!r}; `hdsp tasks` lists the tasks."
        )

    def _task_from_row(
        self, row: TaskRow, bodies: list[bytes], last_ts: int, queued: bytes | None
    ) -> Task:
        item = _item_decoder.decode(row[4])
        api = [_api_decoder.decode(b) for b in bodies]
        task = Task(
            self.deps,
            item,
            api=api,
            state=TaskState(row[3]),
            last_ts=last_ts,
            settle=self.settle,
            queued=decode_queued(queued),
        )
        carry = self._carried.pop(task.id, None)
        if carry is not None:
            _restore(task, carry)
        return task

    async def _load(self, task_id: str) -> Task:
        """The task, loaded from the store if need be. It is in use from now on:
        not unloaded until `settle` says it may be."""
        task = self._tasks.get(task_id)
        if task is None:
            await self.journal.flush_for_read()
            try:
                # Most histories are short: read on the loop's thread.
                found = self.store.read_now(_read_task, self.store.db, task_id, INLINE_BYTES)
            except anyio.WouldBlock:
                found = None
            if found is None:  # the reader is busy, or the history long: on a thread
                found = await self.store.read(_read_task, self.store.db, task_id)
            assert found is not None
            row, bodies, last_ts, queued = found
            if row is None:
                raise self._not_found(task_id)
            task = self._tasks.get(task_id)  # loaded by another command meanwhile?
            if task is None:
                task = self._tasks[task_id] = self._task_from_row(row, bodies, last_ts, queued)
        self._idle.pop(task_id, None)
        return task

    async def _load_row(self, row: TaskRow) -> Task:
        task_id = row[0]
        bodies, last_ts, queued = await self.store.read(_read_history, self.store.db, task_id)
        task = self._tasks.get(task_id)  # loaded by another command meanwhile?
        if task is None:
            task = self._tasks[task_id] = self._task_from_row(row, bodies, last_ts, queued)
        self._idle.pop(task_id, None)
        return task

    def settle(self, task: Task) -> None:
        """`task` is done with for now (its turn ended, or a command that used it
        returned): if it is idle it becomes the most recently used idle task, and
        the least recently used ones beyond `max_idle_loaded` are unloaded."""
        if self._tasks.get(task.id) is not task:
            return  # closed meanwhile
        if not task.idle:
            self._idle.pop(task.id, None)  # busy again; it settles when its turn ends
            return
        self._idle[task.id] = None
        self._idle.move_to_end(task.id)
        while len(self._idle) > self.max_idle_loaded:
            task_id, _ = self._idle.popitem(last=False)
            victim = self._tasks.get(task_id)
            if victim is not None and victim.idle:
                self._unload(victim)

    def _unload(self, task: Task) -> None:
        del self._tasks[task.id]
        self._unloads += 1
        if self._unloads >= GIVE_BACK_AFTER_UNLOADS and self._tg is not None:
            self._unloads = 0
            self._tg.start_soon(give_back)
        carry = _carry(task)
        if carry is not None:
            self._carried[task.id] = carry


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
        raise CommandError(
            ErrorCode.INTERNAL, f"The kernel replay failed: {self._result}"
        ) from self._result


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
