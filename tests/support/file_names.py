"""File names for property-based tests (issue 32, hole 4): any name a POSIX file
system allows, as bytes: anything but NUL and `/`, 1 to 255 bytes, biased
towards what breaks software (bytes that are not UTF-8, newlines and other
control characters, terminal escapes, a leading `-`, backslash escapes that
look like ours, glob characters, git's `:0:`, unicode), and deep trees of them.

Every test that uses them runs with `NAME_SETTINGS`: a fixed seed and a bounded
number of examples, so CI runs the same examples each time, fast.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = [
    "NAME_MAX",
    "NAME_SETTINGS",
    "file_names",
    "make_file",
    "name_paths",
    "raw_names",
]

#: Linux's NAME_MAX: the bytes of one name.
NAME_MAX = 255

#: Fixed seed, bounded examples, no deadline (a shared machine's git is slow).
NAME_SETTINGS = settings(
    derandomize=True,
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: Pieces that break software, spliced into names.
_NASTY = [
    b"\xff",
    b"\xfe\xfd",
    b"\xc3",  # a UTF-8 lead byte with nothing after it
    b"\xed\xa0\x80",  # a UTF-16 surrogate, encoded: not UTF-8
    b"\xc3\xa9",  # valid UTF-8: e acute
    b"\n",
    b"\r",
    b"\t",
    b"\x1b[31m",
    b"\x07",
    b"\x7f",
    b"-",
    b"--",
    b" ",
    b"\\",
    b"\\xff",  # looks like our escape of 0xff
    b"\\x5c",
    b"\\x0a",
    b"*",
    b"?",
    b"[a]",
    b"!",
    b"#",
    b":0:",
    b"~",
    b"$HOME",
    b"'\"",
    b"\xe2\x80\xae",  # RIGHT-TO-LEFT OVERRIDE
]

_piece = st.one_of(
    st.sampled_from(_NASTY),
    st.binary(min_size=1, max_size=6),
    st.text(min_size=1, max_size=4).map(lambda t: t.encode("utf-8")),
    st.integers(min_value=1, max_value=NAME_MAX).map(lambda n: b"n" * n),
)


def _fit(raw: bytes) -> bytes:
    """`raw` without NUL and `/`, cut to NAME_MAX bytes."""
    return raw.replace(b"\0", b"").replace(b"/", b"")[:NAME_MAX]


#: One name, as bytes (never "", "." or "..").
raw_names = (
    st.lists(_piece, min_size=1, max_size=8)
    .map(lambda pieces: _fit(b"".join(pieces)))
    .filter(lambda n: n not in (b"", b".", b".."))
)


def file_names(*, reserved: tuple[bytes, ...] = ()) -> st.SearchStrategy[bytes]:
    """Names but `reserved` (what a tool treats apart, such as `.git`)."""
    return raw_names.filter(lambda n: n not in reserved)


def name_paths(
    *, max_depth: int = 6, reserved: tuple[bytes, ...] = ()
) -> st.SearchStrategy[list[bytes]]:
    """A path of names, 1 to `max_depth` deep: the folders, then the file."""
    return st.lists(file_names(reserved=reserved), min_size=1, max_size=max_depth)


def make_file(root: Path, parts: list[bytes], data: bytes) -> bytes:
    """Create the file `parts` (folders made on the way) under `root` with
    `data`; returns its path relative to `root`, as bytes."""
    where = os.fsencode(root)
    for folder in parts[:-1]:
        where += b"/" + folder
        os.makedirs(where, exist_ok=True)
    with open(where + b"/" + parts[-1], "wb") as f:
        f.write(data)
    return b"/".join(parts)
