"""Context reduction: what of the API history a model request sends, as pure
functions over the history. Nothing here deletes (seeds 001/004): messages are
hidden by tags (`condense_parent` names the summary that replaces them,
`truncation_parent` the truncation that hid them), images and large tool outputs
of older turns are left out of the request only, and the stored history keeps
everything.

A summary is appended to the history when it is made, but a request sends it
where the messages it condensed began (after the task's first message), so that
the conversation reads in order: task, summary, what came after.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from hdsp.daemon.conversation import ApiMessage, Block, TextBlock, ToolResultBlock
from hdsp.daemon.llm.images import recent_images_only, without_images

__all__ = [
    "MAX_REQUEST_IMAGES",
    "MIN_CONDENSED",
    "OLD_OUTPUT_CHARS",
    "RECENT_OUTPUT_TURNS",
    "Condensing",
    "Truncation",
    "condensable",
    "condensing",
    "request_messages",
    "truncate_oldest",
    "visible_order",
]

#: Images a model request carries: the most recent ones; older images become a
#: short text in the request (the stored history keeps them).
MAX_REQUEST_IMAGES = 4
#: Tool results of the last this many tool phases go in whole; older ones longer
#: than OLD_OUTPUT_CHARS become a stub with their beginning.
RECENT_OUTPUT_TURNS = 3
OLD_OUTPUT_CHARS = 2000
#: What of an old long output its stub keeps (characters).
_STUB_HEAD = 400
#: Messages a summary must replace to be worth a model request.
MIN_CONDENSED = 3


def _hidden(message: ApiMessage) -> bool:
    return message.condense_parent is not None or message.truncation_parent is not None


def visible_order(api: list[ApiMessage]) -> list[int]:
    """Indices of the messages a request sends, in the order it sends them: each
    visible summary where the first message it condensed stood."""
    first_condensed: dict[str, int] = {}
    for index, message in enumerate(api):
        if message.condense_parent is not None:
            first_condensed.setdefault(message.condense_parent, index)
    keyed: list[tuple[float, int]] = []
    for index, message in enumerate(api):
        if _hidden(message):
            continue
        place: float = index
        if message.is_summary and message.condense_id in first_condensed:
            place = first_condensed[message.condense_id] - 0.5
        keyed.append((place, index))
    keyed.sort()
    return [index for _, index in keyed]


def _stub(text: str) -> str:
    return (
        text[:_STUB_HEAD]
        + f"\n...[{len(text) - _STUB_HEAD} more characters of this older output are left "
        "out of the request; the task's history keeps them. Run the code again if you "
        "need them.]"
    )


def _old_outputs_stubbed(messages: list[ApiMessage], recent_turns: int) -> list[ApiMessage]:
    """`messages` with long tool outputs of all but the last `recent_turns` tool
    phases as stubs."""
    phases = [
        i for i, m in enumerate(messages) if any(isinstance(b, ToolResultBlock) for b in m.content)
    ]
    old = set(phases[: max(0, len(phases) - recent_turns)])
    out = []
    for index, message in enumerate(messages):
        if index not in old or not any(
            isinstance(b, ToolResultBlock)
            and any(isinstance(p, TextBlock) and len(p.text) > OLD_OUTPUT_CHARS for p in b.content)
            for b in message.content
        ):
            out.append(message)
            continue
        content: list[Block] = []
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                parts = [
                    TextBlock(text=_stub(p.text))
                    if isinstance(p, TextBlock) and len(p.text) > OLD_OUTPUT_CHARS
                    else p
                    for p in block.content
                ]
                block = msgspec.structs.replace(block, content=parts)
            content.append(block)
        out.append(msgspec.structs.replace(message, content=content))
    return out


def request_messages(
    api: list[ApiMessage],
    *,
    images_refused_upto: int = 0,
    max_images: int = MAX_REQUEST_IMAGES,
    recent_output_turns: int = RECENT_OUTPUT_TURNS,
) -> list[ApiMessage]:
    """The history a request sends: what is neither condensed nor truncated
    (summaries in their place), with only the `max_images` most recent images,
    long outputs of older tool phases as stubs, and no image of the messages up to
    ts `images_refused_upto` (a provider refused an image among them)."""
    messages = [api[i] for i in visible_order(api)]
    if images_refused_upto:
        cut = sum(1 for m in messages if m.ts <= images_refused_upto)
        messages = without_images(messages[:cut]) + messages[cut:]
    messages = _old_outputs_stubbed(messages, recent_output_turns)
    return recent_images_only(messages, max_images)


def condensable(api: list[ApiMessage]) -> list[int]:
    """Indices of the messages a summary would replace, in request order: all
    that are visible but the task's first message and the tail from the last
    assistant message on (so that the tool results the model answers next keep
    their tool call). Empty when fewer than MIN_CONDENSED could go."""
    order = visible_order(api)
    last = max((p for p, i in enumerate(order) if api[i].role == "assistant"), default=0)
    chosen = order[1:last]
    return chosen if len(chosen) >= MIN_CONDENSED else []


@dataclass(frozen=True)
class Condensing:
    """A summary and the messages it hides: their new versions, by index."""

    condense_id: str
    summary: ApiMessage
    hidden: dict[int, ApiMessage]


def condensing(api: list[ApiMessage], condense_id: str, summary: str, ts: int) -> Condensing:
    """The summary message (`summary` as text, timestamped `ts`) that replaces
    the :func:`condensable` messages, and those messages tagged with its id."""
    chosen = condensable(api)
    message = ApiMessage(
        role="user",
        content=[
            TextBlock(
                text="[Summary of the earlier conversation, written when the context "
                "grew long; the messages it replaces are kept in the task's history]\n\n" + summary
            )
        ],
        ts=ts,
        is_summary=True,
        condense_id=condense_id,
    )
    hidden = {i: msgspec.structs.replace(api[i], condense_parent=condense_id) for i in chosen}
    return Condensing(condense_id, message, hidden)


@dataclass(frozen=True)
class Truncation:
    """Messages hidden by one truncation: their new versions, by index."""

    truncation_id: str
    hidden: dict[int, ApiMessage]


def truncate_oldest(api: list[ApiMessage], truncation_id: str) -> Truncation | None:
    """The forced reduction of seed 004: hide the oldest quarter of the visible
    conversation (never the task's first message), tagging the messages with
    `truncation_id` instead of deleting them. None when nothing is left to hide.

    The cut falls before an assistant message, so that every tool result kept has
    its tool call, and the conversation still starts with the user's task."""
    visible = visible_order(api)
    if len(visible) < 4:
        return None
    want = max(1, (len(visible) - 1) // 4)
    cut = want + 1
    while cut < len(visible) and api[visible[cut]].role != "assistant":
        cut += 1
    if cut >= len(visible) - 1:
        return None
    hidden = {
        index: msgspec.structs.replace(api[index], truncation_parent=truncation_id)
        for index in visible[1:cut]
    }
    return Truncation(truncation_id, hidden)
