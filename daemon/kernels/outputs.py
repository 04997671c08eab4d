"""Outputs of an execution: from iopub messages to `KernelOutput`s, kept the way a
notebook keeps them, and rendered two ways: whole for clients, cut for the model.

A notebook's outputs are not the list of messages: `clear_output` empties them
(at once, or before the next output with `wait`), `update_display_data` rewrites
the output that showed the same display id, and consecutive stream text of one
name is one output. `OutputList` applies those rules as messages arrive, keeping
stream text as a list of chunks so that a 100 MB stream costs no quadratic
copying.

The model gets text and images, never megabytes: `render_for_model` keeps the
head and the tail of long text and says how much it left out, strips ANSI colour
codes from tracebacks, and passes PNG and JPEG images as image blocks, scaled
down to what a provider takes (`hdsp.daemon.llm.images`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.llm.images import fit_image
from hdsp.protocol import KernelOutput

__all__ = [
    "IMAGE_TYPES",
    "OUTPUT_TYPES",
    "STREAM_KEEP_CHARS",
    "OutputList",
    "cut_text",
    "merge_streams",
    "output_from_message",
    "render_for_model",
    "strip_ansi",
]

#: iopub message types that are outputs of the execution that caused them.
OUTPUT_TYPES = frozenset(
    {
        "stream",
        "display_data",
        "update_display_data",
        "execute_result",
        "error",
        "clear_output",
    }
)

#: Image types a vision model reads.
IMAGE_TYPES = ("image/png", "image/jpeg")

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: Text mime types the model reads, best first, when an output has no image.
_TEXT_TYPES = ("text/plain", "text/markdown", "text/latex", "application/json", "text/html")


def strip_ansi(text: str) -> str:
    """Remove terminal colour and cursor codes (IPython colours its tracebacks)."""
    return _ANSI.sub("", text)


def output_from_message(msg: Mapping[str, Any]) -> KernelOutput | None:
    """The output an iopub message carries, or None if it carries none."""
    kind = msg["header"]["msg_type"]
    if kind not in OUTPUT_TYPES:
        return None
    c = msg["content"]
    match kind:
        case "stream":
            return KernelOutput(output_type="stream", name=c.get("name"), text=c.get("text", ""))
        case "display_data" | "update_display_data":
            transient = c.get("transient") or {}
            return KernelOutput(
                output_type=kind,
                data=c.get("data", {}),
                metadata=c.get("metadata") or {},
                display_id=transient.get("display_id"),
            )
        case "execute_result":
            return KernelOutput(
                output_type="execute_result",
                data=c.get("data", {}),
                metadata=c.get("metadata") or {},
                execution_count=c.get("execution_count"),
            )
        case "error":
            return KernelOutput(
                output_type="error",
                ename=c.get("ename", ""),
                evalue=c.get("evalue", ""),
                traceback=list(c.get("traceback") or []),
            )
        case _:  # clear_output
            return KernelOutput(output_type="clear_output", wait=bool(c.get("wait", False)))


#: Characters of stream text an execution keeps per output (its head and tail).
STREAM_KEEP_CHARS = 4_000_000


class _Stream:
    """Consecutive stream text of one name, bounded: the first third of `keep`
    characters and the last two thirds are kept, and what falls between them is
    counted, not held (a cell printing 100 MB must not hold 100 MB). Text is kept
    as chunks, so appending costs no quadratic copying."""

    def __init__(self, name: str, keep: int = 0) -> None:
        self.name = name
        keep = keep or STREAM_KEEP_CHARS
        self._head_limit = keep // 3
        self._tail_limit = keep - self._head_limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        #: Characters seen in all, and of them dropped from the middle.
        self.size = 0
        self.dropped = 0

    def add(self, text: str) -> None:
        self.size += len(text)
        if self._head_len < self._head_limit:
            take = text[: self._head_limit - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take) :]
        if not text:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len > self._tail_limit:
            first = self._tail[0]
            excess = self._tail_len - self._tail_limit
            if len(first) <= excess:
                self._tail.popleft()
                self._tail_len -= len(first)
                self.dropped += len(first)
            else:
                self._tail[0] = first[excess:]
                self._tail_len -= excess
                self.dropped += excess

    def text(self) -> str:
        head = "".join(self._head)
        self._head = [head] if head else []
        tail = "".join(self._tail)
        self._tail = deque([tail] if tail else [])
        if self.dropped:
            # cut_text reads this line back, to count what it left out.
            return f"{head}\n[... {self.dropped:,} characters dropped ...]\n{tail}"
        return head + tail

    def head(self, n: int) -> str:
        parts: list[str] = []
        for chunk in self._head if n <= self._head_len else [*self._head, *self._tail]:
            if n <= 0:
                break
            parts.append(chunk[:n])
            n -= len(parts[-1])
        return "".join(parts)

    def tail(self, n: int) -> str:
        parts: list[str] = []
        chunks = self._tail if n <= self._tail_len else [*self._head, *self._tail]
        for chunk in reversed(chunks):
            if n <= 0:
                break
            piece = chunk[-n:]
            parts.append(piece)
            n -= len(piece)
        return "".join(reversed(parts))


_Item = _Stream | KernelOutput


class OutputList:
    """The outputs of one execution as a notebook keeps them."""

    def __init__(self) -> None:
        self._items: list[_Item] = []
        self._clear_pending = False

    def __len__(self) -> int:
        return len(self._items)

    def add(self, out: KernelOutput) -> None:
        kind = out.output_type
        if kind == "clear_output":
            if out.wait:
                self._clear_pending = True
            else:
                self._items.clear()
                self._clear_pending = False
            return
        if kind == "update_display_data":
            # Rewrites what earlier outputs of the same display show; never an
            # output of its own (nbformat has no such output type).
            for i, item in enumerate(self._items):
                if isinstance(item, KernelOutput) and (
                    item.display_id is not None and item.display_id == out.display_id
                ):
                    self._items[i] = KernelOutput(
                        output_type=item.output_type,
                        data=out.data,
                        metadata=out.metadata,
                        display_id=item.display_id,
                        execution_count=item.execution_count,
                    )
            return
        if self._clear_pending:
            self._items.clear()
            self._clear_pending = False
        if kind == "stream":
            last = self._items[-1] if self._items else None
            if not (isinstance(last, _Stream) and last.name == out.name):
                last = _Stream(out.name or "stdout")
                self._items.append(last)
            last.add(out.text or "")
            return
        self._items.append(out)

    def outputs(self) -> list[KernelOutput]:
        """Every output, whole."""
        return [
            KernelOutput(output_type="stream", name=i.name, text=i.text())
            if isinstance(i, _Stream)
            else i
            for i in self._items
        ]

    def preview(self, *, text_limit: int, max_outputs: int) -> tuple[list[KernelOutput], int]:
        """The outputs with long stream text cut to its head and tail, and at most
        `max_outputs` of them (the first and the last); and how many characters
        and outputs were left out. For a message that is sent many times a second."""
        items = self._items
        omitted = 0
        if len(items) > max_outputs:
            half = max_outputs // 2
            items = [*items[:half], *items[len(items) - (max_outputs - half) :]]
            omitted += len(self._items) - len(items)
        result: list[KernelOutput] = []
        for item in items:
            if isinstance(item, _Stream):
                if item.size > text_limit:
                    half = text_limit // 2
                    gone = item.size - 2 * half
                    omitted += gone
                    text = (
                        item.head(half)
                        + f"\n[... {gone:,} characters left out ...]\n"
                        + item.tail(half)
                    )
                else:
                    text = item.text()
                result.append(KernelOutput(output_type="stream", name=item.name, text=text))
            else:
                result.append(_without_big_images(item))
        return result, omitted


#: Base64 characters of one image that a preview carries; a bigger image is
#: named, not sent (the model gets a scaled copy; the notebook keeps it whole).
PREVIEW_IMAGE_LIMIT = 2_000_000


def _without_big_images(out: KernelOutput) -> KernelOutput:
    data = out.data
    if not data or not any(
        len(data[m]) > PREVIEW_IMAGE_LIMIT for m in IMAGE_TYPES if isinstance(data.get(m), str)
    ):
        return out
    kept = {m: v for m, v in data.items() if not m.startswith("image/")}
    sizes = ", ".join(
        f"{m} of {len(v) * 3 // 4:,} bytes" for m, v in data.items() if m.startswith("image/")
    )
    kept["text/plain"] = f"[{sizes} left out of this view: too big to send to clients]"
    return msgspec.structs.replace(out, data=kept)


def merge_streams(outputs: Iterable[KernelOutput]) -> list[KernelOutput]:
    """Join consecutive stream outputs of one name (what arrived since the last
    update of a client, sent as one)."""
    merged: list[KernelOutput] = []
    pending: list[str] = []
    for out in outputs:
        last = merged[-1] if merged else None
        if (
            out.output_type == "stream"
            and last is not None
            and last.output_type == "stream"
            and last.name == out.name
        ):
            pending.append(out.text or "")
            continue
        if pending and last is not None:
            merged[-1] = KernelOutput(
                output_type="stream", name=last.name, text=(last.text or "") + "".join(pending)
            )
            pending = []
        merged.append(out)
    if pending:
        last = merged[-1]
        merged[-1] = KernelOutput(
            output_type="stream", name=last.name, text=(last.text or "") + "".join(pending)
        )
    return merged


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
    for match in _DROPPED.finditer(text, half, len(text) - half):
        dropped = int(match[1].replace(",", ""))
        gone += dropped - len(match[0])
        total += dropped - len(match[0])
        lines -= 2
    about = "" if total == len(text) else "at least "
    return (
        f"{head}\n[... {gone:,} characters ({about}{lines:,} lines) left out of {total:,} ...]"
        f"\n{tail}"
    )


_DROPPED = re.compile(r"\n\[\.\.\. ([\d,]+) characters dropped \.\.\.\]\n")


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
            import json

            value = json.dumps(value)
        return value
    return None


def render_for_model(
    outputs: Sequence[KernelOutput],
    *,
    text_limit: int = 20_000,
    max_images: int = 4,
) -> list[TextBlock | ImageBlock]:
    """What the model reads of `outputs`: one text (head and tail when long),
    then up to `max_images` images."""
    parts: list[str] = []
    images: list[ImageBlock] = []
    skipped_images = 0
    for out in outputs:
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
