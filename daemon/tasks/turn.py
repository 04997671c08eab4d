"""What a turn writes to the store: where an unfinished turn stands
(:class:`TurnState` with its :class:`CallState` s), the API messages it appends
(the user's message, the tool results that close its tool phase), and the writes
that carry them, with text the store cannot encode made encodable first.

Pure shapes and functions: no I/O, no task.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec

from hdsp.daemon.conversation import ApiMessage, Block, ImageBlock, TextBlock, ToolResultBlock
from hdsp.daemon.llm.images import fit_image, image_block
from hdsp.daemon.store import Write, append_api_message, save_turn
from hdsp.daemon.tools import ToolResult
from hdsp.protocol import PromptContext, encodable, encodable_text, encode

from .notebook_context import context_block

__all__ = [
    "CallState",
    "TurnState",
    "api_write",
    "encodable_result",
    "tool_results",
    "turn_decoder",
    "turn_write",
    "user_content",
]


class CallState(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One tool call of the open turn: pending -> asking -> approved -> running -> done."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str = ""
    #: Names this call for good, where `id` (the model's) may repeat across
    #: replies: an agent call's child task carries it (seed 002).
    key: str = msgspec.field(default_factory=lambda: uuid.uuid4().hex)
    status: Literal["pending", "asking", "approved", "running", "done"] = "pending"
    #: The approval ask, while one waits.
    ask_ts: int | None = None
    #: When a waiting approval gives up (ms since the epoch; from the ask's ts, so
    #: a restart does not restart the clock), and whether it then approves.
    ask_deadline: int | None = None
    approve_on_timeout: bool = False
    #: The approval was the request cap's (auto_approval_max_req_reached).
    cap_reached: bool = False
    result: list[TextBlock | ImageBlock] | None = None
    is_error: bool = False
    completes_task: bool = False


class TurnState(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where an unfinished turn stands, saved at every step, so that a daemon that
    stopped or crashed resumes the turn instead of starting it over: a model
    request in flight is made again, approved tool calls run, a tool that was
    running is reported as interrupted, and a waiting ask keeps waiting."""

    phase: Literal["request", "tools"] = "request"
    #: An api_req_failed ask the request waits on.
    ask_ts: int | None = None
    #: A resume_task ask the turn waits on before it goes on (after a restart).
    resume_ask_ts: int | None = None
    calls: list[CallState] = []


_encoder = msgspec.json.Encoder()
turn_decoder = msgspec.json.Decoder(TurnState)


def turn_write(task_id: str, turn: TurnState | None) -> Write:
    """The write that records `turn` as the task's open turn (None: none is open)."""
    return save_turn(task_id, None if turn is None else encode(turn))


def api_write(task_id: str, index: int, message: ApiMessage) -> tuple[ApiMessage, Write]:
    """The write of API message `index`, and the message as written: with lone
    surrogates spelled `\\xNN` if it had any (`hdsp.protocol.file_names`:
    untrusted text must not end the daemon)."""
    try:
        body = _encoder.encode(message)
    except UnicodeEncodeError:
        clean = encodable(msgspec.to_builtins(message))
        message = msgspec.convert(clean, type(message))
        body = _encoder.encode(message)
    return message, append_api_message(task_id, index, body)


def encodable_result(result: ToolResult) -> ToolResult:
    """`result`, with lone surrogates in its text spelled `\\xNN`: a tool result
    is untrusted text, and one the store cannot encode must not end the daemon."""
    for block in result.content:
        if isinstance(block, TextBlock):
            try:
                block.text.encode("utf-8")
            except UnicodeEncodeError:
                break
    else:
        return result
    content = [
        TextBlock(text=encodable_text(b.text)) if isinstance(b, TextBlock) else b
        for b in result.content
    ]
    return ToolResult(
        content,
        is_error=result.is_error,
        completes_task=result.completes_task,
        summary=None if result.summary is None else encodable_text(result.summary),
    )


def user_content(
    text: str | None, images: list[str] | None, context: PromptContext | None = None
) -> list[Block]:
    """API content of a user message: images (data URLs or bare base64), its
    context (notebook, cell, ...) as a delimited block of data, then text."""
    content: list[Block] = [fit_image(image_block(image)) for image in images or []]
    if context is not None:
        content.append(TextBlock(text=context_block(context)))
    if text:
        content.append(TextBlock(text=text))
    return content


def tool_results(calls: list[CallState], reason: str) -> list[Block]:
    """The user message content that answers every call of a turn (each tool_use
    needs its tool_result): a finished call's result, else `reason` as an error."""
    results: list[Block] = []
    for call in calls:
        if call.status == "done" and call.result is not None:
            content, is_error = call.result, call.is_error
        else:
            content, is_error = [TextBlock(text=reason)], True
        results.append(ToolResultBlock(tool_use_id=call.id, content=content, is_error=is_error))
    return results
