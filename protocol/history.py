"""Roo-Code's task records: the UI message (`ClineMessage`), `HistoryItem`,
`TokenUsage` and `ToolUsage`, with hdsp's additive fields.

`ask` and `say` are plain strings on the wire so that a client keeps decoding
messages of kinds added after it was built; `Ask` and `Say` name the known ones.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from ._base import WireStruct
from .modes import TodoItem
from .prompt_context import PromptContext

__all__ = [
    "Ask",
    "AskResponse",
    "ClineMessage",
    "HistoryItem",
    "ProgressStatus",
    "Say",
    "TaskState",
    "TokenUsage",
    "ToolResultText",
    "ToolUsage",
    "ToolUsageEntry",
]


class Ask(enum.StrEnum):
    FOLLOWUP = "followup"
    COMMAND = "command"
    COMMAND_OUTPUT = "command_output"
    COMPLETION_RESULT = "completion_result"
    TOOL = "tool"
    API_REQ_FAILED = "api_req_failed"
    RESUME_TASK = "resume_task"
    RESUME_COMPLETED_TASK = "resume_completed_task"
    MISTAKE_LIMIT_REACHED = "mistake_limit_reached"
    USE_MCP_SERVER = "use_mcp_server"
    AUTO_APPROVAL_MAX_REQ_REACHED = "auto_approval_max_req_reached"


class AskResponse(enum.StrEnum):
    """How a person answered an ask: Roo's ClineAskResponse, the values of
    `RespondToAskData.response` on the wire."""

    YES = "yesButtonClicked"
    NO = "noButtonClicked"
    #: An answer in words (text, images), or a message sent while an ask waited.
    MESSAGE = "messageResponse"
    OBJECT = "objectResponse"


class Say(enum.StrEnum):
    ERROR = "error"
    API_REQ_STARTED = "api_req_started"
    API_REQ_FINISHED = "api_req_finished"
    API_REQ_RETRIED = "api_req_retried"
    API_REQ_RETRY_DELAYED = "api_req_retry_delayed"
    API_REQ_RATE_LIMIT_WAIT = "api_req_rate_limit_wait"
    API_REQ_DELETED = "api_req_deleted"
    TEXT = "text"
    IMAGE = "image"
    REASONING = "reasoning"
    COMPLETION_RESULT = "completion_result"
    USER_FEEDBACK = "user_feedback"
    USER_FEEDBACK_DIFF = "user_feedback_diff"
    COMMAND_OUTPUT = "command_output"
    MCP_SERVER_REQUEST_STARTED = "mcp_server_request_started"
    MCP_SERVER_RESPONSE = "mcp_server_response"
    SUBTASK_RESULT = "subtask_result"
    CHECKPOINT_SAVED = "checkpoint_saved"
    DIFF_ERROR = "diff_error"
    CONDENSE_CONTEXT = "condense_context"
    CONDENSE_CONTEXT_ERROR = "condense_context_error"
    SLIDING_WINDOW_TRUNCATION = "sliding_window_truncation"
    TOOL = "tool"
    # hdsp additions
    #: Code a tool runs in a kernel and its outputs; the text is a `CellOutput`.
    CELL_OUTPUT = "cell_output"
    #: The task's kernel was shut down after being idle; the text says why.
    KERNEL_CULLED = "kernel_culled"
    #: The model server has not begun its reply yet: partial while the task waits,
    #: its text (for people) saying for how long, updated every few seconds;
    #: final once the reply begins or the request ends.
    API_REQ_WAITING = "api_req_waiting"
    #: What a tool call gave back (final, once per call that ran); the text is a
    #: `ToolResultText`.
    TOOL_RESULT = "tool_result"
    #: A checkpoint was restored (issue 20); the text says what came back, the
    #: `checkpoint` field holds the checkpoint's number and what was restored.
    CHECKPOINT_RESTORED = "checkpoint_restored"
    #: The notebook's kernel the task used (one hdsp attached to, running outside
    #: it) was restarted where it runs, or died or went away (then hdsp detached
    #: from it, never restarting it). The text says what happened and where the
    #: task's code runs next.
    NOTEBOOK_KERNEL = "notebook_kernel"


class ToolResultText(WireStruct, frozen=True):
    """The text (JSON) of a `tool_result` say message: what a tool call gave back,
    as people see it. Its `toolUseId` names the call. A tool that showed its
    output in messages of its own (`command_output`, `cell_output`) gives here
    only what else its result said (an exit code, a kernel's status)."""

    tool: str
    text: Annotated[
        str,
        Meta(description="The result's text (untrusted: a tool, a file or a kernel wrote it)."),
    ]
    is_error: bool = False
    images: Annotated[int, Meta(description="Images the result gave the model.")] = 0
    omitted: Annotated[
        int, Meta(description="Characters of the result's text left out of `text` (its middle).")
    ] = 0
    output_shown: Annotated[
        bool,
        Meta(
            description="The tool's output is in messages of its own; `text` is the rest "
            "of its result."
        ),
    ] = False


class TaskState(enum.StrEnum):
    """Where a task is; Roo's classification plus hdsp's terminal states."""

    #: The agent is working (a model request, a tool).
    RUNNING = "running"
    #: An ask waits for an answer before the agent can go on.
    INTERACTIVE = "interactive"
    #: The agent has nothing to do until a user speaks.
    IDLE = "idle"
    #: The task stopped (daemon restart, cancel) and can be resumed.
    RESUMABLE = "resumable"
    #: The task waits for a subtask.
    PAUSED = "paused"
    #: The agent finished; a new message continues the conversation.
    COMPLETED = "completed"
    #: The task was cancelled; a new message or `ResumeTask` continues it.
    ABORTED = "aborted"


class ProgressStatus(WireStruct, frozen=True):
    icon: str | None = None
    text: str | None = None


class ClineMessage(WireStruct, frozen=True):
    """One UI message. `ts` (milliseconds) is its id within its task."""

    ts: Annotated[
        int,
        Meta(
            description=(
                "Milliseconds since the epoch, unique within the task: the message's id. An "
                "`updated` message event carries the ts of the message it replaces."
            )
        ),
    ]
    type: Literal["ask", "say"]
    ask: str | None = None
    say: str | None = None
    text: str | None = None
    images: list[str] | None = None
    partial: bool | None = None
    reasoning: str | None = None
    conversation_history_index: int | None = None
    checkpoint: dict[str, Any] | None = None
    progress_status: ProgressStatus | None = None
    context_condense: dict[str, Any] | None = None
    context_truncation: dict[str, Any] | None = None
    is_protected: bool | None = None
    api_protocol: Literal["openai", "anthropic"] | None = None
    is_answered: bool | None = None
    # hdsp additions
    tool_use_id: Annotated[
        str | None,
        Meta(description="The tool call this message belongs to (its ask, its streamed output)."),
    ] = None
    cwd: Annotated[
        str | None,
        Meta(description="A `command` ask: the directory the command would run in (absolute)."),
    ] = None
    answer: Annotated[
        str | None,
        Meta(
            description="An answered ask: how it was answered (Roo's askResponse: "
            "yesButtonClicked, noButtonClicked, messageResponse, objectResponse)."
        ),
    ] = None
    answered_by: Annotated[
        str | None,
        Meta(
            description='An answered ask: who answered (the client\'s name, or "timeout" '
            'when the approval policy answered for nobody, "resume" when resuming did).'
        ),
    ] = None
    context: Annotated[
        PromptContext | None,
        Meta(
            description="A user's message (text, user_feedback): the context it was sent with "
            "(the notebook, cell, selection, outline the user kept)."
        ),
    ] = None
    sent_by: Annotated[
        str | None,
        Meta(
            description="A user's message (text, user_feedback) sent over TCP to a team "
            "daemon: the name its sender's CURVE key is authorised under. Absent for "
            "messages sent on the daemon's own machine."
        ),
    ] = None
    stop_reason: Annotated[
        str | None,
        Meta(
            description="A model's reply (text): why it ended, when it did not end by itself: "
            '"max_tokens" (cut at the output limit), "refusal" (the model refused), '
            '"content_filter" (the provider filtered it).'
        ),
    ] = None


class TokenUsage(WireStruct, frozen=True):
    total_tokens_in: int
    total_tokens_out: int
    total_cost: float
    context_tokens: int
    total_cache_writes: int | None = None
    total_cache_reads: int | None = None


class ToolUsageEntry(WireStruct, frozen=True):
    attempts: int
    failures: int


#: Per tool name: how often the agent tried it and how often it failed.
ToolUsage = dict[str, ToolUsageEntry]


class HistoryItem(WireStruct, frozen=True):
    """One row per task: Roo's HistoryItem, plus hdsp's `state`."""

    id: Annotated[str, Meta(description="The task's id (a UUID).")]
    number: Annotated[int, Meta(description="1 for the daemon's first task, then counting up.")]
    ts: Annotated[int, Meta(description="When the task was created, ms since the epoch.")]
    task: Annotated[str, Meta(description="The task's first message (its title).")]
    # Roo's schema requires these three: always on the wire, 0 included (a
    # factory-made default is never left out by `omit_defaults`).
    tokens_in: Annotated[
        int,
        Meta(
            description="Input tokens the task's model requests used.",
            extra_json_schema={"default": 0},
        ),
    ] = msgspec.field(default_factory=lambda: 0)
    tokens_out: Annotated[
        int,
        Meta(description="Output tokens the model generated.", extra_json_schema={"default": 0}),
    ] = msgspec.field(default_factory=lambda: 0)
    total_cost: Annotated[
        float, Meta(description="Estimated cost in USD.", extra_json_schema={"default": 0.0})
    ] = msgspec.field(default_factory=lambda: 0.0)
    root_task_id: str | None = None
    parent_task_id: str | None = None
    cache_writes: int | None = None
    cache_reads: int | None = None
    size: int | None = None
    workspace: str | None = None
    mode: str | None = None
    api_config_name: str | None = None
    status: Literal["active", "completed", "delegated"] | None = None
    delegated_to_id: str | None = None
    child_ids: list[str] | None = None
    awaiting_child_id: str | None = None
    completed_by_child_id: str | None = None
    completion_result_summary: str | None = None
    # hdsp additions
    state: TaskState | None = None
    todos: Annotated[
        list[TodoItem] | None,
        Meta(description="hdsp: the task's todo list (update_todo_list, UpdateTodoList)."),
    ] = None
    custom_instructions: Annotated[
        str | None,
        Meta(description="The task's own custom instructions (its configuration's)."),
    ] = None
    agent: Annotated[
        str | None,
        Meta(
            description="hdsp: the agent the task runs (seed 002); None: no agent, its mode's role."
        ),
    ] = None
    parent_call_id: Annotated[
        str | None,
        Meta(
            description=(
                "hdsp: the parent's call_agent tool call that started this child task (its "
                "tool_use id), with `parentTaskId`."
            )
        ),
    ] = None
    result: Annotated[
        str | None,
        Meta(
            description=(
                "hdsp: what the task returned to its caller when it finished (its finish "
                "message, or its last reply's text)."
            )
        ),
    ] = None
    mode_groups: Annotated[
        list[str] | None,
        Meta(
            description=(
                "hdsp: the tool groups the task's mode had when the task entered it (started "
                "in it, or switched to it), with `modeFileRegex`: the most a workspace mode "
                "gives the task later, whatever its file then says. None: not recorded."
            )
        ),
    ] = None
    mode_file_regex: Annotated[
        str | None,
        Meta(
            description=(
                "hdsp: the file restriction of the mode's edits when the task entered it "
                "(with `modeGroups`); None: none."
            )
        ),
    ] = None
    kernel_provider: Annotated[
        Literal["local", "gateway"] | None,
        Meta(
            description=(
                "hdsp: where the task's kernels run, as its configuration chose (None: as "
                "its profile's or the settings' kernels.provider says)."
            )
        ),
    ] = None
