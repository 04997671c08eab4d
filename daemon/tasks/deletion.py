"""Deleting one of the user's messages from a task's history, as a pure plan over
its UI and API messages: what goes, and what the API history becomes.

The user's message goes from both histories; the model's answers to it stay (as
after a rewind, kernel state is not rolled back). In the API history only the
user's own words and images go: tool results sent in the same message answer the
model's tool calls, not the message, so they stay and every tool call keeps its
result. A message that a summary condensed takes the summary with it (the
summary would still tell the model what was deleted): the summary message and
its `condense_context` record go, and what the summary hid comes back (seed 000's
orphan cleanup); the next request condenses again if it must. A message that a
truncation hid just goes (the truncation still hides the others).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from hdsp.daemon.conversation import ApiMessage, ToolResultBlock
from hdsp.protocol import ClineMessage, Say

from .rewind import RewindRefused

__all__ = ["DeletePlan", "plan_delete"]


@dataclass(frozen=True)
class DeletePlan:
    #: The ts of the UI messages that go (the user's message, a removed summary's record).
    ui_removed: list[int]
    #: API messages from this index on are replaced by `api_tail`.
    api_from: int
    api_tail: list[ApiMessage]


def _condense_id(message: ClineMessage) -> str | None:
    if message.say != Say.CONDENSE_CONTEXT or not message.context_condense:
        return None
    value = message.context_condense.get("condenseId")
    return value if isinstance(value, str) else None


def plan_delete(ui: list[ClineMessage], api: list[ApiMessage], ts: int) -> DeletePlan:
    """The plan that deletes the user's message `ts`. Raises RewindRefused if
    there is no such message of the user's, or it is the task's first."""
    index = next((i for i, m in enumerate(ui) if m.ts == ts), None)
    if index is None or ui[index].say != Say.USER_FEEDBACK:
        raise RewindRefused(
            f"The task has no message {ts} of yours to delete (only your own messages "
            "can be; to remove the model's, rewind)."
        )
    # The user's message is said, then sent: its API message is the first user
    # message made after it and before the next UI message (one clock for both).
    until = ui[index + 1].ts if index + 1 < len(ui) else None
    sent = next(
        (
            j
            for j, m in enumerate(api)
            if m.role == "user" and m.ts > ts and (until is None or m.ts < until)
        ),
        None,
    )
    removed_ui = [ts]
    messages: list[ApiMessage | None] = list(api)
    if sent is not None:
        message = api[sent]
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        messages[sent] = msgspec.structs.replace(message, content=results) if results else None
        summary_id = message.condense_parent
        if summary_id is not None:
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
    return DeletePlan(sorted(removed_ui), api_from, kept[api_from:])
