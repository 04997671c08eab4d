"""Commands a client sends inside a `TaskCommand`, their results, and the table
that ties each command to its result type and to the key that orders it.

Commands that act on one task carry its id; the daemon runs commands with the
same ordering key one after another and the others concurrently. Each row of
`COMMANDS` says which: its `ordering` reads the key off the command.

Adding a command: its struct (typed by its result) and its row here, its arm in
the daemon's command table (`hdsp.daemon.commands`) calling the method of the part
that owns the work, and its method on the client (`hdsp.client.Client`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec

from ._base import CommandBase, WireStruct
from .events import QueuedMessage, TaskEvent
from .history import ClineMessage, HistoryItem, TaskState
from .kernels import (
    AttachKernel,
    ExecuteCode,
    ExecutionResult,
    InterruptKernel,
    KernelInfo,
    KernelList,
    KernelRef,
    ListKernels,
    RestartKernel,
    ShutdownKernel,
    StartKernel,
)
from .settings import (
    DeleteProfile,
    DeleteSecret,
    ExportSettings,
    GetModels,
    GetSettings,
    ImportResult,
    ImportSettings,
    ListProfiles,
    ModelList,
    ProfileInfo,
    ProfileList,
    SaveProfile,
    SecretInfo,
    SelectProfile,
    SetSecret,
    SettingsExport,
    SettingsView,
    UpdateSettings,
)
from .storage import StorageHealth

__all__ = [
    "COMMANDS",
    "MAX_TASK_PAGE",
    "CancelTask",
    "CloseTask",
    "Command",
    "CommandBase",
    "CommandSpec",
    "DeleteQueuedMessage",
    "GetStatus",
    "GetTask",
    "GetTaskData",
    "GetTaskPage",
    "GetTaskPageData",
    "ListTasks",
    "ListTasksData",
    "Ping",
    "Pong",
    "Replay",
    "ReplayData",
    "ReplayPage",
    "RespondToAsk",
    "RespondToAskData",
    "ResumeTask",
    "SandboxStatus",
    "SendMessage",
    "SendMessageData",
    "Shutdown",
    "StartNewTask",
    "StartNewTaskData",
    "StatusResult",
    "TaskConfiguration",
    "TaskList",
    "TaskPage",
    "TaskRef",
    "TaskSnapshot",
    "command_name",
    "command_spec",
    "ordering_key",
]

#: The most messages one GetTaskPage returns.
MAX_TASK_PAGE = 1000


# ---- payloads ---------------------------------------------------------------


class TaskConfiguration(WireStruct, frozen=True):
    """The part of Roo's settings object that a new task reads. Other keys are
    accepted and ignored."""

    #: Name of the provider profile to use (Roo's apiConfigName).
    api_config_name: str | None = None
    #: Directory the agent works in (absolute). Clients send their own working
    #: directory when the user names none; without one the daemon uses its own
    #: working directory, unless that is a directory it refuses (see below).
    workspace: str | None = None
    mode: str | None = None
    #: A kernel (ListKernels) the task's code runs in; by default the task starts
    #: its own on first use, in its workspace.
    kernel_id: str | None = None
    #: Auto-approval settings for this task only (hdsp's ApprovalSettings fields,
    #: or Roo's names such as alwaysAllowWrite), over the daemon's settings.
    approvals: dict[str, Any] | None = None
    #: hdsp: the daemon refuses `/`, its user's home directory itself and its own
    #: data and runtime dirs as a workspace (the agent reads a workspace freely)
    #: unless this is set, by a person who named one of them on purpose.
    allow_broad_workspace: bool = False


class StartNewTaskData(WireStruct, frozen=True):
    text: str
    configuration: TaskConfiguration = TaskConfiguration()
    images: list[str] | None = None
    new_tab: bool | None = None


class SendMessageData(WireStruct, frozen=True):
    text: str | None = None
    images: list[str] | None = None


class ListTasksData(WireStruct, frozen=True):
    #: `nextCursor` of the previous page; None for the newest tasks.
    cursor: str | None = None
    limit: int = 50


class GetTaskData(WireStruct, frozen=True):
    task_id: str


class GetTaskPageData(WireStruct, frozen=True):
    task_id: str
    start: (
        Annotated[
            int,
            msgspec.Meta(
                ge=0,
                description="Index (0-based, in the order of GetTask's messages) of the "
                "page's first message; 0 when neither this nor `cursor` is given.",
            ),
        ]
        | None
    ) = None
    cursor: Annotated[
        str | None,
        msgspec.Meta(
            description="`nextCursor` of the previous page: this page starts after "
            "that page's last message. Not together with `start`."
        ),
    ] = None
    limit: Annotated[
        int,
        msgspec.Meta(ge=1, le=MAX_TASK_PAGE, description="Most messages in the page."),
    ] = 100


class RespondToAskData(WireStruct, frozen=True):
    #: `ts` of the ask message being answered.
    ask_ts: int
    #: Roo's ClineAskResponse: "yesButtonClicked", "noButtonClicked",
    #: "messageResponse" or "objectResponse".
    response: Literal["yesButtonClicked", "noButtonClicked", "messageResponse", "objectResponse"]
    text: str | None = None
    images: list[str] | None = None


class ReplayData(WireStruct, frozen=True):
    #: Return events with `seq` greater than this.
    since_seq: int
    #: Only this task's events.
    task_id: str | None = None
    #: Most events in one page; the daemon caps it.
    limit: int = 1000


# ---- commands ---------------------------------------------------------------


class StartNewTask(CommandBase["TaskRef"], tag="StartNewTask", frozen=True):
    data: StartNewTaskData


class CancelTask(CommandBase["TaskRef"], tag="CancelTask", frozen=True):
    task_id: str


class CloseTask(CommandBase["TaskRef"], tag="CloseTask", frozen=True):
    task_id: str


class ResumeTask(CommandBase["TaskRef"], tag="ResumeTask", frozen=True):
    #: The task id, as in Roo.
    data: str


class SendMessage(CommandBase["TaskRef"], tag="SendMessage", frozen=True):
    task_id: str
    data: SendMessageData = SendMessageData()


class RespondToAsk(CommandBase["TaskRef"], tag="RespondToAsk", frozen=True):
    """Answer a waiting ask. The first valid answer wins; later ones are refused
    with `already_answered`, and `taskAskResponded` tells every client."""

    task_id: str
    data: RespondToAskData


class DeleteQueuedMessage(CommandBase["TaskRef"], tag="DeleteQueuedMessage", frozen=True):
    """Remove a message that waits in a task's queue (Roo: data is its id)."""

    task_id: str
    data: str


class ListTasks(CommandBase["TaskList"], tag="ListTasks", frozen=True):
    data: ListTasksData = ListTasksData()


class GetTask(CommandBase["TaskSnapshot"], tag="GetTask", frozen=True):
    data: GetTaskData


class GetTaskPage(CommandBase["TaskPage"], tag="GetTaskPage", frozen=True):
    """A page of a task's UI messages, oldest first: from `start` (or from after
    `cursor`) up to `limit` of them. Paging from start 0 until `nextCursor` is
    absent yields the messages `GetTask` returns, in the same order."""

    data: GetTaskPageData


class Replay(CommandBase["ReplayPage"], tag="Replay", frozen=True):
    data: ReplayData


class Ping(CommandBase["Pong"], tag="Ping", frozen=True):
    pass


class GetStatus(CommandBase["StatusResult"], tag="GetStatus", frozen=True):
    pass


class Shutdown(CommandBase[None], tag="Shutdown", frozen=True):
    pass


Command = (
    StartNewTask
    | CancelTask
    | CloseTask
    | ResumeTask
    | SendMessage
    | RespondToAsk
    | DeleteQueuedMessage
    | ListTasks
    | GetTask
    | GetTaskPage
    | Replay
    | Ping
    | GetStatus
    | Shutdown
    | ListKernels
    | StartKernel
    | AttachKernel
    | InterruptKernel
    | RestartKernel
    | ShutdownKernel
    | ExecuteCode
    | GetSettings
    | UpdateSettings
    | ListProfiles
    | SaveProfile
    | DeleteProfile
    | SelectProfile
    | SetSecret
    | DeleteSecret
    | ExportSettings
    | ImportSettings
    | GetModels
)


# ---- results ----------------------------------------------------------------


class TaskRef(WireStruct, frozen=True):
    task_id: str
    state: TaskState | None = None
    #: SendMessage to a busy task: the message waits in the task's queue.
    queued: bool | None = None


class TaskList(WireStruct, frozen=True):
    tasks: list[HistoryItem]
    #: Pass as `cursor` to get the next (older) page; absent on the last page.
    next_cursor: str | None = None


class TaskSnapshot(WireStruct, frozen=True):
    item: HistoryItem
    state: TaskState
    #: Every UI message, including the current text of one still streaming.
    messages: list[ClineMessage]
    #: The newest `seq` this snapshot includes; replay from here to continue.
    head_seq: int
    #: Messages waiting for the task's current turn to end.
    queue: list[QueuedMessage] = []
    #: The ask that waits for an answer, if any (also among `messages`).
    pending_ask: ClineMessage | None = None


class TaskPage(WireStruct, frozen=True):
    #: The page's messages, oldest first (a message still streaming as it is now).
    messages: list[ClineMessage]
    #: Index of the first of `messages` in the task's whole history.
    start: int
    #: How many messages the task's history holds.
    total: int
    #: The newest `seq` this page includes; replay from here to continue.
    head_seq: int
    #: Pass as `cursor` for the next page; absent on the last page.
    next_cursor: str | None = None


class ReplayPage(WireStruct, frozen=True):
    #: Durable events, oldest first.
    events: list[TaskEvent]
    #: The newest `seq` the daemon has written; ask again while a page was full.
    head_seq: int
    #: True when more events follow this page.
    more: bool = False


class Pong(WireStruct, frozen=True):
    server_time: int


class SandboxStatus(WireStruct, frozen=True):
    """How shell commands and kernels are confined (`sandbox.*` settings)."""

    #: "workspace-write", "read-only" or "off".
    mode: str
    #: Whether sandboxed code may use the network.
    network: bool = False
    #: "bwrap" (bubblewrap: namespaces and a mount layout), "none" (mode off) or
    #: "unavailable" (then commands and kernels are refused, see `problem`).
    mechanism: str = "unavailable"
    #: Why the sandbox cannot run, and how to fix it; None when it can.
    problem: str | None = None


class StatusResult(WireStruct, frozen=True):
    server_version: str
    protocol_version: int
    pid: int
    uptime_seconds: float
    head_seq: int
    clients: int
    tasks_total: int
    tasks_running: int
    data_dir: str
    runtime_dir: str
    #: None from a daemon older than the sandbox.
    sandbox: SandboxStatus | None = None
    #: The file where the daemon's keyring keeps secrets unencrypted, when its
    #: backend is a plain-text file; absent otherwise.
    plaintext_keyring: str | None = None
    #: Whether the daemon can write its database now (see StorageState).
    storage: StorageHealth | None = None


# ---- the table --------------------------------------------------------------

C = TypeVar("C", bound=CommandBase[Any])
R = TypeVar("R")


def _concurrent(command: object) -> None:
    return None


class CommandSpec(msgspec.Struct, Generic[C, R], frozen=True):
    """One row of the table: a command, its result, and how the daemon runs it."""

    request: type[C]
    result: type[R]
    #: The command's ordering key: the task it names, whose commands run one
    #: after another in the order they came; None runs it concurrently.
    ordering: Callable[[C], str | None] = _concurrent
    #: Whether sending it twice is harmless (a client may resend it after the
    #: daemon went away before replying).
    idempotent: bool = False
    #: Served while the storage cannot write: it only reads, or it stops work.
    without_storage: bool = False


def _table(*rows: CommandSpec[Any, Any]) -> dict[str, CommandSpec[Any, Any]]:
    return {row.request.__struct_config__.tag: row for row in rows}


# A tuple without a declared type, so that mypy checks each row's `ordering`
# against the row's own command.
_ROWS = (
    CommandSpec(StartNewTask, TaskRef),
    CommandSpec(CancelTask, TaskRef, ordering=lambda c: c.task_id, without_storage=True),
    CommandSpec(CloseTask, TaskRef, ordering=lambda c: c.task_id, without_storage=True),
    CommandSpec(ResumeTask, TaskRef, ordering=lambda c: c.data),
    CommandSpec(SendMessage, TaskRef, ordering=lambda c: c.task_id),
    CommandSpec(RespondToAsk, TaskRef, ordering=lambda c: c.task_id),
    CommandSpec(DeleteQueuedMessage, TaskRef, ordering=lambda c: c.task_id),
    CommandSpec(ListTasks, TaskList, idempotent=True, without_storage=True),
    CommandSpec(
        GetTask,
        TaskSnapshot,
        ordering=lambda c: c.data.task_id,
        idempotent=True,
        without_storage=True,
    ),
    CommandSpec(
        GetTaskPage,
        TaskPage,
        ordering=lambda c: c.data.task_id,
        idempotent=True,
        without_storage=True,
    ),
    CommandSpec(Replay, ReplayPage, idempotent=True, without_storage=True),
    CommandSpec(Ping, Pong, idempotent=True, without_storage=True),
    CommandSpec(GetStatus, StatusResult, idempotent=True, without_storage=True),
    CommandSpec(Shutdown, type(None), without_storage=True),
    # Kernel commands run concurrently; the kernel service orders executions.
    CommandSpec(ListKernels, KernelList, without_storage=True),
    CommandSpec(StartKernel, KernelInfo),
    CommandSpec(AttachKernel, KernelInfo),
    CommandSpec(InterruptKernel, KernelRef, without_storage=True),
    CommandSpec(RestartKernel, KernelRef),
    CommandSpec(ShutdownKernel, KernelRef, without_storage=True),
    CommandSpec(ExecuteCode, ExecutionResult),
    # Settings commands run concurrently; the settings store applies changes in turn.
    CommandSpec(GetSettings, SettingsView, idempotent=True, without_storage=True),
    CommandSpec(UpdateSettings, SettingsView, idempotent=True),
    CommandSpec(ListProfiles, ProfileList, idempotent=True, without_storage=True),
    CommandSpec(SaveProfile, ProfileInfo, idempotent=True),
    CommandSpec(DeleteProfile, ProfileList),
    CommandSpec(SelectProfile, ProfileList, idempotent=True),
    CommandSpec(SetSecret, SecretInfo, idempotent=True),
    CommandSpec(DeleteSecret, SecretInfo),
    CommandSpec(ExportSettings, SettingsExport, idempotent=True, without_storage=True),
    CommandSpec(ImportSettings, ImportResult, idempotent=True),
    CommandSpec(GetModels, ModelList, idempotent=True, without_storage=True),
)

#: The table: each command's row, by its `commandName`.
COMMANDS: dict[str, CommandSpec[Any, Any]] = _table(*_ROWS)

_BY_TYPE: dict[type[Any], CommandSpec[Any, Any]] = {row.request: row for row in COMMANDS.values()}


def command_name(command: CommandBase[Any]) -> str:
    return type(command).__struct_config__.tag  # type: ignore[return-value]


def command_spec(command: CommandBase[Any]) -> CommandSpec[Any, Any]:
    """The row of `command`'s kind."""
    return _BY_TYPE[type(command)]


def ordering_key(command: Command) -> str | None:
    """The task a command is ordered by, or None when it runs concurrently."""
    return _BY_TYPE[type(command)].ordering(command)
