"""Commands that act on tasks (start, message, rewind, fork, read, replay), their
payloads, and the results they reply with.

Their rows, which say how each is ordered, are in the table of `commands.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from ._base import CommandBase, WireStruct
from .events import QueuedMessage, TaskEvent
from .history import ClineMessage, HistoryItem, TaskState
from .mcp import OfferedMcpServer
from .modes import TodoItem
from .prompt_context import PromptContext

__all__ = [
    "MAX_PROMPT_BYTES",
    "MAX_TASK_PAGE",
    "CancelTask",
    "CloseTask",
    "CondenseTask",
    "DeleteMessage",
    "DeleteMessageData",
    "DeleteQueuedMessage",
    "EditMessage",
    "EditMessageData",
    "ForkTask",
    "ForkTaskData",
    "GetTask",
    "GetTaskData",
    "GetTaskPage",
    "GetTaskPageData",
    "ListTasks",
    "ListTasksData",
    "Replay",
    "ReplayData",
    "ReplayPage",
    "RespondToAsk",
    "RespondToAskData",
    "ResumeTask",
    "RewindTask",
    "RewindTaskData",
    "SendMessage",
    "SendMessageData",
    "StartNewTask",
    "StartNewTaskData",
    "SwitchMode",
    "SwitchModeData",
    "TaskConfiguration",
    "TaskList",
    "TaskPage",
    "TaskRef",
    "TaskSnapshot",
    "UpdateTodoList",
    "UpdateTodoListData",
]

#: The most messages one GetTaskPage returns.
MAX_TASK_PAGE = 1000

#: The largest prompt (a task's first message, a message sent to it), in UTF-8
#: bytes: more is refused, naming this limit and the model's context size.
MAX_PROMPT_BYTES = 1 << 20


# ---- payloads ---------------------------------------------------------------

#: A message's `context`, as StartNewTask and SendMessage carry it.
_MessageContext = Annotated[
    PromptContext | None,
    Meta(
        description=(
            "hdsp: what the message is about (the active notebook, cell, selection, an "
            "outline), shown to the model as untrusted data and kept on the message."
        )
    ),
]

#: How StartNewTask and SendMessage describe `mcpServers`, but for what absence means.
_OFFERED_MCP_SERVERS = (
    "hdsp: MCP servers this client offers the task (an ACP host's; at most 16), "
    "beside the configured ones; they replace the ones offered before."
)


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
    mode: Annotated[
        str | None,
        Meta(description="The task's mode (GetModes lists them); `code` when absent."),
    ] = None
    custom_instructions: Annotated[
        str | None,
        Meta(
            description=(
                "Roo's customInstructions: instructions for this task, in its system prompt "
                "after the global ones (GetSystemPrompt shows where)."
            )
        ),
    ] = None
    kernel_id: Annotated[
        str | None,
        Meta(
            description=(
                "A kernel (ListKernels) the task's code runs in; by default the task starts its"
                " own on first use, in its workspace."
            )
        ),
    ] = None
    kernel_provider: Annotated[
        Literal["local", "gateway"] | None,
        Meta(
            description=(
                "hdsp: where the task's kernels run: local (this machine, in hdspd's sandbox) "
                "or gateway (the Jupyter server of the profile's or the settings' "
                "kernels.gateway). None: as the profile's or the settings' kernels.provider "
                "says."
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
    agent: Annotated[
        str | None,
        Meta(
            description=(
                "hdsp: the agent the task runs (ListAgents; seed 002): its instructions and "
                "tools, and it may call other agents. None: a task of its mode, as before."
            )
        ),
    ] = None


class StartNewTaskData(WireStruct, frozen=True):
    text: str
    configuration: TaskConfiguration = TaskConfiguration()
    images: list[str] | None = None
    new_tab: bool | None = None
    context: _MessageContext = None
    mcp_servers: Annotated[
        list[OfferedMcpServer] | None,
        Meta(description=f"{_OFFERED_MCP_SERVERS} Absent: none."),
    ] = None


class SendMessageData(WireStruct, frozen=True):
    text: str | None = None
    images: list[str] | None = None
    delivery: Annotated[
        Literal["queue", "steer"],
        Meta(
            description=(
                "To a task that is working: `queue` waits until its turn ends (then starts "
                "the next turn); `steer` joins the running turn, added to the conversation "
                "before its next model request (a `user_feedback` message shows where). A "
                "steered message the turn ends without is delivered as a queued one."
            )
        ),
    ] = "queue"
    context: _MessageContext = None
    mcp_servers: Annotated[
        list[OfferedMcpServer] | None,
        Meta(description=f"{_OFFERED_MCP_SERVERS} Absent: the task keeps those it has."),
    ] = None


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
    id_prefix: Annotated[
        Annotated[str, Meta(min_length=1, max_length=64)] | None,
        Meta(
            description="Only the tasks whose id starts with this (how a person's short "
            "id is resolved), newest first; one page, without `cursor`."
        ),
    ] = None


class GetTaskData(WireStruct, frozen=True):
    task_id: Annotated[str, Meta(description="The task's id (`HistoryItem.id`).")]


class GetTaskPageData(WireStruct, frozen=True):
    task_id: Annotated[str, Meta(description="The task's id.")]
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
    context: Annotated[
        PromptContext | None,
        Meta(
            description=(
                "hdsp: what an answer with text is about (as SendMessage's `context`), "
                "shown to the model as untrusted data and kept on the user's message."
            )
        ),
    ] = None


class ReplayData(WireStruct, frozen=True):
    since_seq: Annotated[
        int,
        Meta(
            ge=0,
            description=(
                "Exclusive cursor: the page holds events with `seq` greater than this. 0 for "
                "the first event; the `seq` of the last event seen, or the `headSeq` of an Ack "
                "or a snapshot, to continue from there. A cursor before the oldest kept (0 "
                "too, once the log was pruned: at each start of hdspd and every 10 min, "
                "to its retention) gets cursor_expired, whose message says what was kept."
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


class StartNewTask(CommandBase["TaskRef"], tag="StartNewTask", frozen=True):
    data: StartNewTaskData


class CancelTask(CommandBase["TaskRef"], tag="CancelTask", frozen=True):
    task_id: str


class CloseTask(CommandBase["TaskRef"], tag="CloseTask", frozen=True):
    task_id: str


class RewindTaskData(WireStruct, frozen=True):
    task_id: str
    ts: Annotated[int, Meta(description="The UI message to rewind to.")]
    include: Annotated[
        bool,
        Meta(
            description=(
                "Remove that message too (true), or keep it and remove what came after. "
                "The task's first message always stays."
            )
        ),
    ] = True


class RewindTask(CommandBase["TaskRef"], tag="RewindTask", frozen=True):
    """Take a task's history back to one of its messages: the UI and API messages
    after it are removed (a running turn is cancelled first; kernel state is not
    rolled back), and what a removed summary or truncation hid comes back. A
    `taskRewound` event tells every client."""

    data: RewindTaskData


class EditMessageData(WireStruct, frozen=True):
    task_id: str
    ts: Annotated[int, Meta(description="A user_feedback message of the task.")]
    text: str
    images: list[str] | None = None
    context: Annotated[
        PromptContext | None,
        Meta(
            description=(
                "hdsp: what the new message is about (as SendMessage's `context`); "
                "the edited message's own context is not carried over."
            )
        ),
    ] = None


class EditMessage(CommandBase["TaskRef"], tag="EditMessage", frozen=True):
    """Replace one of the user's messages and go on from there: rewind to it
    (removing it) and send `text` as the next message."""

    data: EditMessageData


class DeleteMessageData(WireStruct, frozen=True):
    task_id: str
    ts: Annotated[
        int,
        Meta(
            description="A message of the task: a user_feedback message, the model's "
            "text, or any message of a tool call (one with a toolUseId)."
        ),
    ]


class DeleteMessage(CommandBase["TaskRef"], tag="DeleteMessage", frozen=True):
    """Delete one message (not the task's first): it goes from the history and from
    what later requests send. One of the user's messages goes alone (the model's
    answers stay, and so do tool results sent with it); the text of one of the
    model's replies goes alone (the reply's tool calls stay); a tool call goes with
    its result and every message of it. A summary that condensed it goes too, and
    what the summary hid comes back. A running turn is cancelled first. A
    `taskMessagesDeleted` event (with every ts that went) tells every client."""

    data: DeleteMessageData


class ForkTaskData(WireStruct, frozen=True):
    task_id: str
    ts: Annotated[int, Meta(description="The last UI message the new task keeps.")]


class ForkTask(CommandBase["TaskRef"], tag="ForkTask", frozen=True):
    """A new task with the history of this one up to a message (inclusive); the
    original is not changed. The reply names the new task, which waits for a message."""

    data: ForkTaskData


class CondenseTask(CommandBase["TaskRef"], tag="CondenseTask", frozen=True):
    """Condense a task's conversation now: the model summarises its older part,
    which the summary replaces in later requests (kept in the history). The task
    must not be working; a `condense_context` message (or
    `condense_context_error`) says how it went."""

    task_id: str


class ResumeTask(CommandBase["TaskRef"], tag="ResumeTask", frozen=True):
    data: Annotated[str, Meta(description="The task id, as in Roo.")]


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


class SwitchModeData(WireStruct, frozen=True):
    mode: Annotated[str, Meta(description="The slug of the mode (GetModes lists them).")]


class SwitchMode(CommandBase["TaskRef"], tag="SwitchMode", frozen=True):
    """Put a task in another mode: its next request offers that mode's tools and
    prompt; every client gets `taskModeSwitched`."""

    task_id: str
    data: SwitchModeData


class UpdateTodoListData(WireStruct, frozen=True):
    markdown: Annotated[
        str | None,
        Meta(
            description=(
                "The whole list as a markdown checklist: `- [ ] pending`, `- [-] in progress`, "
                "`- [x] done`, one item a line."
            )
        ),
    ] = None
    todos: Annotated[
        list[TodoItem] | None, Meta(description="The whole list as items (instead of markdown).")
    ] = None


class UpdateTodoList(CommandBase["TaskRef"], tag="UpdateTodoList", frozen=True):
    """A person replaces a task's todo list: every client gets
    `taskTodoListUpdated`, and the model is told of the edit before its next request."""

    task_id: str
    data: UpdateTodoListData


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


class TaskPage(WireStruct, frozen=True):
    messages: Annotated[
        list[ClineMessage],
        Meta(
            description="The page's messages, oldest first (a message still streaming as it is now)."
        ),
    ]
    start: Annotated[
        int, Meta(description="Index of the first of `messages` in the task's whole history.")
    ]
    total: Annotated[int, Meta(description="How many messages the task's history holds.")]
    head_seq: Annotated[
        int, Meta(description="The newest `seq` this page includes; replay from here to continue.")
    ]
    next_cursor: Annotated[
        str | None, Meta(description="Pass as `cursor` for the next page; absent on the last page.")
    ] = None


class ReplayPage(WireStruct, frozen=True):
    events: Annotated[list[TaskEvent], Meta(description="Durable events, oldest first.")]
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
