"""Making untrusted text safe for a terminal.

Everything a model, a tool, a kernel or a file produced may carry escape
sequences that a terminal obeys: erase a line and redraw it (`ESC[2K` and a
carriage return make `rm -rf ~` look like `ls`), set the clipboard (OSC 52), set
the window title, or reorder what is shown (bidi overrides). `escape_controls`
turns every such character into visible text before anything is printed; a
renderer adds its own colour codes after it.
"""

from __future__ import annotations

import re

__all__ = ["escape_controls"]

#: C0 controls but newline and tab, DEL, C1 controls, Unicode's bidi embeddings,
#: overrides, isolates and marks, and lone surrogates (text decoded with
#: `surrogateescape`, or JSON's `\ud800`), which a terminal cannot print either.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

_NAMED = {"\r": "\\r", "\x08": "\\b", "\x0b": "\\v", "\x0c": "\\f", "\x00": "\\0"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """`text` with every control character (but newline and tab) and every bidi
    control shown as a visible escape: ESC as `\\x1b`, CR as `\\r`, U+202E as
    `\\u202e`. Printable text, including any other Unicode, is left as it is."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_visible, text)
