"""The command table of the daemon: one arm per command of the protocol, each
calling the method of the part that owns the work.

    protocol row (hdsp.protocol.COMMANDS)   command, result, ordering key
      -> arm here                            unpacks the command
        -> owner method                      TaskManager, KernelService, ConfigService, ...

It sits just below the composition root (`app`), which builds it with the parts it
calls, handed in explicitly; the server is handed it as its handler and knows
nothing of what is behind it. The parts raise their own errors, each carrying its
wire code (see hdsp.daemon.errors); the server turns them into error replies in
one place, `wire_error`. A test checks that every command of the protocol has exactly one arm here
and one method on the client.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, assert_never, cast

import anyio.to_thread
import msgspec

from hdsp.protocol import (
    INT64_MAX,
    AnswerDocumentEdit,
    AttachKernel,
    BlobData,
    CallTool,
    CancelTask,
    CloseTask,
    Command,
    CommandList,
    CommandsResponse,
    CondenseTask,
    CreateTask,
    DeleteMessage,
    DeleteProfile,
    DeleteQueuedMessage,
    DeleteSecret,
    DiffCheckpoints,
    DocumentEditTaken,
    DocumentsHosted,
    EditMessage,
    ExecuteCode,
    ExportSettings,
    ForkTask,
    GetBlob,
    GetBlobData,
    GetCommands,
    GetModels,
    GetModes,
    GetSettings,
    GetStatus,
    GetSystemPrompt,
    GetTask,
    GetTaskPage,
    HostDocuments,
    ImportSettings,
    InterruptKernel,
    KernelList,
    ListAgents,
    ListCheckpoints,
    ListKernels,
    ListMcpServers,
    ListProfiles,
    ListRemoteKernels,
    ListTasks,
    ListVariables,
    ModeInfo,
    ModeList,
    ModelList,
    ModelsResponse,
    ModesResponse,
    Ping,
    Pong,
    Replay,
    ReplayPage,
    RespondToAsk,
    RestartKernel,
    RestartMcpServer,
    RestoreCheckpoint,
    ResumeTask,
    RewindTask,
    SaveProfile,
    SelectProfile,
    SendMessage,
    SetSecret,
    Shutdown,
    ShutdownKernel,
    StartKernel,
    StartNewTask,
    StatusResult,
    SwitchMode,
    TaskEvent,
    TodoItem,
    TrustMcpServer,
    UpdateSettings,
    UpdateTodoList,
    UpdateTodoListData,
    command_spec,
)

from .config import ConfigService
from .errors import BadRequest, BlobNotFound, CursorExpired, NotServed, WrongState
from .kernels import KernelService
from .llm.models import roo_model_record
from .logs import register_secret
from .mcp import McpHub
from .modes import group_names
from .store import Journal, StorageUnavailable, Store
from .tasks import TaskManager
from .tools.notebook_hosts import NotebookHosts
from .tools.todo_list import parse_todo_markdown

__all__ = ["MAX_REPLAY_PAGE", "Commands"]

MAX_REPLAY_PAGE = 1000


def _check_cursor(cursor: str | None, command: str) -> None:
    """A cursor is the decimal `nextCursor` of a previous page."""
    if cursor is None:
        return
    if not (cursor.isascii() and cursor.isdigit() and int(cursor) <= INT64_MAX):
        raise BadRequest(
            f"Invalid cursor {cursor[:40]!r} (at $.data.data.cursor): pass the "
            f"nextCursor of a previous {command}.",
        )


def _plain(items: list[Any]) -> list[Any]:
    """Wire structs as the plain JSON values an event's `list[Any]` payload holds."""
    return cast(list[Any], msgspec.json.decode(msgspec.json.encode(items)))


def _todos(data: UpdateTodoListData) -> list[TodoItem]:
    if data.todos is not None and data.markdown is not None:
        raise BadRequest("Pass either markdown or todos (at $.data.data), not both.")
    if data.todos is not None:
        return [msgspec.structs.replace(item, id=str(i)) for i, item in enumerate(data.todos, 1)]
    try:
        return parse_todo_markdown(data.markdown or "")
    except ValueError as exc:
        raise BadRequest(f"The todo list was not changed: {exc}.") from None


class Commands:
    """Runs one command for one client and returns its result (or raises
    CommandError)."""

    def __init__(
        self,
        *,
        tasks: TaskManager,
        config: ConfigService,
        kernels: KernelService,
        store: Store,
        journal: Journal,
        status: Callable[[], Awaitable[StatusResult]],
        shutdown: Callable[[str], None],
        max_message_size: int,
        documents: NotebookHosts | None = None,
        mcp: McpHub | None = None,
        retention: str = "the event log is pruned",
    ) -> None:
        self._tasks = tasks
        #: What survives a prune of the event log (said with `cursor_expired`).
        self._retention = retention
        #: MCP servers (issue 23), if the daemon has them.
        self._mcp = mcp
        #: The notebooks open in JupyterLab (hosts of live documents), if the
        #: daemon edits them there.
        self._documents = documents
        self._config = config
        self._kernels = kernels
        self._store = store
        self._journal = journal
        self._status = status
        self._shutdown = shutdown
        self._max_message_size = max_message_size

    async def __call__(
        self,
        command: Command,
        *,
        client_id: str,
        client_name: str | None = None,
        client_user: str | None = None,
    ) -> Any:
        """Run `command` for the client `client_id`; `client_name` (its Connect's
        name, or over TCP its key's) is recorded as who answered an ask, and
        `client_user` (over TCP: the name its key is authorised under) as who
        sent a message."""
        monitor = self._store.monitor
        if not monitor.writable and not command_spec(command).without_storage:
            raise StorageUnavailable(f"Refused: {monitor.message()}", details=monitor.details())
        return await self._run(command, client_id, client_name, client_user)

    async def _run(
        self, command: Command, client_id: str, client_name: str | None, client_user: str | None
    ) -> Any:
        tasks, config, kernels = self._tasks, self._config, self._kernels
        match command:
            # ---- tasks
            case StartNewTask(data=data):
                return await tasks.start_task(data, sender=client_user)
            case SendMessage(task_id=task_id, data=data):
                return await tasks.send_message(task_id, data, by=client_name, sender=client_user)
            case RespondToAsk(task_id=task_id, data=data):
                return await tasks.respond_to_ask(task_id, data, by=client_name, sender=client_user)
            case DeleteQueuedMessage(task_id=task_id, data=message_id):
                return await tasks.delete_queued_message(task_id, message_id)
            case CancelTask(task_id=task_id):
                return await tasks.cancel(task_id)
            case CondenseTask(task_id=task_id):
                return await tasks.condense(task_id)
            case RewindTask(data=data):
                return await tasks.edits.rewind(data.task_id, data.ts, include=data.include)
            case EditMessage(data=data):
                return await tasks.edit_message(
                    data.task_id, data.ts, data.text, data.images, data.context
                )
            case DeleteMessage(data=data):
                return await tasks.edits.delete_message(data.task_id, data.ts)
            case ForkTask(data=data):
                return await tasks.edits.fork(data.task_id, data.ts)
            # ---- tool calls relayed from another agent (issue 23)
            case CreateTask(data=data):
                return await tasks.relayed.create_task(data)
            case CallTool(task_id=task_id, data=data):
                return await tasks.relayed.call_tool(task_id, data)
            # ---- checkpoints
            case ListCheckpoints(data=data):
                return await tasks.checkpoints.list_checkpoints(data.task_id)
            case DiffCheckpoints(data=data):
                return await tasks.checkpoints.diff_checkpoints(data)
            case RestoreCheckpoint(data=data):
                return await tasks.checkpoints.restore_checkpoint(data)
            case CloseTask(task_id=task_id):
                return await tasks.close(task_id)
            case ResumeTask(data=task_id):
                return await tasks.resume(task_id)
            case ListTasks(data=data):
                _check_cursor(data.cursor, "ListTasks")
                return await tasks.reads.list_tasks(data.cursor, data.limit, data.id_prefix)
            case GetTask(data=data):
                return await tasks.reads.snapshot(data.task_id, as_stored=True)
            case GetTaskPage(data=data):
                if data.cursor is not None and data.start is not None:
                    raise BadRequest(
                        "Pass either start or cursor (at $.data.data), not both.",
                    )
                _check_cursor(data.cursor, "GetTaskPage")
                after = None if data.cursor is None else int(data.cursor)
                return await tasks.reads.page(
                    data.task_id, data.start or 0, after, data.limit, as_stored=True
                )
            # ---- the event log
            case Replay(data=data):
                return await self._replay(data.since_seq, data.task_id, data.limit)
            # ---- settings, profiles, secrets
            case GetSettings():
                return await config.view()
            case UpdateSettings(data=data):
                return await config.update(data.patch, client_id=client_id)
            case ListProfiles():
                return await config.list_profiles()
            case SaveProfile(data=data):
                return await config.save_profile(data, client_id=client_id)
            case DeleteProfile(data=data):
                return await config.delete_profile(data.name, client_id=client_id)
            case SelectProfile(data=data):
                return await config.select_profile(data.name, client_id=client_id)
            case SetSecret(data=data):
                register_secret(data.value, name=data.name)  # before anything can log it
                return await config.set_secret(data.name, data.value, client_id=client_id)
            case DeleteSecret(data=data):
                return await config.delete_secret(data.name, client_id=client_id)
            case ExportSettings():
                return await config.export()
            case ImportSettings(data=data):
                return await config.import_settings(
                    data.settings, merge=data.merge, client_id=client_id
                )
            case GetModels(data=data):
                return await self._models(data.provider)
            case GetBlob(data=data):
                return await self._blob(data)
            # ---- modes, prompts, slash commands, todo lists
            case GetModes(data=data):
                return await self._modes(data.workspace)
            case ListAgents():
                return self._tasks.subtasks.list_agents()
            case GetCommands(data=data):
                return await self._slash_commands(data.workspace)
            case GetSystemPrompt(data=data):
                if data.task_id is not None:
                    return await tasks.system_prompt(data.task_id)
                return tasks.new_tasks.preview_system_prompt(data.workspace, data.mode)
            case SwitchMode(task_id=task_id, data=data):
                return await tasks.switch_mode(task_id, data.mode)
            case UpdateTodoList(task_id=task_id, data=data):
                return await tasks.update_todo_list(task_id, _todos(data))
            # ---- kernels
            case ListKernels():
                return KernelList(kernels=kernels.list_kernels())
            case ListRemoteKernels(profile=profile):
                return await kernels.list_remote_kernels(profile)
            case StartKernel(kernel_name=name, cwd=cwd, provider=provider, profile=profile):
                return await kernels.start_kernel(name, cwd, provider=provider, profile=profile)
            case AttachKernel(connection_file=path, remote_kernel_id=remote_id, profile=profile):
                return await kernels.attach(path, remote_kernel_id=remote_id, profile=profile)
            case InterruptKernel(kernel_id=kernel_id):
                return await kernels.interrupt_kernel(kernel_id)
            case RestartKernel(kernel_id=kernel_id):
                return await kernels.restart_kernel(kernel_id)
            case ShutdownKernel(kernel_id=kernel_id):
                return await kernels.shutdown_kernel(kernel_id)
            case ExecuteCode(kernel_id=kernel_id, code=code, timeout=timeout):
                if timeout is not None and timeout <= 0:
                    raise BadRequest("timeout must be above 0.")
                result = await kernels.execute(kernel_id, code, time_limit=timeout)
                # Code a person ran in a task's kernel is part of its state: it goes
                # in the task's execution log, for a restore that replays it.
                for task_id in kernels.kernel_info(kernel_id).task_ids or []:
                    await tasks.checkpoints.record_execution(task_id, result, code)
                return result
            # ---- document hosts
            case HostDocuments(host_id=host_id, route=route, paths=paths, lease_seconds=lease):
                if self._documents is None:
                    raise BadRequest("This daemon edits no open documents.")
                try:
                    held = self._documents.declare(host_id, route, paths, lease, client_id)
                except ValueError as exc:
                    raise BadRequest(str(exc)) from None
                return DocumentsHosted(host_id=host_id, paths=held)
            case AnswerDocumentEdit(data=answer):
                taken = self._documents is not None and self._documents.answer(answer)
                return DocumentEditTaken(taken=taken)
            case ListVariables(task_id=task_id, kernel_id=kernel_id, include_private=private):
                return await kernels.list_task_variables(
                    task_id=task_id, kernel_id=kernel_id, include_private=private
                )
            # ---- MCP servers
            case ListMcpServers(workspace=workspace, start=start):
                return await self._mcp_hub().list(workspace, start=start)
            case RestartMcpServer(name=name, workspace=workspace):
                try:
                    return await self._mcp_hub().restart(name, workspace)
                except KeyError as exc:
                    raise BadRequest(exc.args[0]) from None
                except ValueError as exc:
                    raise WrongState(str(exc)) from None
            case TrustMcpServer(
                name=name, workspace=workspace, trusted=trusted, fingerprint=expected
            ):
                try:
                    return await self._mcp_hub().trust(name, workspace, trusted, expected)
                except KeyError as exc:
                    raise BadRequest(exc.args[0]) from None
                except ValueError as exc:
                    raise WrongState(str(exc)) from None
            # ---- the daemon
            case Ping():
                # The server answers Ping where it receives it (a liveness probe
                # never waits in a queue); this arm serves one that is dispatched.
                return Pong(server_time=int(time.time() * 1000))
            case GetStatus():
                return await self._status()
            case Shutdown():
                self._shutdown(f"Shutdown command from {client_id}")
                return None
            case _:
                assert_never(command)

    def _mcp_hub(self) -> McpHub:
        if self._mcp is None:
            raise NotServed("This daemon runs no MCP servers.")
        return self._mcp

    async def _replay(self, since_seq: int, task_id: str | None, limit: int) -> ReplayPage:
        if since_seq < 0:
            raise BadRequest("sinceSeq must be 0 or more.")
        limit = max(1, min(limit, MAX_REPLAY_PAGE))
        store = self._store
        db = store.db
        oldest = await store.read(db.oldest_seq)
        if since_seq + 1 < oldest:
            raise CursorExpired(
                f"Events up to seq {oldest - 1} were pruned ({self._retention}): "
                f"the oldest kept is seq {oldest}. Take a snapshot (GetTask or ListTasks) "
                "and continue from its headSeq.",
                details={"oldestSeq": oldest},
            )
        head = self._journal.head_seq
        bodies = await store.read(db.replay, since_seq, task_id, limit)
        # The stored bodies are the published envelopes: splice them in unparsed.
        events = cast(list[TaskEvent], [msgspec.Raw(b) for b in bodies])
        return ReplayPage(events=events, head_seq=head, more=len(bodies) == limit)

    async def _blob(self, data: GetBlobData) -> BlobData:
        """An image stored once (see hdsp.protocol.blobs), as much of it from
        `offset` on as fits in one reply. The type has checked the sha256's form
        and that offset and length are not negative."""
        # base64 takes 4 characters per 3 bytes; leave room for the envelope.
        fits = (self._max_message_size - 4096) // 4 * 3
        length = fits if data.length is None else min(data.length, fits)
        offset = min(data.offset, INT64_MAX - 1)
        found = await self._store.read(self._store.db.blob, data.sha256, offset, length)
        if found is None:
            raise BlobNotFound(f"No blob has sha256 {data.sha256}.")
        media_type, size, chunk = found
        return BlobData(
            sha256=data.sha256,
            media_type=media_type,
            size=size,
            offset=data.offset,
            data=base64.b64encode(chunk).decode("ascii"),
        )

    async def _modes(self, workspace: str | None) -> ModeList:
        """Roo's GetModes: the reply, and a daemon-wide modesResponse event."""
        where = Path(workspace) if workspace else None
        modes, problems = await anyio.to_thread.run_sync(self._tasks.deps.modes.modes, where)
        tools = self._tasks.tools
        listed = ModeList(
            modes=[
                ModeInfo(
                    slug=m.slug,
                    name=m.name,
                    role_definition=m.definition.role_definition,
                    when_to_use=m.definition.when_to_use,
                    description=m.definition.description,
                    groups=group_names(m),
                    file_regex=m.definition.file_regex,
                    custom_instructions=m.definition.custom_instructions,
                    tools=[n for n in tools.names() if m.allows(tools[n])],
                    source=m.source,
                )
                for m in modes
            ],
            problems=problems,
        )
        await self._journal.emit(ModesResponse(payload=(_plain(listed.modes),)))
        return listed

    async def _slash_commands(self, workspace: str | None) -> CommandList:
        """Roo's GetCommands: the reply, and a daemon-wide commandsResponse event."""
        where = Path(workspace) if workspace else None
        commands = self._tasks.deps.slash_commands
        found, problems = await anyio.to_thread.run_sync(commands.list, where)
        listed = CommandList(commands=[c.info() for c in found], problems=problems)
        await self._journal.emit(CommandsResponse(payload=(_plain(listed.commands),)))
        return listed

    async def _models(self, provider: str | None) -> ModelList:
        """Roo's GetModels: the reply, and a daemon-wide modelsResponse event."""
        models = self._config.models(provider)
        await self._journal.emit(ModelsResponse(payload=(roo_model_record(models.models),)))
        return models
