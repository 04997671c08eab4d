"""Every file tool with any name a POSIX file system allows (issue 32, hole 4),
as properties: the name the model is shown (hdsp.protocol.file_names) is one
line, encodable, and leads every tool back to the very file: list, search,
read, write, edit, and the notebook tools; a new file made by that spelling
gets the very bytes. Deep trees too. Real files in a fresh directory per
example; a fixed seed and a bounded count (NAME_SETTINGS)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec
from hypothesis import example, given, settings

from hdsp.daemon.tools import EditFile, ListFiles, ReadFile, SearchFiles, Tool, WriteToFile
from hdsp.daemon.tools.files import ESCAPED_NAMES_NOTE
from hdsp.daemon.tools.notebook_tools import InsertCell, NotebookTracker, ReadNotebook
from hdsp.daemon.tools.workspace import NOISE_DIRS
from hdsp.protocol import shown_name
from tests.support.file_names import NAME_MAX, NAME_SETTINGS, make_file, name_paths
from tests.support.tool_context import RecordingContext

#: Names the tools treat apart (hidden, protected, not descended into).
RESERVED = (b".hdspignore", b".git", b".hdsp", *(os.fsencode(n) for n in NOISE_DIRS))
MARK = "needle-7f3a"


def _run(tool: Tool, root: Path, args: Mapping[str, Any]) -> str:
    async def go() -> str:
        result = await tool.execute(RecordingContext(root), args)
        text = "".join(getattr(b, "text", "") for b in result.content)
        msgspec.json.encode(text)  # what reaches the model and the store encodes
        assert not result.is_error, text
        return text

    return anyio.run(go)


def _raw_tree(root: Path) -> set[bytes]:
    """Every file and folder under `root`, relative, as bytes."""
    top = os.fsencode(root)
    found = set()
    for folder, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            found.add(os.path.relpath(os.path.join(folder, name), top))
    return found


def _shown(raw: bytes) -> str:
    return shown_name(os.fsdecode(raw))


@NAME_SETTINGS
@given(name_paths(max_depth=3, reserved=RESERVED))
@example([b"r\xff.csv"])
@example([b"dir\xfe", b"two\nlines\r.txt"])
@example([b"lit\\xff"])  # a real backslash: not the byte 0xff
@example([b"-rf", b"--help"])
@example([b" lead and trail "])
@example([b"n" * NAME_MAX])
@example([("\U0001f600" * 63).encode()])  # 252 bytes of 4-byte characters
@example([b"\xc2\x85"])  # U+0085: a line break to str.splitlines (found by hypothesis)
def test_every_file_tool_finds_the_file_by_its_shown_name(parts: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw = make_file(root, parts, f"a,b\n1,{MARK}\n".encode())
        shown = _shown(raw)
        before = _raw_tree(root)

        listing = _run(ListFiles(), root, {"recursive": True, "limit": 5000})
        assert any(line.startswith(f"{shown}  (") for line in listing.splitlines()), listing
        assert (ESCAPED_NAMES_NOTE in listing) == (shown != os.fsdecode(raw))  # says how
        found = _run(SearchFiles(), root, {"regex": MARK})
        assert shown in found.splitlines()
        assert MARK in _run(ReadFile(), root, {"path": shown})

        _run(WriteToFile(), root, {"path": shown, "content": f"x\n{MARK}\n"})
        _run(EditFile(), root, {"path": shown, "edits": [{"search": "x\n", "replace": "y\n"}]})
        with open(os.path.join(os.fsencode(root), raw), "rb") as f:
            assert f.read() == f"y\n{MARK}\n".encode()
        assert _raw_tree(root) == before  # the very file: none made by the escaped spelling

        # A new file by the shown spelling of a new name gets that name's bytes.
        sibling = [*parts[:-1], b"new-" + parts[-1][: NAME_MAX - 4]]
        new_raw = b"/".join(sibling)
        _run(WriteToFile(), root, {"path": _shown(new_raw), "content": "new\n"})
        with open(os.path.join(os.fsencode(root), new_raw), "rb") as f:
            assert f.read() == b"new\n"
        assert _raw_tree(root) == before | {new_raw}


@settings(NAME_SETTINGS, max_examples=20)  # (nbformat's validation is slow)
@given(name_paths(max_depth=2, reserved=RESERVED))
@example([b"nb\xff"])
@example([b"a\nb", b"-x"])
def test_notebook_tools_find_the_notebook_by_its_shown_name(parts: list[bytes]) -> None:
    parts = [*parts[:-1], parts[-1][: NAME_MAX - 6] + b".ipynb"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for depth in range(1, len(parts)):
            os.makedirs(os.path.join(os.fsencode(root), *parts[:depth]), exist_ok=True)
        raw = b"/".join(parts)
        shown = _shown(raw)
        tracker = NotebookTracker()
        _run(InsertCell(tracker), root, {"path": shown, "source": f"print('{MARK}')"})
        assert os.path.isfile(os.path.join(os.fsencode(root), raw))
        assert MARK in _run(ReadNotebook(tracker), root, {"path": shown})
        assert shown in _run(ListFiles(), root, {"recursive": True, "limit": 5000})


def test_a_deep_tree_is_listed_read_and_written_by_shown_paths() -> None:
    names = [b"d\xff", b"-", b"\n", b"\\xff", b" ", b"\x1b[1m", b"\xc3\xa9"] * 6  # 42 deep
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw = make_file(root, [*names, b"leaf\xfe.txt"], f"{MARK}\n".encode())
        shown = _shown(raw)
        listing = _run(ListFiles(), root, {"recursive": True, "limit": 5000})
        assert any(line.startswith(f"{shown}  (") for line in listing.splitlines())
        assert shown in _run(SearchFiles(), root, {"regex": MARK}).splitlines()
        assert MARK in _run(ReadFile(), root, {"path": shown})
        _run(WriteToFile(), root, {"path": shown, "content": "changed\n"})
        with open(os.path.join(os.fsencode(root), raw), "rb") as f:
            assert f.read() == b"changed\n"


def test_an_ignore_pattern_of_bytes_that_are_not_utf8_hides_what_it_names() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_file(root, [b".hdspignore"], b"secret\xff.csv\n")
        make_file(root, [b"secret\xff.csv"], f"{MARK}\n".encode())
        make_file(root, [b"secret\xfe.csv"], f"{MARK}\n".encode())
        listing = _run(ListFiles(), root, {})
        assert "secret\\xfe.csv" in listing and "secret\\xff.csv" not in listing
        assert "secret\\xff.csv" not in _run(SearchFiles(), root, {"regex": MARK})
