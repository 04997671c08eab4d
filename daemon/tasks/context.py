"""Context reduction: what of the API history a model request sends, as pure
functions over the history. Nothing here deletes: messages are hidden by tags
(`truncationParent`), images are left out of the request only, and the stored
history keeps everything (seeds 001/004). Condensing and rewinding live here next.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from hdsp.daemon.conversation import ApiMessage
from hdsp.daemon.llm.images import recent_images_only, without_images

__all__ = ["MAX_REQUEST_IMAGES", "Truncation", "request_messages", "truncate_oldest"]

#: Images a model request carries: the most recent ones; older images become a
#: short text in the request (the stored history keeps them).
MAX_REQUEST_IMAGES = 4


def request_messages(
    api: list[ApiMessage], *, images_refused_upto: int = 0, max_images: int = MAX_REQUEST_IMAGES
) -> list[ApiMessage]:
    """The history a request sends: what is not truncated, with only the
    `max_images` most recent images, and none of the messages up to ts
    `images_refused_upto` (a provider refused an image among them)."""
    messages = [m for m in api if m.truncation_parent is None]
    if images_refused_upto:
        cut = sum(1 for m in messages if m.ts <= images_refused_upto)
        messages = without_images(messages[:cut]) + messages[cut:]
    return recent_images_only(messages, max_images)


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
    visible = [i for i, m in enumerate(api) if m.truncation_parent is None]
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
