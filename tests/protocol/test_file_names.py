"""The one rule for names and text that are not UTF-8 (hdsp.protocol.file_names),
as properties over any name a POSIX file system allows: the shown spelling is
one line of valid UTF-8, reads back to the very bytes, and the codec encodes any
message holding OS names instead of failing."""

from __future__ import annotations

import os

import msgspec
from hypothesis import example, given
from hypothesis import strategies as st

from hdsp.protocol import (
    CheckpointInfo,
    encodable,
    encodable_text,
    encode,
    os_name,
    shown_name,
)
from tests.support.file_names import NAME_SETTINGS, name_paths, raw_names

_CONTROLS = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]}


@NAME_SETTINGS
@given(raw_names)
@example(b"r\xff.csv")
@example(b"lit\\xff")  # a real backslash before what reads as an escape
@example(b"\\x5c\xff")
@example(b"two\nlines")
@example(b"\xc2\x85")  # U+0085, NEXT LINE: a line break to str.splitlines
@example(b"\\u0085\xe2\x80\xa8")  # a real backslash before "u0085", and U+2028
@example(b"\xc3\xa9t\xc3\xa9")  # valid UTF-8 stays as it is
@example(b"-rf")
@example(b"n" * 255)
def test_a_shown_name_is_one_line_of_utf8_that_reads_back_to_its_bytes(raw: bytes) -> None:
    name = os.fsdecode(raw)
    shown = shown_name(name)
    shown.encode("utf-8")  # encodable: no lone surrogate
    assert not _CONTROLS & set(shown)  # no terminal control
    assert len(shown.splitlines()) == 1  # one line, whoever splits it
    assert os.fsencode(os_name(shown)) == raw
    if raw.decode("utf-8", "replace") == name and not _CONTROLS & set(name) and "\\" not in name:
        assert shown == name  # valid UTF-8 without controls or backslashes: as it is


@NAME_SETTINGS
@given(name_paths())
def test_a_shown_path_reads_back_to_its_bytes(parts: list[bytes]) -> None:
    raw = b"/".join(parts)
    shown = shown_name(os.fsdecode(raw))
    assert shown.count("/") == raw.count(b"/")  # no escape spells a separator
    assert os.fsencode(os_name(shown)) == raw


@NAME_SETTINGS
@given(st.text())
def test_text_without_lone_surrogates_is_left_as_it_is(text: str) -> None:
    assert encodable_text(text) is text
    assert os_name(shown_name(text)) == text or "\0" in text


def test_lone_surrogates_are_spelled_the_same_in_text_and_names() -> None:
    assert encodable_text("caf\udce9 \\xff") == "caf\\xe9 \\xff"  # text: nothing else changes
    assert shown_name("caf\udce9 \\xff") == "caf\\xe9 \\x5cxff"
    assert encodable_text("\ud800") == shown_name("\ud800") == "\\ud800"
    assert os_name("\\ud800") == "\\ud800"  # not a byte: not read back
    assert encodable({"k\udcff": ["v\udcfe", 1, None]}) == {"k\\xff": ["v\\xfe", 1, None]}


@NAME_SETTINGS
@given(st.lists(raw_names, min_size=1, max_size=4))
def test_the_codec_encodes_any_message_holding_os_names(names: list[bytes]) -> None:
    changed = [os.fsdecode(n) for n in names]
    info = CheckpointInfo(task_id="t", number=1, ts=1, commit="c", reason="r", changed=changed)
    decoded = msgspec.json.decode(encode(info), type=CheckpointInfo)
    assert decoded.changed == [encodable_text(name) for name in changed]
