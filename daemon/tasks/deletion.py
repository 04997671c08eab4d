"""Deleting one message from a task's history, as a pure plan over its UI and API
messages: what goes, and what the API history becomes.

Three kinds of message can be deleted (never the task's first):

- one of the user's messages: it goes from both histories, the model's answers
  to it stay (as after a rewind, kernel state is not rolled back). In the API
  history only the user's own words and images go: tool results sent in the
  same message answer the model's tool calls, not the message, so they stay and
  every tool call keeps its result;
- one of the model's tool calls (any message of it: its ask, its output, its
  result): the call goes with the result that depends on it, from the model's
  reply and from the message that carried the result, and so do all the UI
  messages of the call;
- the text of one of the model's replies: the text goes from the reply, the
  reply's tool calls stay.

An API message left with nothing goes. Consecutive messages of one role are
valid for both providers (the Anthropic adapter joins them into one turn).

A message that a summary condensed takes the summary with it (the summary
would still tell the model what was deleted): the summary message and its
`condense_context` record go, and what the summary hid comes back (seed 000's
orphan cleanup); the next request condenses again if it must. A message that a
truncation hid just goes (the truncation still hides the others).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from hdsp.daemon.conversation import ApiMessage, Block, TextBlock, ToolResultBlock, ToolUseBlock
from hdsp.protocol import ClineMessage, Say

from .rewind import RewindRefused

__all__ = ["DeletePlan", "plan_delete"]


@dataclass(frozen=True)
class DeletePlan:
    #: The ts of the UI messages that go (the message, the other messages of a
    #: deleted tool call, a removed summary's record).
    ui_removed: list[int]
    #: API messages from this index on are replaced by `api_tail`.
    api_from: int
    api_tail: list[ApiMessage]
    #: The tool calls deleted (their ids).
    tool_calls: list[str]


def _condense_id(message: ClineMessage) -> str | None:
    if message.say != Say.CONDENSE_CONTEXT or not message.context_condense:
        return None
    value = message.context_condense.get("condenseId")
    return value if isinstance(value, str) else None


def plan_delete(ui: list[ClineMessage], api: list[ApiMessage], ts: int) -> DeletePlan:
    """The plan that deletes the message `ts`. Raises RewindRefused if there is
    no such message, it is the task's first, or it is of a kind that cannot be
    deleted (a condense record, an error of the task, ...)."""
    index = next((i for i, m in enumerate(ui) if m.ts == ts), None)
    if index is None:
        raise RewindRefused(f"The task has no message {ts}.")
    if index == 0:
        raise RewindRefused(
            "The task's first message cannot be deleted: start a new task, or fork this one."
        )
    message = ui[index]
    changed: dict[int, ApiMessage | None]
    calls: list[str] = []
    if message.say == Say.USER_FEEDBACK:
        removed_ui = [ts]
        changed = _users_message(ui, api, index)
    elif message.tool_use_id is not None:
        call = message.tool_use_id
        calls.append(call)
        start, end = _request_window(ui, index)
        removed_ui = [m.ts for m in ui if m.tool_use_id == call and start <= m.ts < end]
        changed = _tool_call(api, call, start, end)
    elif message.say == Say.TEXT and message.type == "say":
        removed_ui = [ts]
        changed = _reply_text(ui, api, index)
    else:
        raise RewindRefused(
            f"Message {ts} cannot be deleted: only your messages, the model's replies and "
            "its tool calls can be (to take back everything from a point on, rewind)."
        )
    messages: list[ApiMessage | None] = list(api)
    summaries = set()
    for j, new in changed.items():
        if api[j].condense_parent is not None:
            summaries.add(api[j].condense_parent)
        messages[j] = new
    for summary_id in summaries:
        # The summary would keep what was deleted: it goes, what it hid comes back.
        for j, m in enumerate(messages):
            if m is None:
                continue
            if m.is_summary and m.condense_id == summary_id:
                messages[j] = None
            elif m.condense_parent == summary_id:
                messages[j] = msgspec.structs.replace(m, condense_parent=None)
        removed_ui += [m.ts for m in ui if _condense_id(m) == summary_id]
    kept = [m for m in messages if m is not None]
    api_from = next(
        (j for j, (old, new) in enumerate(zip(api, kept, strict=False)) if old != new),
        min(len(api), len(kept)),
    )
    return DeletePlan(sorted(set(removed_ui)), api_from, kept[api_from:], calls)


def _without(message: ApiMessage, keep: list[Block]) -> ApiMessage | None:
    """`message` with only the blocks `keep`, or None when none is left."""
    return msgspec.structs.replace(message, content=keep) if keep else None


def _users_message(
    ui: list[ClineMessage], api: list[ApiMessage], index: int
) -> dict[int, ApiMessage | None]:
    # The user's message is said, then sent: its API message is the first user
    # message made after it and before the next UI message (one clock for both).
    ts = ui[index].ts
    until = ui[index + 1].ts if index + 1 < len(ui) else None
    sent = next(
        (
            j
            for j, m in enumerate(api)
            if m.role == "user" and m.ts > ts and (until is None or m.ts < until)
        ),
        None,
    )
    if sent is None:
        return {}
    results: list[Block] = [b for b in api[sent].content if isinstance(b, ToolResultBlock)]
    return {sent: _without(api[sent], results)}


def _request_window(ui: list[ClineMessage], index: int) -> tuple[int, int]:
    """The ts from the model request that made the call shown at `index` (its
    `api_req_started`) to the next request: a call's messages, its reply and its
    result all lie between. A server may give calls of different replies the
    same id; the window tells them apart."""
    start = next(
        (m.ts for m in reversed(ui[: index + 1]) if m.say == Say.API_REQ_STARTED),
        ui[0].ts,
    )
    end = next(
        (m.ts for m in ui[index + 1 :] if m.say == Say.API_REQ_STARTED),
        1 << 63,
    )
    return start, end


def _tool_call(
    api: list[ApiMessage], call: str, start: int, end: int
) -> dict[int, ApiMessage | None]:
    """The call `call` out of the reply that made it (the first one in the window
    from `start` to `end` that has it), its result out of the message after it
    that carried it."""
    made = next(
        (
            j
            for j, m in enumerate(api)
            if m.role == "assistant"
            and start < m.ts < end
            and any(isinstance(b, ToolUseBlock) and b.id == call for b in m.content)
        ),
        None,
    )
    if made is None:
        return {}
    kept = [b for b in api[made].content if not (isinstance(b, ToolUseBlock) and b.id == call)]
    changed = {made: _without(api[made], kept)}
    answered = next(
        (
            j
            for j in range(made + 1, len(api))
            if api[j].role == "user"
            and any(
                isinstance(b, ToolResultBlock) and b.tool_use_id == call for b in api[j].content
            )
        ),
        None,
    )
    if answered is not None:
        content = api[answered].content
        left = [
            b for b in content if not (isinstance(b, ToolResultBlock) and b.tool_use_id == call)
        ]
        changed[answered] = _without(api[answered], left)
    return changed


def _reply_text(
    ui: list[ClineMessage], api: list[ApiMessage], index: int
) -> dict[int, ApiMessage | None]:
    """The text out of the reply that the UI message `index` showed: a reply is
    stored when its stream ends, so it is the first assistant message made after
    the text began and before the next text (the model's or the user's). A text
    that never reached the history (its stream was stopped) has nothing there."""
    shown = ui[index]
    until = next((m.ts for m in ui[index + 1 :] if m.say in (Say.TEXT, Say.USER_FEEDBACK)), None)
    reply = next(
        (
            j
            for j, m in enumerate(api)
            if m.role == "assistant" and m.ts > shown.ts and (until is None or m.ts < until)
        ),
        None,
    )
    if reply is None:
        return {}
    content = api[reply].content
    kept = [b for b in content if not (isinstance(b, TextBlock) and b.text == shown.text)]
    return {reply: _without(api[reply], kept)} if len(kept) != len(content) else {}
