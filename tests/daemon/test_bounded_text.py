"""BoundedText: text appended without end, kept as its head and its tail.

A model of the buffer is the whole text: whatever is appended, in whatever
pieces, the buffer must hold exactly the whole text's first third of the limit
and its last two thirds, and count the rest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hdsp.daemon.bounded_text import DROPPED_LINE, BoundedText, dropped_marker

pieces = st.lists(st.text(alphabet="ab\nc", max_size=40), max_size=30)


@given(pieces, st.integers(min_value=1, max_value=120))
def test_it_holds_the_head_and_tail_of_the_whole_text(chunks: list[str], limit: int) -> None:
    whole = "".join(chunks)
    buffer = BoundedText(limit)
    for chunk in chunks:
        buffer.append(chunk)
    head_limit = limit // 3
    tail_limit = limit - head_limit
    assert buffer.size == len(whole)
    if len(whole) <= limit:
        assert buffer.dropped == 0
        assert buffer.text() == whole
    else:
        head, tail = whole[:head_limit], whole[len(whole) - tail_limit :]
        assert buffer.dropped == len(whole) - limit
        assert len(buffer) == limit
        assert buffer.text() == f"{head}\n{dropped_marker(buffer.dropped)}\n{tail}"
    # The text is joined once, and reading it again gives the same.
    assert buffer.text() == buffer.text()


@given(pieces, st.integers(min_value=1, max_value=120), st.integers(min_value=0, max_value=150))
def test_head_and_tail_of_what_is_held(chunks: list[str], limit: int, n: int) -> None:
    buffer = BoundedText(limit)
    for chunk in chunks:
        buffer.append(chunk)
    held = "".join(chunks)
    if buffer.dropped:
        head_limit = limit // 3
        held = held[:head_limit] + held[len(held) - (limit - head_limit) :]
    assert buffer.head(n) == held[:n]
    assert buffer.tail(n) == held[max(0, len(held) - n) :]


def test_the_marker_is_the_callers_and_the_default_one_can_be_read_back() -> None:
    buffer = BoundedText(9)
    buffer.append("abc" + "x" * 1_000_000 + "uvwxyz")
    assert buffer.text(lambda n: f"<{n} cut>") == "abc\n<1000000 cut>\nuvwxyz"
    found = DROPPED_LINE.search(buffer.text())
    assert found is not None and found[1] == "1,000,000"


def test_a_hundred_megabytes_in_small_pieces_keep_the_bound() -> None:
    buffer = BoundedText(3_000)
    line = "y" * 99 + "\n"
    for _ in range(1_000_000):
        buffer.append(line)
    assert len(buffer) == 3_000
    assert buffer.size == 100_000_000
    assert buffer.dropped == 100_000_000 - 3_000


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BoundedText(0)
