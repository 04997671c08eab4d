"""Task events: Roo's event names and payload tuples, plus hdsp's additions.

Every event is durable (persisted, then published with a `seq`) except a
`message` event that updates a message still marked `partial`, an
`executionOutput`, a `kernelStatus` of busy or idle, and a `storageChanged`
that reports a failure.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from ._base import SERVER_ORIGIN as _SERVER
from ._base import WireStruct
from .checkpoints import CheckpointInfo
from .documents import DocumentEditRequest
from .history import ClineMessage, TokenUsage, ToolUsage
from .kernels import ExecutionOutputData, KernelInfo, KernelState
from .mcp import McpServerStatus
from .modes import TodoItem
from .prompt_context import PromptContext
from .settings import SettingsChange
from .storage import StorageHealth, StorageState

__all__ = [
    "SYNC_PREFIX",
    "CheckpointRestored",
    "CheckpointSaved",
    "CommandsResponse",
    "CompletedInfo",
    "DaemonShuttingDown",
    "DocumentEditRequested",
    "Event",
    "EventsSynced",
    "ExecutionOutput",
    "KernelShutdown",
    "KernelStarted",
    "KernelStatus",
    "McpServerChanged",
    "MessageEvent",
    "MessagePayload",
    "ModelsResponse",
    "ModesResponse",
    "QueuedMessage",
    "QueuedMessagesUpdated",
    "SettingsChanged",
    "StorageChanged",
    "TaskAborted",
    "TaskActive",
    "TaskAskResponded",
    "TaskClosed",
    "TaskCompleted",
    "TaskCreated",
    "TaskDelegated",
    "TaskDelegationCompleted",
    "TaskDelegationResumed",
    "TaskEvent",
    "TaskFocused",
    "TaskIdle",
    "TaskInteractive",
    "TaskMessagesDeleted",
    "TaskModeSwitched",
    "TaskPaused",
    "TaskResumable",
    "TaskRewound",
    "TaskSpawned",
    "TaskStarted",
    "TaskTodoListUpdated",
    "TaskTokenUsageUpdated",
    "TaskToolFailed",
    "TaskUnfocused",
    "TaskUnpaused",
    "event_task_id",
    "is_durable",
]


#: Topics that start with this are sync probes, never task ids (task ids never
#: contain NUL): the daemon answers a subscription to one with `eventsSynced`.
SYNC_PREFIX = b"\x00sync."


class _EventBase(WireStruct, tag_field="eventName", frozen=True):
    pass


class CompletedInfo(WireStruct, frozen=True):
    is_subtask: bool


class MessagePayload(WireStruct, frozen=True):
    task_id: str
    action: Literal["created", "updated"]
    message: ClineMessage


class QueuedMessage(WireStruct, frozen=True):
    timestamp: int
    id: str
    text: str
    images: list[str] | None = None
    #: hdsp: "steer" for a message that joins the running turn at its next request.
    delivery: Literal["queue", "steer"] | None = None
    #: hdsp: the context the message was sent with (SendMessageData.context).
    context: PromptContext | None = None
    #: hdsp: over TCP, the name the sender's key is authorised under (ClineMessage.sentBy).
    sent_by: str | None = None


# Events whose payload is just the task id.
class TaskCreated(_EventBase, tag="taskCreated", frozen=True):
    payload: tuple[str]


class TaskStarted(_EventBase, tag="taskStarted", frozen=True):
    payload: tuple[str]


class TaskAborted(_EventBase, tag="taskAborted", frozen=True):
    payload: tuple[str]


class TaskFocused(_EventBase, tag="taskFocused", frozen=True):
    payload: tuple[str]


class TaskUnfocused(_EventBase, tag="taskUnfocused", frozen=True):
    payload: tuple[str]


class TaskActive(_EventBase, tag="taskActive", frozen=True):
    payload: tuple[str]


class TaskInteractive(_EventBase, tag="taskInteractive", frozen=True):
    payload: tuple[str]


class TaskResumable(_EventBase, tag="taskResumable", frozen=True):
    payload: tuple[str]


class TaskIdle(_EventBase, tag="taskIdle", frozen=True):
    payload: tuple[str]


class TaskPaused(_EventBase, tag="taskPaused", frozen=True):
    payload: tuple[str]


class TaskUnpaused(_EventBase, tag="taskUnpaused", frozen=True):
    payload: tuple[str]


class TaskAskResponded(_EventBase, tag="taskAskResponded", frozen=True):
    payload: tuple[str]


class TaskCompleted(_EventBase, tag="taskCompleted", frozen=True):
    payload: tuple[str, TokenUsage, ToolUsage, CompletedInfo]


class TaskSpawned(_EventBase, tag="taskSpawned", frozen=True):
    """[taskId, childId]"""

    payload: tuple[str, str]


class TaskDelegated(_EventBase, tag="taskDelegated", frozen=True):
    """[parentId, childId]"""

    payload: tuple[str, str]


class TaskDelegationCompleted(_EventBase, tag="taskDelegationCompleted", frozen=True):
    """[parentId, childId, completionResultSummary]"""

    payload: tuple[str, str, str]


class TaskDelegationResumed(_EventBase, tag="taskDelegationResumed", frozen=True):
    """[parentId, childId]"""

    payload: tuple[str, str]


class MessageEvent(_EventBase, tag="message", frozen=True):
    payload: tuple[MessagePayload]


class TaskModeSwitched(_EventBase, tag="taskModeSwitched", frozen=True):
    payload: tuple[str, str]


class QueuedMessagesUpdated(_EventBase, tag="queuedMessagesUpdated", frozen=True):
    payload: tuple[str, list[QueuedMessage]]


class TaskToolFailed(_EventBase, tag="taskToolFailed", frozen=True):
    """[taskId, toolName, error]"""

    payload: tuple[str, str, str]


class TaskTokenUsageUpdated(_EventBase, tag="taskTokenUsageUpdated", frozen=True):
    payload: tuple[str, TokenUsage, ToolUsage]


class CommandsResponse(_EventBase, tag="commandsResponse", frozen=True):
    payload: tuple[list[Any]]


class ModesResponse(_EventBase, tag="modesResponse", frozen=True):
    payload: tuple[list[Any]]


class ModelsResponse(_EventBase, tag="modelsResponse", frozen=True):
    payload: tuple[dict[str, Any]]


# hdsp additions
class TaskTodoListUpdated(_EventBase, tag="taskTodoListUpdated", frozen=True):
    """[taskId, todos, by]: the task's todo list is now `todos` (the whole list);
    `by` is "model" (update_todo_list) or "user" (UpdateTodoList)."""

    payload: tuple[str, list[TodoItem], str]


class TaskClosed(_EventBase, tag="taskClosed", frozen=True):
    """The task was closed: it holds no resources until it is resumed."""

    payload: tuple[str]


class TaskRewound(_EventBase, tag="taskRewound", frozen=True):
    """[taskId, ts]: the task's messages from `ts` on were removed (RewindTask,
    EditMessage): drop them from views; a message with an earlier ts that changed
    comes as its own `message` event."""

    payload: tuple[str, int]


class TaskMessagesDeleted(_EventBase, tag="taskMessagesDeleted", frozen=True):
    """[taskId, [ts, ...]]: these messages of the task were removed (DeleteMessage):
    drop them from views; the others stay as they were."""

    payload: tuple[str, list[int]]


class CheckpointSaved(_EventBase, tag="checkpointSaved", frozen=True):
    """[taskId, checkpoint]: a checkpoint of the task's workspace was taken."""

    payload: tuple[str, CheckpointInfo]


class CheckpointRestored(_EventBase, tag="checkpointRestored", frozen=True):
    """[taskId, checkpoint, mode]: the task's files ("files"), history ("history")
    or both ("both") were restored to the checkpoint."""

    payload: tuple[str, CheckpointInfo, str]


class DaemonShuttingDown(_EventBase, tag="daemonShuttingDown", frozen=True):
    """The last event before the daemon exits: [reason]. Published daemon-wide."""

    payload: tuple[str]


class KernelStarted(_EventBase, tag="kernelStarted", frozen=True):
    """hdsp started a kernel or attached to one: [kernel]. Daemon-wide."""

    payload: tuple[KernelInfo]


class KernelStatus(_EventBase, tag="kernelStatus", frozen=True):
    """[kernelId, status]. Daemon-wide. busy and idle flip with every execution
    and are live-only (ListKernels has the current one); starting, restarting and
    dead are durable."""

    payload: tuple[str, KernelState]


class KernelShutdown(_EventBase, tag="kernelShutdown", frozen=True):
    """hdsp shut the kernel down, or detached from one it did not start: [kernelId].
    Daemon-wide."""

    payload: tuple[str]


class ExecutionOutput(_EventBase, tag="executionOutput", frozen=True):
    """Outputs of a running execution, a few per second at most. Live-only: the
    execution's result (a tool result, the cell_output message, the ExecuteCode
    reply) is what lasts. Published under the task's topic when a task runs the
    code, daemon-wide otherwise."""

    payload: tuple[ExecutionOutputData]


class SettingsChanged(_EventBase, tag="settingsChanged", frozen=True):
    """Settings, a profile or a secret changed (never with a secret's value), or
    the daemon recovered from a corrupt settings file at start: [change].
    Daemon-wide."""

    payload: tuple[SettingsChange]


class StorageChanged(_EventBase, tag="storageChanged", frozen=True):
    """The daemon's storage stopped or started taking writes: [health].
    Daemon-wide. A failure is live-only (it cannot be written: that is the
    failure), and GetStatus reports it to a client that connects later; the
    recovery is durable."""

    payload: tuple[StorageHealth]


class McpServerChanged(_EventBase, tag="mcpServerChanged", frozen=True):
    """An MCP server's state changed (connecting, connected, failed, restarting,
    its tools changed): [status]. Daemon-wide."""

    payload: tuple[McpServerStatus]


class DocumentEditRequested(_EventBase, tag="documentEditRequested", frozen=True):
    """A notebook tool asks a document host to change (or read) a notebook open
    there: [request] (see hdsp.protocol.documents). Daemon-wide and live-only: a
    host that misses it does not answer, and the tool falls back to the file."""

    payload: tuple[DocumentEditRequest]


class EventsSynced(_EventBase, tag="eventsSynced", frozen=True):
    """The answer to a sync probe: [topic]. A client subscribes to a topic of its
    own that starts with `SYNC_PREFIX` ("\\u0000sync."); the daemon publishes this
    on that topic once it sees the subscription, so every subscription the client
    made before it is in effect. Live-only, never in the log. A client subscribed
    to everything also receives other clients' probes: ignore topics that start
    with "\\u0000"."""

    payload: Annotated[
        tuple[str],
        Meta(description="The probe's topic (bytes that are not UTF-8 replaced by U+FFFD)."),
    ]


Event = (
    TaskCreated
    | TaskStarted
    | TaskCompleted
    | TaskAborted
    | TaskFocused
    | TaskUnfocused
    | TaskActive
    | TaskInteractive
    | TaskResumable
    | TaskIdle
    | TaskPaused
    | TaskUnpaused
    | TaskSpawned
    | TaskDelegated
    | TaskDelegationCompleted
    | TaskDelegationResumed
    | MessageEvent
    | TaskModeSwitched
    | TaskAskResponded
    | QueuedMessagesUpdated
    | TaskToolFailed
    | TaskTokenUsageUpdated
    | CommandsResponse
    | ModesResponse
    | ModelsResponse
    | TaskClosed
    | TaskRewound
    | TaskMessagesDeleted
    | CheckpointSaved
    | CheckpointRestored
    | DaemonShuttingDown
    | KernelStarted
    | KernelStatus
    | KernelShutdown
    | ExecutionOutput
    | SettingsChanged
    | StorageChanged
    | EventsSynced
    | DocumentEditRequested
    | TaskTodoListUpdated
    | McpServerChanged
)

_DAEMON_WIDE = (
    CommandsResponse,
    ModesResponse,
    ModelsResponse,
    DaemonShuttingDown,
    KernelStarted,
    KernelStatus,
    KernelShutdown,
    SettingsChanged,
    StorageChanged,
    EventsSynced,
    DocumentEditRequested,
    McpServerChanged,
)


def event_task_id(event: Event) -> str | None:
    """The task an event belongs to (its PUB topic), or None for daemon-wide ones."""
    if isinstance(event, _DAEMON_WIDE):
        return None
    if isinstance(event, MessageEvent):
        return event.payload[0].task_id
    if isinstance(event, ExecutionOutput):
        return event.payload[0].task_id
    first: Any = event.payload[0]
    return first if isinstance(first, str) else None


def is_durable(event: Event) -> bool:
    """False only for an update of a message that is still streaming."""
    if isinstance(event, MessageEvent):
        p = event.payload[0]
        return not (p.action == "updated" and p.message.partial)
    if isinstance(event, ExecutionOutput | EventsSynced | DocumentEditRequested):
        return False
    if isinstance(event, KernelStatus):
        return event.payload[1] not in (KernelState.BUSY, KernelState.IDLE)
    if isinstance(event, StorageChanged):
        return event.payload[0].state is StorageState.OK
    return True


class TaskEvent(WireStruct, tag_field="type", tag="TaskEvent", frozen=True):
    """The envelope of an event, published on the `events` socket under the topic
    of its task id (empty for daemon-wide events)."""

    data: Event
    origin: Literal["server"] = _SERVER
    relay_client_id: Annotated[
        str | None,
        Meta(description="Roo's field for events relayed for another client; hdsp leaves it out."),
    ] = None
    seq: Annotated[
        int | None,
        Meta(
            description=(
                "Position of a durable event in the daemon's event log: global (all topics), "
                "starting at 1, gap-free, increasing in publication order. Absent on live-only "
                "events (partial message updates, executionOutput, busy/idle kernelStatus, "
                "a failing storageChanged, eventsSynced)."
            )
        ),
    ] = None
    prev_seq: Annotated[
        int | None,
        Meta(
            description=(
                "`seq` of the previous durable event of the same topic (task id, or the empty "
                "daemon-wide topic); 0 for the topic's first. A client following one task has "
                "missed events exactly when prevSeq is greater than the last seq it saw of "
                "that task. On a live-only event: the last durable event of its topic "
                "published before it, so a client that has a later version of the message "
                "from the log can ignore it."
            )
        ),
    ] = None
