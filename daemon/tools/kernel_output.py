"""What a model reads of a kernel's outputs.

The model gets text and images, never megabytes: `render_for_model` keeps the
head and the tail of long text and says how much it left out (counting what the
kernel's bounded stream buffers dropped before), strips ANSI colour codes from
tracebacks, shows a line redrawn with carriage returns (a progress bar) in its
last state, and passes PNG and JPEG images as image blocks, scaled down to what
the history keeps (`hdsp.daemon.llm.images`: each request then fits them to its
provider's limits, or puts a text note in their place for a model that takes no
images).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from hdsp.daemon.bounded_text import DROPPED_LINE
from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.kernels import IMAGE_TYPES
from hdsp.daemon.llm.images import fit_image
from hdsp.protocol import KernelOutput

__all__ = ["cut_text", "render_for_model", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: Text mime types the model reads, best first, when an output has no image.
_TEXT_TYPES = ("text/plain", "text/markdown", "text/latex", "application/json", "text/html")


def strip_ansi(text: str) -> str:
    """Remove terminal colour and cursor codes (IPython colours its tracebacks)."""
    return _ANSI.sub("", text)


def cut_text(text: str, limit: int) -> str:
    """`text`, or its head and tail with a line saying how much was left out."""
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    head, tail = text[:half], text[len(text) - half :]
    gone = len(text) - 2 * half
    total = len(text)
    lines = text.count("\n", half, len(text) - half)
    # What a bounded stream dropped before (its marker is in the cut middle).
    for match in DROPPED_LINE.finditer(text, half, len(text) - half):
        dropped = int(match[1].replace(",", ""))
        gone += dropped - len(match[0])
        total += dropped - len(match[0])
        lines -= 2
    about = "" if total == len(text) else "at least "
    return (
        f"{head}\n[... {gone:,} characters ({about}{lines:,} lines) left out of {total:,} ...]"
        f"\n{tail}"
    )


def _collapse_carriage_returns(text: str) -> str:
    """What a terminal shows: a line rewritten with \\r shows its last version
    (progress bars would otherwise fill the model's context)."""
    if "\r" not in text:
        return text
    text = text.replace("\r\n", "\n")
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def _bundle_text(data: Mapping[str, Any]) -> str | None:
    for mime in _TEXT_TYPES:
        value = data.get(mime)
        if value is None:
            continue
        if isinstance(value, list):
            value = "".join(str(v) for v in value)
        if not isinstance(value, str):
            value = json.dumps(value)
        return value
    return None


def render_for_model(
    outputs: Sequence[KernelOutput],
    *,
    text_limit: int = 20_000,
    max_images: int = 4,
    display_updates: Sequence[KernelOutput] = (),
) -> list[TextBlock | ImageBlock]:
    """What the model reads of `outputs`: one text (head and tail when long),
    then up to `max_images` images. `display_updates` that no output of
    `outputs` shows (a display made by an earlier execution, updated by this
    one) are read after them, each under a line that says so."""
    parts: list[str] = []
    images: list[ImageBlock] = []
    skipped_images = 0
    shown_here = {o.display_id for o in outputs if o.display_id is not None}
    elsewhere = [
        msgspec.structs.replace(u, output_type="display_data")
        for u in display_updates
        if u.display_id is not None and u.display_id not in shown_here
    ]
    for index, out in enumerate([*outputs, *elsewhere]):
        if index >= len(outputs):
            parts.append(
                f"[display {out.display_id} of an earlier execution, updated; it now shows:]"
            )
        match out.output_type:
            case "stream":
                text = out.text or ""
                if text:
                    prefix = "[stderr]\n" if out.name == "stderr" else ""
                    parts.append(prefix + _collapse_carriage_returns(text))
            case "execute_result" | "display_data":
                data = out.data or {}
                image = next((m for m in IMAGE_TYPES if m in data), None)
                if image is not None:
                    if len(images) < max_images:
                        raw = data[image]
                        b64 = "".join(raw) if isinstance(raw, list) else str(raw)
                        fitted = fit_image(ImageBlock(media_type=image, data=b64.replace("\n", "")))
                        if isinstance(fitted, ImageBlock):
                            images.append(fitted)
                            parts.append(f"[image {len(images)}: {fitted.media_type}]")
                        else:
                            parts.append(fitted.text)
                    else:
                        skipped_images += 1
                    continue
                shown = _bundle_text(data)
                label = (
                    f"Out[{out.execution_count}]: "
                    if out.output_type == "execute_result" and out.execution_count
                    else ""
                )
                if shown is not None:
                    parts.append(label + shown)
                elif data:
                    parts.append(f"[output of type {', '.join(sorted(data))}]")
            case "error":
                trace = strip_ansi("\n".join(out.traceback or []))
                parts.append(
                    f"{out.ename}: {strip_ansi(out.evalue or '')}\nTraceback:\n{trace}".rstrip()
                )
    if skipped_images:
        parts.append(f"[{skipped_images} more image(s) not shown]")
    text = "\n".join(p.rstrip("\n") for p in parts)
    blocks: list[TextBlock | ImageBlock] = [TextBlock(text=cut_text(text, text_limit))]
    blocks.extend(images)
    return blocks
