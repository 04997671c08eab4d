"""Outputs of an execution: from iopub messages to `KernelOutput`s, kept the way a
notebook keeps them, whole for the result and previewed for clients.

A notebook's outputs are not the list of messages. `OutputList` applies the
messaging spec's rules as messages arrive, the way nbclient (and JupyterLab)
keep a cell's outputs:

- `clear_output` empties them at once; with `wait` it empties them just before
  the next output arrives (stream, display, result or error), so a
  `clear_output(wait=True)` that nothing follows leaves the old outputs;
- a message that carries a display id in its `transient` (`display_data`,
  `execute_result`, `update_display_data`) rewrites the data and metadata of
  every output shown so far with that id; `update_display_data` is never an
  output of its own, and does not trigger a pending clear;
- consecutive stream text of one name is one output.

Outputs of other cells can show the same display id (a handle made in one cell
and updated in the next): `OutputList.display_updates` keeps the last data each
display id got, for whoever keeps those cells (the notebook tools) to apply.
Stream text is kept as a list of chunks so that a 100 MB stream costs no
quadratic copying, bounded to its head and tail (:mod:`hdsp.daemon.bounded_text`).

What a model reads of outputs is the kernel tools' business
(:mod:`hdsp.daemon.tools.kernel_output`): this package knows no model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, get_args, get_type_hints

import msgspec

from hdsp.daemon.bounded_text import BoundedText
from hdsp.protocol import KernelOutput

__all__ = [
    "IMAGE_TYPES",
    "OUTPUT_TYPES",
    "STREAM_KEEP_CHARS",
    "OutputList",
    "merge_streams",
    "output_from_message",
]

#: iopub message types that are outputs of the execution that caused them: the
#: output types a KernelOutput has.
OUTPUT_TYPES = frozenset(get_args(get_type_hints(KernelOutput)["output_type"]))

#: Image types that outputs carry as pictures (PNG and JPEG, base64).
IMAGE_TYPES = ("image/png", "image/jpeg")


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
            return KernelOutput(
                output_type=kind,
                data=c.get("data", {}),
                metadata=c.get("metadata") or {},
                display_id=_display_id(c),
            )
        case "execute_result":
            return KernelOutput(
                output_type="execute_result",
                data=c.get("data", {}),
                metadata=c.get("metadata") or {},
                execution_count=c.get("execution_count"),
                display_id=_display_id(c),
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


def _display_id(content: Mapping[str, Any]) -> str | None:
    """The display id in a message's `transient` (which may be missing or null)."""
    transient = content.get("transient")
    if not isinstance(transient, Mapping):
        return None
    value = transient.get("display_id")
    return value if isinstance(value, str) and value else None


#: Characters of stream text an execution keeps per output (its head and tail).
STREAM_KEEP_CHARS = 4_000_000


class _Stream:
    """Consecutive stream text of one name, bounded to its head and tail (a cell
    printing 100 MB must not hold 100 MB)."""

    def __init__(self, name: str, keep: int = 0) -> None:
        self.name = name
        self.buffer = BoundedText(keep or STREAM_KEEP_CHARS)


_Item = _Stream | KernelOutput


class OutputList:
    """The outputs of one execution as a notebook keeps them."""

    def __init__(self) -> None:
        self._items: list[_Item] = []
        self._clear_pending = False
        self._updates: dict[str, KernelOutput] = {}

    def __len__(self) -> int:
        return len(self._items)

    @property
    def display_updates(self) -> list[KernelOutput]:
        """For each display id a message of this execution carried, the last data
        it got, as an `update_display_data` output (in the order the ids first
        came): what outputs of other cells that show the id must now show."""
        return list(self._updates.values())

    def add(self, out: KernelOutput) -> None:
        kind = out.output_type
        if kind == "clear_output":
            if out.wait:
                self._clear_pending = True
            else:
                self._items.clear()
                self._clear_pending = False
            return
        if out.display_id is not None and kind != "stream":
            self._update_display(out)
        if kind == "update_display_data":
            # Never an output of its own (nbformat has no such output type).
            return
        if self._clear_pending:
            self._items.clear()
            self._clear_pending = False
        if kind == "stream":
            last = self._items[-1] if self._items else None
            if not (isinstance(last, _Stream) and last.name == out.name):
                last = _Stream(out.name or "stdout")
                self._items.append(last)
            last.buffer.append(out.text or "")
            return
        self._items.append(out)

    def _update_display(self, out: KernelOutput) -> None:
        """Show `out`'s data in every output so far with its display id (before a
        pending clear, as nbclient does: those may be about to go)."""
        display_id = out.display_id
        assert display_id is not None
        update = KernelOutput(
            output_type="update_display_data",
            data=out.data,
            metadata=out.metadata,
            display_id=display_id,
        )
        self._updates[display_id] = update  # (a dict keeps the first place of a key)
        for i, item in enumerate(self._items):
            if isinstance(item, KernelOutput) and item.display_id == display_id:
                self._items[i] = msgspec.structs.replace(item, data=out.data, metadata=out.metadata)

    def outputs(self) -> list[KernelOutput]:
        """Every output, whole."""
        return [
            KernelOutput(output_type="stream", name=i.name, text=i.buffer.text())
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
                buffer = item.buffer
                if buffer.size > text_limit:
                    half = text_limit // 2
                    gone = buffer.size - 2 * half
                    omitted += gone
                    text = (
                        buffer.head(half)
                        + f"\n[... {gone:,} characters left out ...]\n"
                        + buffer.tail(half)
                    )
                else:
                    text = buffer.text()
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
