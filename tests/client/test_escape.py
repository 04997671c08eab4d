"""`escape_controls`: nothing a terminal would act on survives it, and nothing
printable is changed."""

from __future__ import annotations

import io
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from hdsp.client.cli.render import Renderer
from hdsp.client.escape import escape_controls
from hdsp.protocol import ClineMessage

C0 = [chr(c) for c in range(0x20) if chr(c) not in "\n\t"]
C1 = [chr(c) for c in range(0x7F, 0xA0)]
BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)]


def test_every_c0_c1_and_bidi_control_becomes_visible_text() -> None:
    for char in C0 + C1 + BIDI:
        shown = escape_controls(f"a{char}b")
        assert char not in shown, repr(char)
        assert shown.startswith("a\\") and shown.endswith("b")
        assert shown.isprintable(), repr(shown)


def test_the_usual_spellings() -> None:
    assert escape_controls("\x1b[2K\r  $ ls") == "\\x1b[2K\\r  $ ls"
    assert escape_controls("\x1b]52;c;ZXZpbA==\x07") == "\\x1b]52;c;ZXZpbA==\\x07"
    assert escape_controls("\x08\x7f\x9b\u202e\u2066") == "\\b\\x7f\\x9b\\u202e\\u2066"
    assert escape_controls("\ud800") == "\\ud800"  # a lone surrogate cannot be encoded


def test_newlines_tabs_and_printable_unicode_are_kept() -> None:
    text = "line one\n\tline two: naïve café 数据 🐍 \u200b"
    assert escape_controls(text) == text


@given(st.text())
def test_no_control_survives_any_text(text: str) -> None:
    shown = escape_controls(text)
    categories = {unicodedata.category(ch) for ch in shown if ch not in "\n\t"}
    assert not categories & {"Cc", "Cs"}  # no control, no lone surrogate
    assert not any(ch in shown for ch in C0 + C1 + BIDI)
    shown.encode("utf-8")  # printable on any UTF-8 terminal: no lone surrogates


def test_the_renderer_escapes_before_it_colours() -> None:
    out, err = io.StringIO(), io.StringIO()
    render = Renderer(out, err, first_text_is_prompt=False)
    render._color = True
    command = "mv victim elsewhere # \x1b[2K\r  $ ls -la"
    render.ask(ClineMessage(ts=1, type="ask", ask="command", text=command, cwd="/w"))
    render.message(ClineMessage(ts=2, type="say", say="text", text="hi \x1b]0;title\x07"))
    render.message(ClineMessage(ts=3, type="say", say="error", text="bad \x1b[31m"))
    shown = out.getvalue() + err.getvalue()
    assert "\\x1b[2K\\r  $ ls -la" in shown and "in /w" in shown
    assert "\\x1b]0;title\\x07" in shown and "bad \\x1b[31m" in shown
    # The only escape sequences left are the renderer's own colours.
    assert shown.replace("\x1b[0m", "").count("\x1b[") == shown.count("\x1b[1;")
