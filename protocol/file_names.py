"""How a file name (and any text) that is not valid Unicode crosses the wire.

A POSIX file name is bytes: anything but NUL and `/`. Python holds a byte that
is not UTF-8 as a lone surrogate U+DC80..U+DCFF (`surrogateescape`, what
`os.fsdecode`, `os.scandir` and `os.listdir` give), which no JSON encoder takes
and no terminal can print. The one rule, used by the daemon, its tools, its
checkpoints, the store, and every client:

- such a byte is shown as `\\xNN` (two lower-case hex digits), as Python's
  `backslashreplace` writes it: the name `b"r\\xff.csv"` is shown `r\\xff.csv`;
- in a name, a control character (U+0001..U+001F, U+007F: a newline, a tab, an
  escape) is shown the same way, `\\x0a`; a C1 control (U+0080..U+009F) and
  the line and paragraph separators (U+2028, U+2029) as `\\u0085`: so a name
  is always one line, whoever splits the lines;
- in a name, a backslash that would read as such an escape is shown `\\x5c`;
  so every name has exactly one shown spelling, and `os_name` reads a shown
  name back to the very bytes it came from (`os_name(shown_name(n)) == n`);
- any other lone surrogate (never from a file name: the OS refuses them) is
  shown as `\\uNNNN`, and is not read back.

Text that is not a name (a tool's output, a message) is made encodable by the
same spelling of its lone surrogates, and nothing else of it changes
(`encodable_text`); `encodable` does so throughout a value, as the codec does
for any message that could not be encoded otherwise, so that one name or one
line of output can never stop the daemon's writer.

In a shell, bash reads the shown spelling back with ANSI-C quoting:
`cat $'r\\xff.csv'`; in Python, `os.fsdecode(b"r\\xff.csv")`.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["encodable", "encodable_text", "os_name", "shown_name"]

#: The bytes a `\xNN` of a shown name stands for: controls (not NUL, which no
#: name holds), bytes that are not UTF-8, and the backslash.
_ESCAPED_BYTE = r"(?:0[1-9a-fA-F]|1[0-9a-fA-F]|7[fF]|[89a-fA-F][0-9a-fA-F]|5[cC])"
#: The characters a `\uNNNN` of a shown name stands for: C1 controls, and the
#: line and paragraph separators.
_ESCAPED_CHAR = r"(?:00[89][0-9a-fA-F]|202[89])"
#: What a name cannot show as it is: controls, line breaks, lone surrogates,
#: and a backslash that would read as an escape.
_NAME_UNSAFE = re.compile(
    rf"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]|\\(?=x{_ESCAPED_BYTE}|u{_ESCAPED_CHAR})"
)
_NAME_ESCAPE = re.compile(rf"\\x({_ESCAPED_BYTE})|\\u({_ESCAPED_CHAR})")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _spelled(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x80:  # a control character, or the backslash
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def shown_name(name: str) -> str:
    """`name` (an OS name as Python decodes it, or a path of them) as models and
    people see it: encodable, one line, each byte that is not UTF-8 and each
    control character escaped (`\\xff`, `\\x0a`, `\\u0085`). `os_name` inverts it."""
    if name.isascii() and name.isprintable() and "\\" not in name:
        return name  # (the common case, at the cost of two scans in C)
    return _NAME_UNSAFE.sub(_spelled, name)


def _byte(match: re.Match[str]) -> str:
    byte, char = match.groups()
    if char is not None:
        return chr(int(char, 16))
    value = int(byte, 16)
    return chr(value) if value < 0x80 else chr(0xDC00 + value)


def os_name(shown: str) -> str:
    """The OS name `shown` stands for (`shown_name` inverted): each `\\xNN` of an
    escaped byte and `\\uNNNN` of an escaped character read back. Escapes that spell valid UTF-8 (`\\xc3\\xa9`) give
    the character (`é`), as the OS would decode those bytes."""
    if "\\" not in shown:
        return shown
    raw = _NAME_ESCAPE.sub(_byte, shown)
    try:
        return raw.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate of the text itself: no OS name
        return raw


def encodable_text(text: str) -> str:
    """`text` with each lone surrogate spelled as the rule says (`\\xNN` for a
    byte that was not UTF-8), and nothing else changed."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(_spelled, text)


def encodable(value: Any) -> Any:
    """`value` (builtins: str, list, tuple, dict, scalars) with `encodable_text`
    applied to every string in it, dict keys too."""
    if isinstance(value, str):
        return encodable_text(value)
    if isinstance(value, list | tuple):
        return [encodable(item) for item in value]
    if isinstance(value, dict):
        return {encodable(key): encodable(item) for key, item in value.items()}
    return value
