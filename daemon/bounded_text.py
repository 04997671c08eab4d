"""Text that grows without bound kept within one: its head and its tail.

A kernel printing 100 MB or a shell command logging for hours must not hold
100 MB. `BoundedText` keeps the first third of `limit` characters and the last
two thirds, and counts what falls between them. Text is kept as chunks, so
appending costs no quadratic copying (amortised O(len(text)) per append).

`text()` joins head and tail with a line saying how much was dropped; the words
of that line are the caller's (`marker`), so that a reader of the text can find
it again (the kernel's `cut_text` reads its own marker back to count).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

__all__ = ["DROPPED_LINE", "BoundedText", "dropped_marker"]


def dropped_marker(count: int) -> str:
    """The default line put where `count` characters were dropped."""
    return f"[... {count:,} characters dropped ...]"


#: The default marker's line as `text()` puts it, newlines included; group 1 is
#: the count, with its thousands separators.
DROPPED_LINE = re.compile(r"\n\[\.\.\. ([\d,]+) characters dropped \.\.\.\]\n")


class BoundedText:
    """Appended text, bounded to its head (a third of `limit`) and its tail."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.head_limit = limit // 3
        self.tail_limit = limit - self.head_limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        #: Characters appended in all, and of them dropped from the middle.
        self.size = 0
        self.dropped = 0

    def __len__(self) -> int:
        """Characters held (at most `limit`)."""
        return self._head_len + self._tail_len

    def append(self, text: str) -> None:
        self.size += len(text)
        if self._head_len < self.head_limit:
            take = text[: self.head_limit - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take) :]
        if not text:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len > self.tail_limit:
            first = self._tail[0]
            excess = self._tail_len - self.tail_limit
            if len(first) <= excess:
                self._tail.popleft()
                self._tail_len -= len(first)
                self.dropped += len(first)
            else:
                self._tail[0] = first[excess:]
                self._tail_len -= excess
                self.dropped += excess

    def text(self, marker: Callable[[int], str] = dropped_marker) -> str:
        """Head and tail; between them, on a line of its own, `marker(dropped)`
        if anything was dropped."""
        head, tail = self._compact()
        if self.dropped:
            return f"{head}\n{marker(self.dropped)}\n{tail}"
        return head + tail

    def head(self, n: int) -> str:
        """The first `n` characters held (fewer if fewer are held)."""
        parts: list[str] = []
        for chunk in self._head if n <= self._head_len else [*self._head, *self._tail]:
            if n <= 0:
                break
            parts.append(chunk[:n])
            n -= len(parts[-1])
        return "".join(parts)

    def tail(self, n: int) -> str:
        """The last `n` characters held (fewer if fewer are held)."""
        parts: list[str] = []
        chunks = self._tail if n <= self._tail_len else [*self._head, *self._tail]
        for chunk in reversed(chunks):
            if n <= 0:
                break
            piece = chunk[-n:]
            parts.append(piece)
            n -= len(piece)
        return "".join(reversed(parts))

    def _compact(self) -> tuple[str, str]:
        """Join the chunks (so that the next call does not join them again)."""
        head = "".join(self._head)
        self._head = [head] if head else []
        tail = "".join(self._tail)
        self._tail = deque([tail] if tail else [])
        return head, tail
