"""Commands a client sends inside a `TaskCommand`, their results, and the table
that ties each command to its result type and to the key that orders it.

Commands that act on one task carry its id; the daemon runs commands with the
same ordering key one after another and the others concurrently.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from ._base import WireStruct, _CommandBase
from .blobs import BlobData, GetBlob
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
    "CancelTask",
    "CloseTask",
    "Command",
    "CommandSpec",
    "DeleteQueuedMessage",
    "GetStatus",
    "GetTask",
    "GetTaskData",
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
    "TaskRef",
    "TaskSnapshot",
    "command_name",
    "ordering_key",
]


# ---- payloads ---------------------------------------------------------------


class TaskConfiguration(WireStruct, frozen=True):
    """The part of Roo's settings object that a new task reads. Other keys are
    accepted and ignored."""

    api_config_name: Annotated[
        str | None,
        Meta(description="Name of the provider profile to use (Roo's apiConfigName)."),
    ] = None
    workspace: Annotated[
        str | None,
        Meta(
            description=(
                "Directory the agent works in (absolute). Clients send their own working "
                "directory when the user names none; without one the daemon uses its own "
                "working directory, unless that is a directory it refuses (see below)."
            )
        ),
    ] = None
    mode: str | None = None
    kernel_id: Annotated[
        str | None,
        Meta(
            description=(
                "A kernel (ListKernels) the task's code runs in; by default the task starts its"
                " own on first use, in its workspace."
            )
        ),
    ] = None
    approvals: Annotated[
        dict[str, Any] | None,
        Meta(
            description=(
                "Auto-approval settings for this task only (hdsp's ApprovalSettings fields, or "
                "Roo's names such as alwaysAllowWrite), over the daemon's settings."
            )
        ),
    ] = None
    allow_broad_workspace: Annotated[
        bool,
        Meta(
            description=(
                "hdsp: the daemon refuses `/`, its user's home directory itself and its own "
                "data and runtime dirs as a workspace (the agent reads a workspace freely) "
                "unless this is set, by a person who named one of them on purpose."
            )
        ),
    ] = False


class StartNewTaskData(WireStruct, frozen=True):
    text: str
    configuration: TaskConfiguration = TaskConfiguration()
    images: list[str] | None = None
    new_tab: bool | None = None


class SendMessageData(WireStruct, frozen=True):
    text: str | None = None
    images: list[str] | None = None


class ListTasksData(WireStruct, frozen=True):
    cursor: Annotated[
        Annotated[
            str,
            Meta(pattern="^[0-9]{1,19}$"),
        ]
        | None,
        Meta(description="`nextCursor` of the previous page; absent for the newest tasks."),
    ] = None
    limit: Annotated[
        int, Meta(description="Most tasks in one page, 1 to 1000 (else invalid_request).")
    ] = 50


class GetTaskData(WireStruct, frozen=True):
    task_id: Annotated[str, Meta(description="The task's id (`HistoryItem.id`).")]


class RespondToAskData(WireStruct, frozen=True):
    ask_ts: Annotated[
        int,
        Meta(
            description=(
                '`ts` of the ask being answered: the ClineMessage with type "ask" that is '
                "the snapshot's `pendingAsk`, or the newest ask of the task's message events."
            )
        ),
    ]
    response: Annotated[
        Literal["yesButtonClicked", "noButtonClicked", "messageResponse", "objectResponse"],
        Meta(
            description=(
                'Roo\'s ClineAskResponse: "yesButtonClicked", "noButtonClicked", '
                '"messageResponse" or "objectResponse".'
            )
        ),
    ]
    text: str | None = None
    images: list[str] | None = None


class ReplayData(WireStruct, frozen=True):
    since_seq: Annotated[
        int,
        Meta(
            ge=0,
            description=(
                "Exclusive cursor: the page holds events with `seq` greater than this. 0 for "
                "the oldest kept; the `seq` of the last event seen, or the `headSeq` of an Ack "
                "or a snapshot, to continue from there. Older than the oldest kept: "
                "cursor_expired."
            ),
        ),
    ]
    task_id: Annotated[
        str | None,
        Meta(
            description=(
                "Only the events of this topic: a task id, or the empty string for the "
                "daemon-wide events; absent for all."
            )
        ),
    ] = None
    limit: Annotated[
        int,
        Meta(description="Most events in one page; the daemon keeps it within 1..1000."),
    ] = 1000


# ---- commands ---------------------------------------------------------------


class StartNewTask(_CommandBase, tag="StartNewTask", frozen=True):
    data: StartNewTaskData


class CancelTask(_CommandBase, tag="CancelTask", frozen=True):
    task_id: str


class CloseTask(_CommandBase, tag="CloseTask", frozen=True):
    task_id: str


class ResumeTask(_CommandBase, tag="ResumeTask", frozen=True):
    data: Annotated[
        str,
        Meta(description="The task id, as in Roo."),
    ]


class SendMessage(_CommandBase, tag="SendMessage", frozen=True):
    task_id: str
    data: SendMessageData = SendMessageData()


class RespondToAsk(_CommandBase, tag="RespondToAsk", frozen=True):
    """Answer a waiting ask. The first valid answer wins; later ones are refused
    with `already_answered`, and `taskAskResponded` tells every client."""

    task_id: str
    data: RespondToAskData


class DeleteQueuedMessage(_CommandBase, tag="DeleteQueuedMessage", frozen=True):
    """Remove a message that waits in a task's queue (Roo: data is its id)."""

    task_id: str
    data: str


class ListTasks(_CommandBase, tag="ListTasks", frozen=True):
    data: ListTasksData = ListTasksData()


class GetTask(_CommandBase, tag="GetTask", frozen=True):
    data: GetTaskData


class Replay(_CommandBase, tag="Replay", frozen=True):
    data: ReplayData


class Ping(_CommandBase, tag="Ping", frozen=True):
    pass


class GetStatus(_CommandBase, tag="GetStatus", frozen=True):
    pass


class Shutdown(_CommandBase, tag="Shutdown", frozen=True):
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
    | GetBlob
)


# ---- results ----------------------------------------------------------------


class TaskRef(WireStruct, frozen=True):
    task_id: str
    state: TaskState | None = None
    queued: Annotated[
        bool | None,
        Meta(description="SendMessage to a busy task: the message waits in the task's queue."),
    ] = None


class TaskList(WireStruct, frozen=True):
    tasks: list[HistoryItem]
    next_cursor: Annotated[
        str | None,
        Meta(description="Pass as `cursor` to get the next (older) page; absent on the last page."),
    ] = None


class TaskSnapshot(WireStruct, frozen=True):
    item: HistoryItem
    state: TaskState
    messages: Annotated[
        list[ClineMessage],
        Meta(description="Every UI message, including the current text of one still streaming."),
    ]
    head_seq: Annotated[
        int,
        Meta(
            description=(
                "The newest `seq` this snapshot includes: Replay with this as `sinceSeq` "
                "(and the task's id) to get what happened after it."
            )
        ),
    ]
    queue: Annotated[
        list[QueuedMessage],
        Meta(description="Messages waiting for the task's current turn to end."),
    ] = []
    pending_ask: Annotated[
        ClineMessage | None,
        Meta(description="The ask that waits for an answer, if any (also among `messages`)."),
    ] = None


class ReplayPage(WireStruct, frozen=True):
    events: Annotated[
        list[TaskEvent],
        Meta(description="Durable events, oldest first."),
    ]
    head_seq: Annotated[
        int,
        Meta(
            description=(
                "The newest `seq` the daemon had written when it read this page (of any topic)."
            )
        ),
    ]
    more: Annotated[
        bool,
        Meta(
            description=(
                "The page is full: more events may follow. Ask again with the last event's "
                "`seq` as `sinceSeq`."
            )
        ),
    ] = False


class Pong(WireStruct, frozen=True):
    server_time: Annotated[
        int, Meta(description="The daemon's clock, in milliseconds since the epoch.")
    ]


class SandboxStatus(WireStruct, frozen=True):
    """How shell commands and kernels are confined (`sandbox.*` settings)."""

    mode: Annotated[
        str,
        Meta(description='"workspace-write", "read-only" or "off".'),
    ]
    network: Annotated[
        bool,
        Meta(description="Whether sandboxed code may use the network."),
    ] = False
    mechanism: Annotated[
        str,
        Meta(
            description=(
                '"bwrap" (bubblewrap: namespaces and a mount layout), "none" (mode off) or '
                '"unavailable" (then commands and kernels are refused, see `problem`).'
            )
        ),
    ] = "unavailable"
    problem: Annotated[
        str | None,
        Meta(description="Why the sandbox cannot run, and how to fix it; None when it can."),
    ] = None


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
    sandbox: Annotated[
        SandboxStatus | None,
        Meta(description="None from a daemon older than the sandbox."),
    ] = None
    plaintext_keyring: Annotated[
        str | None,
        Meta(
            description=(
                "The file where the daemon's keyring keeps secrets unencrypted, when its "
                "backend is a plain-text file; absent otherwise."
            )
        ),
    ] = None
    storage: Annotated[
        StorageHealth | None,
        Meta(description="Whether the daemon can write its database now (see StorageState)."),
    ] = None


# ---- the table --------------------------------------------------------------


class CommandSpec(msgspec.Struct, frozen=True):
    request: type[Any]
    result: type[Any]
    #: Whether commands of this kind are ordered per task (by the task they name).
    per_task: bool
    #: Whether sending it twice is harmless (a client may resend it after the
    #: daemon went away before replying).
    idempotent: bool = False


COMMANDS: dict[str, CommandSpec] = {
    "StartNewTask": CommandSpec(StartNewTask, TaskRef, per_task=False),
    "CancelTask": CommandSpec(CancelTask, TaskRef, per_task=True),
    "CloseTask": CommandSpec(CloseTask, TaskRef, per_task=True),
    "ResumeTask": CommandSpec(ResumeTask, TaskRef, per_task=True),
    "SendMessage": CommandSpec(SendMessage, TaskRef, per_task=True),
    "RespondToAsk": CommandSpec(RespondToAsk, TaskRef, per_task=True),
    "DeleteQueuedMessage": CommandSpec(DeleteQueuedMessage, TaskRef, per_task=True),
    "ListTasks": CommandSpec(ListTasks, TaskList, per_task=False, idempotent=True),
    "GetTask": CommandSpec(GetTask, TaskSnapshot, per_task=True, idempotent=True),
    "Replay": CommandSpec(Replay, ReplayPage, per_task=False, idempotent=True),
    "Ping": CommandSpec(Ping, Pong, per_task=False, idempotent=True),
    "GetStatus": CommandSpec(GetStatus, StatusResult, per_task=False, idempotent=True),
    "Shutdown": CommandSpec(Shutdown, type(None), per_task=False),
    # Kernel commands run concurrently; the kernel service orders executions.
    "ListKernels": CommandSpec(ListKernels, KernelList, per_task=False),
    "StartKernel": CommandSpec(StartKernel, KernelInfo, per_task=False),
    "AttachKernel": CommandSpec(AttachKernel, KernelInfo, per_task=False),
    "InterruptKernel": CommandSpec(InterruptKernel, KernelRef, per_task=False),
    "RestartKernel": CommandSpec(RestartKernel, KernelRef, per_task=False),
    "ShutdownKernel": CommandSpec(ShutdownKernel, KernelRef, per_task=False),
    "ExecuteCode": CommandSpec(ExecuteCode, ExecutionResult, per_task=False),
    # Settings commands run concurrently; the settings store applies changes in turn.
    "GetSettings": CommandSpec(GetSettings, SettingsView, per_task=False, idempotent=True),
    "UpdateSettings": CommandSpec(UpdateSettings, SettingsView, per_task=False, idempotent=True),
    "ListProfiles": CommandSpec(ListProfiles, ProfileList, per_task=False, idempotent=True),
    "SaveProfile": CommandSpec(SaveProfile, ProfileInfo, per_task=False, idempotent=True),
    "DeleteProfile": CommandSpec(DeleteProfile, ProfileList, per_task=False),
    "SelectProfile": CommandSpec(SelectProfile, ProfileList, per_task=False, idempotent=True),
    "SetSecret": CommandSpec(SetSecret, SecretInfo, per_task=False, idempotent=True),
    "DeleteSecret": CommandSpec(DeleteSecret, SecretInfo, per_task=False),
    "ExportSettings": CommandSpec(ExportSettings, SettingsExport, per_task=False, idempotent=True),
    "ImportSettings": CommandSpec(ImportSettings, ImportResult, per_task=False, idempotent=True),
    "GetModels": CommandSpec(GetModels, ModelList, per_task=False, idempotent=True),
    "GetBlob": CommandSpec(GetBlob, BlobData, per_task=False, idempotent=True),
}


def command_name(command: Command) -> str:
    return type(command).__struct_config__.tag  # type: ignore[return-value]


def ordering_key(command: Command) -> str | None:
    """The task a command is ordered by, or None when it runs concurrently."""
    match command:
        case (
            CancelTask(task_id=t)
            | CloseTask(task_id=t)
            | SendMessage(task_id=t)
            | RespondToAsk(task_id=t)
            | DeleteQueuedMessage(task_id=t)
        ):
            return t
        case ResumeTask(data=t):
            return t
        case GetTask(data=GetTaskData(task_id=t)):
            return t
    return None
