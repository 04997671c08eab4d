"""Commands a client sends inside a `TaskCommand`, their results, and the table
that ties each command to its result type and to the key that orders it.

The commands live by area (`tasks.py`, `status.py`, `kernels.py`, `settings.py`,
...); this module gathers them into the `Command` union and the table (the
package's `__init__` re-exports each area's names).

Commands that act on one task carry its id; the daemon runs commands with the
same ordering key one after another and the others concurrently. Each row of
`COMMANDS` says which: its `ordering` reads the key off the command.

Adding a command: its struct (typed by its result) in the module of its area,
its arm in the `Command` union and its row here, its arm in
the daemon's command table (`hdsp.daemon.commands`) calling the method of the part
that owns the work, and its method on the client (`hdsp.client.Client`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from ._base import CommandBase
from .agents import AgentList, ListAgents
from .blobs import BlobData, GetBlob
from .checkpoints import (
    CheckpointDiff,
    CheckpointList,
    CheckpointRestoreResult,
    DiffCheckpoints,
    ListCheckpoints,
    RestoreCheckpoint,
)
from .documents import AnswerDocumentEdit, DocumentEditTaken, DocumentsHosted, HostDocuments
from .kernels import (
    AttachKernel,
    ExecuteCode,
    ExecutionResult,
    InterruptKernel,
    KernelInfo,
    KernelList,
    KernelRef,
    ListKernels,
    ListRemoteKernels,
    RemoteKernelList,
    RestartKernel,
    ShutdownKernel,
    StartKernel,
)
from .mcp import (
    ListMcpServers,
    McpServerList,
    McpServerStatus,
    RestartMcpServer,
    TrustMcpServer,
)
from .modes import (
    CommandList,
    GetCommands,
    GetModes,
    GetSystemPrompt,
    ModeList,
    SystemPromptText,
)
from .relayed_calls import CallTool, CreateTask, ToolCallResult
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
from .status import GetStatus, Ping, Pong, Shutdown, StatusResult
from .tasks import (
    CancelTask,
    CloseTask,
    CondenseTask,
    DeleteMessage,
    DeleteQueuedMessage,
    EditMessage,
    ForkTask,
    GetTask,
    GetTaskPage,
    ListTasks,
    Replay,
    ReplayPage,
    RespondToAsk,
    ResumeTask,
    RewindTask,
    SendMessage,
    StartNewTask,
    SwitchMode,
    TaskList,
    TaskPage,
    TaskRef,
    TaskSnapshot,
    UpdateTodoList,
)
from .variables import ListVariables, VariableList

__all__ = [
    "COMMANDS",
    "Command",
    "CommandBase",
    "CommandSpec",
    "command_name",
    "command_spec",
    "ordering_key",
]


Command = (
    StartNewTask
    | CancelTask
    | CloseTask
    | CondenseTask
    | RewindTask
    | EditMessage
    | DeleteMessage
    | ForkTask
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
    | ListRemoteKernels
    | StartKernel
    | AttachKernel
    | InterruptKernel
    | RestartKernel
    | ShutdownKernel
    | ExecuteCode
    | ListVariables
    | ListMcpServers
    | RestartMcpServer
    | TrustMcpServer
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
    | ListCheckpoints
    | DiffCheckpoints
    | RestoreCheckpoint
    | HostDocuments
    | AnswerDocumentEdit
    | GetModes
    | GetCommands
    | GetSystemPrompt
    | SwitchMode
    | UpdateTodoList
    | ListAgents
    | CreateTask
    | CallTool
)


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
    CommandSpec(CondenseTask, TaskRef, ordering=lambda c: c.task_id),
    CommandSpec(RewindTask, TaskRef, ordering=lambda c: c.data.task_id),
    CommandSpec(EditMessage, TaskRef, ordering=lambda c: c.data.task_id),
    CommandSpec(DeleteMessage, TaskRef, ordering=lambda c: c.data.task_id),
    CommandSpec(ForkTask, TaskRef, ordering=lambda c: c.data.task_id),
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
    CommandSpec(ListRemoteKernels, RemoteKernelList, without_storage=True),
    CommandSpec(StartKernel, KernelInfo),
    CommandSpec(AttachKernel, KernelInfo),
    CommandSpec(InterruptKernel, KernelRef, without_storage=True),
    CommandSpec(RestartKernel, KernelRef),
    CommandSpec(ShutdownKernel, KernelRef, without_storage=True),
    CommandSpec(ExecuteCode, ExecutionResult),
    # Reads the kernel with a silent snippet; never waits behind running code.
    CommandSpec(ListVariables, VariableList, idempotent=True, without_storage=True),
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
    CommandSpec(GetBlob, BlobData, idempotent=True, without_storage=True),
    # Checkpoints (issue 20). A restore with the kernel waits for an answer to its
    # ask, which comes as a RespondToAsk ordered by the same task: so it runs
    # concurrently (the checkpoint service orders work on one workspace itself).
    CommandSpec(ListCheckpoints, CheckpointList, idempotent=True),
    CommandSpec(DiffCheckpoints, CheckpointDiff, idempotent=True),
    CommandSpec(RestoreCheckpoint, CheckpointRestoreResult),
    # Document hosts (documents.py): in memory only, concurrent.
    CommandSpec(HostDocuments, DocumentsHosted, idempotent=True, without_storage=True),
    CommandSpec(AnswerDocumentEdit, DocumentEditTaken, idempotent=True, without_storage=True),
    CommandSpec(GetModes, ModeList, idempotent=True, without_storage=True),
    CommandSpec(GetCommands, CommandList, idempotent=True, without_storage=True),
    CommandSpec(
        GetSystemPrompt,
        SystemPromptText,
        ordering=lambda c: c.data.task_id,
        idempotent=True,
        without_storage=True,
    ),
    CommandSpec(SwitchMode, TaskRef, ordering=lambda c: c.task_id, idempotent=True),
    CommandSpec(UpdateTodoList, TaskRef, ordering=lambda c: c.task_id, idempotent=True),
    CommandSpec(ListAgents, AgentList, idempotent=True, without_storage=True),
    # Relayed tool calls (issue 23, relayed_calls.py). CallTool waits for the answer
    # to its ask, which comes as a RespondToAsk ordered by the task: so it runs
    # concurrently (the task refuses a second call while one runs).
    CommandSpec(CreateTask, TaskRef),
    CommandSpec(CallTool, ToolCallResult),
    # MCP servers (issue 23): the MCP hub orders its own work per server.
    CommandSpec(ListMcpServers, McpServerList, idempotent=True, without_storage=True),
    CommandSpec(RestartMcpServer, McpServerStatus, idempotent=True, without_storage=True),
    CommandSpec(TrustMcpServer, McpServerStatus, idempotent=True),
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
