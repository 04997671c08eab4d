"""Tool calls relayed from another agent (issue 23: hdsp as an MCP server).

A client that serves another agent (`hdsp mcp serve` serves an MCP host such as
Claude Code) acts through a task of its own, made with `CreateTask`: a task that
runs no model turn and waits. `CallTool` runs one of hdsp's own tools in that
task on the other agent's behalf, on the same path as a tool call of hdsp's own
model: its arguments checked against the tool's JSON Schema and the task's mode,
the approval policy deciding (an ask that any client answers, or the daemon's
auto-approval settings), a checkpoint before a change, the call and its output
shown to every client as messages of the task, and the result recorded there.
Nothing the relayed agent sends can change what is approved: the command has no
approval settings, and the task's are the daemon's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from msgspec import Meta

from ._base import CommandBase, WireStruct

if TYPE_CHECKING:
    from .tasks import TaskRef  # noqa: F401  (the base below names it)

__all__ = [
    "CallTool",
    "CallToolData",
    "CreateTask",
    "CreateTaskData",
    "RelayedImage",
    "ToolCallResult",
]


class CreateTaskData(WireStruct, frozen=True):
    title: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=200,
            description="What the task is (its first message): who acts through it.",
        ),
    ]
    workspace: Annotated[
        str | None,
        Meta(description="Directory the task works in (absolute); as for StartNewTask."),
    ] = None
    mode: Annotated[
        str | None, Meta(description="The task's mode (GetModes lists them); `code` when absent.")
    ] = None
    allow_broad_workspace: Annotated[
        bool,
        Meta(description="As in StartNewTask's configuration."),
    ] = False


class CreateTask(CommandBase["TaskRef"], tag="CreateTask", frozen=True):
    """A task that starts no model turn: it waits, in state idle, for `CallTool`
    (or a message). The reply names it."""

    data: CreateTaskData


class CallToolData(WireStruct, frozen=True):
    tool: Annotated[
        str,
        Meta(
            description=(
                "One of hdsp's own tools that reads, writes or runs code or commands "
                "(read_notebook, edit_cell, execute_code, list_variables, ...); the tools that "
                "steer a task (attempt_completion, ask_followup_question, switch_mode, "
                "update_todo_list) are refused."
            )
        ),
    ]
    arguments: Annotated[
        dict[str, Any],
        Meta(description="The tool's arguments, checked against its JSON Schema."),
    ] = {}
    kernel_id: Annotated[
        str | None,
        Meta(
            description=(
                "Run the task's code in this kernel (ListKernels) from now on, as a message's "
                "context can; by default the task starts its own kernel on first use."
            )
        ),
    ] = None


class CallTool(CommandBase["ToolCallResult"], tag="CallTool", frozen=True):
    """Run one tool in a task that is not working, as if its model had called it,
    and answer with the result once the call is done: after an approval ask was
    answered (by any client) if the policy asks. `CancelTask` stops it (a running
    kernel is interrupted). Runs concurrently with other commands (an answer to its
    ask comes as a RespondToAsk ordered by the same task)."""

    task_id: str
    data: CallToolData


class RelayedImage(WireStruct, frozen=True):
    media_type: str
    data: Annotated[str, Meta(description="The image, base64 (no data: prefix).")]


class ToolCallResult(WireStruct, frozen=True):
    task_id: str
    tool: str
    status: Annotated[
        Literal["done", "denied", "cancelled"],
        Meta(
            description=(
                "done: the call is over, its result may be an error (the tool failed, or the "
                "call was invalid and did not run: arguments, mode, repetition); denied: a "
                "person (or the policy, or an approval's timeout) said no; cancelled: "
                "CancelTask stopped it."
            )
        ),
    ]
    is_error: bool = False
    text: Annotated[
        str,
        Meta(
            description=(
                "The result as the model would read it. Produced by the tool, a kernel or a "
                "file: untrusted text."
            )
        ),
    ] = ""
    images: list[RelayedImage] = []
