"""Rewinding a task's history to one of its messages (seed 000's
`MessageManager.rewindToTimestamp`), as a pure plan over its UI and API messages:
what goes, and what comes back.

A rewind removes the UI messages from a point on and the API messages made
after it (they came from the same clock). Condensing and truncation hid older
messages by tags; when the `condense_context` or `sliding_window_truncation`
message that records one is removed, the messages it hid come back (their tag
is cleared) and its summary goes with it (seed 000's orphan cleanup). The API
history never ends with a tool call whose result was removed.

Forking a task at a message is the same plan, kept instead of applied.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from hdsp.daemon.conversation import ApiMessage, ToolUseBlock
from hdsp.daemon.errors import HdspError
from hdsp.protocol import ClineMessage, ErrorCode, Say

__all__ = ["RewindPlan", "RewindRefused", "plan_rewind"]


class RewindRefused(HdspError, ValueError):
    """The rewind is not possible (no such message, or it would remove the task's start)."""

    code = ErrorCode.INVALID_REQUEST


@dataclass(frozen=True)
class RewindPlan:
    #: UI messages with a ts of this or more go (None: no UI message goes).
    ui_from_ts: int | None
    #: How many API messages stay (the first ones).
    api_kept: int
    #: API messages that stay, with the tags of a removed summary or truncation
    #: cleared, by index.
    restored: dict[int, ApiMessage]
    #: UI messages that stay.
    ui_kept: int


def _removed_ids(messages: list[ClineMessage]) -> tuple[set[str], set[str]]:
    condense: set[str] = set()
    truncation: set[str] = set()
    for m in messages:
        if m.say == Say.CONDENSE_CONTEXT and m.context_condense:
            value = m.context_condense.get("condenseId")
            if isinstance(value, str):
                condense.add(value)
        elif m.say == Say.SLIDING_WINDOW_TRUNCATION and m.context_truncation:
            value = m.context_truncation.get("truncationId")
            if isinstance(value, str):
                truncation.add(value)
    return condense, truncation


def plan_rewind(
    ui: list[ClineMessage], api: list[ApiMessage], ts: int, *, include: bool
) -> RewindPlan:
    """The plan that rewinds to the UI message `ts`: removing it too (`include`),
    or keeping it and removing what came after. Raises RewindRefused."""
    index = next((i for i, m in enumerate(ui) if m.ts == ts), None)
    if index is None:
        raise RewindRefused(f"The task has no message {ts}.")
    first_removed = index if include else index + 1
    if first_removed == 0:
        raise RewindRefused(
            "That would remove the task's first message: start a new task, or fork this one."
        )
    if first_removed >= len(ui):
        return RewindPlan(None, len(api), {}, len(ui))
    cut = ui[first_removed].ts
    kept = sum(1 for m in api if m.ts < cut)
    # A tool call whose result goes cannot stay either: every tool_use needs its result.
    while kept > 1 and any(isinstance(b, ToolUseBlock) for b in api[kept - 1].content):
        kept -= 1
    condense, truncation = _removed_ids(ui[first_removed:])
    condense |= {m.condense_id for m in api[kept:] if m.is_summary and m.condense_id}
    truncation |= {m.truncation_id for m in api[kept:] if m.truncation_id}
    restored: dict[int, ApiMessage] = {}
    for i, m in enumerate(api[:kept]):
        changes: dict[str, None] = {}
        if m.condense_parent is not None and m.condense_parent in condense:
            changes["condense_parent"] = None
        if m.truncation_parent is not None and m.truncation_parent in truncation:
            changes["truncation_parent"] = None
        if changes:
            restored[i] = msgspec.structs.replace(m, **changes)
    return RewindPlan(cut, max(kept, 1), restored, first_removed)
