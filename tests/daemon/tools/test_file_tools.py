"""The file tools on real files: read ranges, limits and binary files; writes and
edits with their diffs; recursive listings with limits; searches with context."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from hdsp.daemon.tools import (
    EditFile,
    ListFiles,
    PathNotFoundError,
    ReadFile,
    SearchFiles,
    ToolError,
    WriteToFile,
    default_tools,
)
from tests.daemon.tools.tool_results import names_in, text_of
from tests.support.tool_context import RecordingContext


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "ws"
    root.mkdir()
    return root


@pytest.fixture
def ctx(root: Path) -> RecordingContext:
    return RecordingContext(root)


def test_every_tool_schema_is_valid_and_strict() -> None:
    registry = default_tools()  # checks every schema against its metaschema
    mine = ["read_file", "write_to_file", "edit_file", "list_files", "search_files"]
    for name in [*mine, "execute_command", "ask_followup_question"]:
        tool = registry.get(name)
        assert tool is not None
        assert tool.parameters["additionalProperties"] is False, name
        assert len(tool.description) > 80, name
    assert registry.validate("read_file", {"path": "a", "start_line": 0})
    assert registry.validate("edit_file", {"path": "a", "edits": []})
    assert registry.validate("write_to_file", {"path": "a"})
    assert not registry.validate(
        "edit_file", {"path": "a", "edits": [{"search": "x", "replace": ""}]}
    )


# ---- read_file ------------------------------------------------------------------


async def test_read_shows_line_numbers_and_ranges(root: Path, ctx: RecordingContext) -> None:
    (root / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 13)))
    whole = text_of(await ReadFile().execute(ctx, {"path": "f.txt"}))
    assert whole.splitlines()[0] == "f.txt: lines 1-12 of 12"
    assert whole.splitlines()[1] == " 1 | line 1"
    assert whole.splitlines()[-1] == "12 | line 12"

    part = text_of(await ReadFile().execute(ctx, {"path": "f.txt", "start_line": 3, "end_line": 5}))
    assert part.splitlines() == ["f.txt: lines 3-5 of 12", "3 | line 3", "4 | line 4", "5 | line 5"]

    tail = text_of(await ReadFile().execute(ctx, {"path": "f.txt", "start_line": 11}))
    assert tail.splitlines()[1:] == ["11 | line 11", "12 | line 12"]

    with pytest.raises(ToolError, match=r"past the end .* 12 lines"):
        await ReadFile().execute(ctx, {"path": "f.txt", "start_line": 13})
    with pytest.raises(ToolError, match="before start_line"):
        await ReadFile().execute(ctx, {"path": "f.txt", "start_line": 5, "end_line": 4})


async def test_read_counts_a_last_line_without_newline_and_crlf(
    root: Path, ctx: RecordingContext
) -> None:
    (root / "f.txt").write_bytes(b"a\r\nb\r\nc")
    text = text_of(await ReadFile().execute(ctx, {"path": "f.txt", "end_line": 1}))
    assert text.splitlines() == ["f.txt: lines 1-1 of 3", "1 | a"]
    (root / "empty.txt").write_text("")
    assert text_of(await ReadFile().execute(ctx, {"path": "empty.txt"})) == (
        "empty.txt: the file is empty."
    )


async def test_read_cuts_at_the_size_limit_and_says_where_to_go_on(
    root: Path, ctx: RecordingContext
) -> None:
    (root / "big.txt").write_text(
        "".join(f"row {n:05d} " + "x" * 40 + "\n" for n in range(1, 10001))
    )
    text = text_of(await ReadFile(max_chars=1000).execute(ctx, {"path": "big.txt"}))
    assert len(text) < 1400
    shown = [line for line in text.splitlines() if re.match(r"^\s*\d+ \| ", line)]
    last = int(shown[-1].split(" | ")[0])
    assert text.splitlines()[0] == f"big.txt: lines 1-{last} of 10000"
    assert f"lines {last + 1}-10000 are not shown" in text
    assert f"start_line={last + 1}" in text
    assert "1,000 characters" in text


async def test_read_cuts_long_lines(root: Path, ctx: RecordingContext) -> None:
    (root / "wide.json").write_text('{"a": "' + "é" * 50_000 + '"}\nnext\n')
    text = text_of(await ReadFile(max_line_chars=100).execute(ctx, {"path": "wide.json"}))
    assert "wide.json: lines 1-2 of 2" in text
    assert "[... line cut]" in text and "2 | next" in text
    assert "1 line(s) longer than 100 characters" in text
    assert "\ufffd" not in text  # not cut inside a character


async def test_read_refuses_binary_files_politely(root: Path, ctx: RecordingContext) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    with pytest.raises(ToolError, match=r"binary file.*kernel"):
        await ReadFile().execute(ctx, {"path": "img.png"})


async def test_read_of_a_directory_or_missing_file(root: Path, ctx: RecordingContext) -> None:
    (root / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await ReadFile().execute(ctx, {"path": "d"})
    with pytest.raises(PathNotFoundError):
        await ReadFile().execute(ctx, {"path": "nope.txt"})


async def test_read_notes_invalid_utf8(root: Path, ctx: RecordingContext) -> None:
    (root / "latin.csv").write_bytes("café,1\n".encode("latin-1"))
    text = text_of(await ReadFile().execute(ctx, {"path": "latin.csv"}))
    assert "caf\ufffd,1" in text and "not valid UTF-8" in text


# ---- write_to_file ----------------------------------------------------------------


async def test_write_creates_directories_and_previews_a_diff(
    root: Path, ctx: RecordingContext
) -> None:
    tool = WriteToFile()
    args = {"path": "out/report.md", "content": "# Report\nAll good.\n"}
    preview = json.loads(await tool.preview(ctx, args))
    assert preview["tool"] == "write_to_file" and preview["path"] == "out/report.md"
    assert preview["isNewFile"] is True
    assert preview["diff"].splitlines()[:3] == [
        "--- /dev/null",
        "+++ b/out/report.md",
        "@@ -0,0 +1,2 @@",
    ]
    assert not (root / "out").exists()  # a preview writes nothing

    assert text_of(await tool.execute(ctx, args)) == "Created out/report.md (2 lines)."
    assert (root / "out" / "report.md").read_text() == "# Report\nAll good.\n"
    assert tool.written_paths(args) == ["out/report.md"]


async def test_write_replaces_a_file_keeping_its_mode(root: Path, ctx: RecordingContext) -> None:
    target = root / "run.sh"
    target.write_text("echo one\necho two\n")
    target.chmod(0o754)
    tool = WriteToFile()
    args = {"path": "run.sh", "content": "echo one\necho three"}
    preview = json.loads(await tool.preview(ctx, args))
    assert preview["isNewFile"] is False
    assert preview["diff"] == (
        "--- a/run.sh\n+++ b/run.sh\n@@ -1,2 +1,2 @@\n echo one\n-echo two\n"
        "+echo three\n\\ No newline at end of file\n"
    )
    assert text_of(await tool.execute(ctx, args)) == "Wrote run.sh: +1 -1 lines."
    assert target.read_text() == "echo one\necho three"
    assert target.stat().st_mode & 0o777 == 0o754
    assert names_in(root) == ["run.sh"]  # no temporary file left


async def test_write_to_a_directory_is_refused(root: Path, ctx: RecordingContext) -> None:
    (root / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await WriteToFile().execute(ctx, {"path": "d", "content": "x"})
    # The preview falls back to the plain call instead of failing.
    assert (
        json.loads(await WriteToFile().preview(ctx, {"path": "d", "content": "x"}))["path"] == "d"
    )


# ---- edit_file -------------------------------------------------------------------

SOURCE = """\
import pandas as pd

def load(path):
    df = pd.read_csv(path)
    return df

def total(df):
    return df["amount"].sum()
"""


async def test_edit_applies_blocks_that_match_exactly_once(
    root: Path, ctx: RecordingContext
) -> None:
    (root / "m.py").write_text(SOURCE)
    tool = EditFile()
    args = {
        "path": "m.py",
        "edits": [
            {
                "search": "    df = pd.read_csv(path)\n",
                "replace": "    df = pd.read_csv(path, sep=';')\n",
            },
            {"search": 'df["amount"]', "replace": 'df["amount"].fillna(0)'},
        ],
    }
    preview = json.loads(await tool.preview(ctx, args))
    assert preview["tool"] == "edit_file" and preview["path"] == "m.py"
    assert "-    df = pd.read_csv(path)\n+    df = pd.read_csv(path, sep=';')\n" in preview["diff"]
    assert (root / "m.py").read_text() == SOURCE  # a preview writes nothing

    assert text_of(await tool.execute(ctx, args)) == "Edited m.py: 2 blocks applied, +2 -2 lines."
    new = (root / "m.py").read_text()
    assert "pd.read_csv(path, sep=';')" in new and 'df["amount"].fillna(0).sum()' in new


async def test_edit_with_no_match_names_the_block_and_changes_nothing(
    root: Path, ctx: RecordingContext
) -> None:
    (root / "m.py").write_text(SOURCE)
    args = {
        "path": "m.py",
        "edits": [
            {"search": "import pandas as pd", "replace": "import pandas"},
            {"search": "def load(path):\n  df = pd.read_csv(path)", "replace": "x"},
        ],
    }
    with pytest.raises(ToolError) as err:
        await EditFile().execute(ctx, args)
    message = str(err.value)
    assert "changed nothing in 'm.py'" in message
    assert "block 2 of 2: the search text was not found" in message
    assert "at line 3" in message  # where its first line is
    assert "block 1" not in message
    assert (root / "m.py").read_text() == SOURCE


async def test_edit_with_several_matches_says_how_many_and_where(
    root: Path, ctx: RecordingContext
) -> None:
    (root / "m.py").write_text(SOURCE)
    args = {
        "path": "m.py",
        "edits": [{"search": "    return df", "replace": "    return df.copy()"}],
    }
    with pytest.raises(
        ToolError, match=r"block 1 of 1: the search text matches 2 times \(at lines 5, 8\)"
    ):
        await EditFile().execute(ctx, args)
    assert (root / "m.py").read_text() == SOURCE


async def test_edit_counts_overlapping_matches(root: Path, ctx: RecordingContext) -> None:
    (root / "a.txt").write_text("aaa\n")
    with pytest.raises(ToolError, match="matches 2 times"):
        await EditFile().execute(
            ctx, {"path": "a.txt", "edits": [{"search": "aa", "replace": "b"}]}
        )


async def test_edit_spots_line_numbers_copied_from_read_file(
    root: Path, ctx: RecordingContext
) -> None:
    (root / "m.py").write_text(SOURCE)
    args = {"path": "m.py", "edits": [{"search": "1 | import pandas as pd", "replace": "x"}]}
    with pytest.raises(ToolError, match="line number from read_file"):
        await EditFile().execute(ctx, args)


async def test_edit_keeps_crlf_line_endings(root: Path, ctx: RecordingContext) -> None:
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    args = {"path": "w.txt", "edits": [{"search": "two\nthree", "replace": "2\n3"}]}
    await EditFile().execute(ctx, args)
    assert (root / "w.txt").read_bytes() == b"one\r\n2\r\n3\r\n"


async def test_edit_of_a_missing_file_points_to_write(root: Path, ctx: RecordingContext) -> None:
    with pytest.raises(ToolError, match="write_to_file"):
        await EditFile().execute(
            ctx, {"path": "new.py", "edits": [{"search": "a", "replace": "b"}]}
        )


# ---- list_files -------------------------------------------------------------------


def make_tree(root: Path) -> None:
    (root / "data" / "raw").mkdir(parents=True)
    (root / "data" / "raw" / "2024.csv").write_text("x" * 2048)
    (root / "data" / "clean.csv").write_text("a,b\n")
    (root / "notebooks").mkdir()
    (root / "notebooks" / "eda.ipynb").write_text("{}")
    (root / "README.md").write_text("hi\n")


async def test_list_top_level_and_recursive(root: Path, ctx: RecordingContext) -> None:
    make_tree(root)
    top = text_of(await ListFiles().execute(ctx, {}))
    assert top.splitlines() == [
        "Contents of the workspace:",
        "README.md  (3 B)",
        "data/",
        "notebooks/",
    ]
    deep = text_of(await ListFiles().execute(ctx, {"path": "data", "recursive": True}))
    assert deep.splitlines() == [
        "Contents of data/ (recursive):",
        "data/clean.csv  (4 B)",
        "data/raw/",
        "data/raw/2024.csv  (2.0 KB)",
    ]


async def test_list_stops_at_the_limit_and_says_so(root: Path, ctx: RecordingContext) -> None:
    make_tree(root)
    text = text_of(await ListFiles().execute(ctx, {"recursive": True, "limit": 3}))
    lines = text.splitlines()
    assert lines[1:4] == ["README.md  (3 B)", "data/", "notebooks/"]  # top level first
    assert "limit of 3 entries; more exist" in lines[4]
    full = text_of(await ListFiles().execute(ctx, {"recursive": True, "limit": 7}))
    assert "more exist" not in full


async def test_list_of_a_file_or_an_empty_directory(root: Path, ctx: RecordingContext) -> None:
    make_tree(root)
    with pytest.raises(ToolError, match="is a file"):
        await ListFiles().execute(ctx, {"path": "README.md"})
    (root / "empty").mkdir()
    assert text_of(await ListFiles().execute(ctx, {"path": "empty"})).endswith("(empty)")


# ---- search_files ---------------------------------------------------------------------


async def test_search_with_context_lines(root: Path, ctx: RecordingContext) -> None:
    (root / "a.py").write_text(
        "".join(f"line {n}\n" for n in range(1, 21))
        .replace("line 5\n", "TARGET 5\n")
        .replace("line 7\n", "TARGET 7\n")
        .replace("line 15\n", "TARGET 15\n")
    )
    text = text_of(await SearchFiles().execute(ctx, {"regex": r"TARGET \d+", "context_lines": 1}))
    assert text.splitlines() == [
        "Found 3 matches in 1 file for 'TARGET \\\\d+'.",
        "a.py",
        "4-line 4",
        "5:TARGET 5",
        "6-line 6",
        "7:TARGET 7",
        "8-line 8",
        "--",
        "14-line 14",
        "15:TARGET 15",
        "16-line 16",
    ]


async def test_search_caps_results_and_filters_files(root: Path, ctx: RecordingContext) -> None:
    (root / "src").mkdir()
    for n in range(5):
        (root / "src" / f"m{n}.py").write_text("".join(f"x = {i}  # todo\n" for i in range(10)))
    (root / "notes.md").write_text("todo: write notes\n")
    capped = text_of(await SearchFiles().execute(ctx, {"regex": "todo", "max_results": 12}))
    # Breadth first: notes.md (1), src/m0.py (10), then one of src/m1.py.
    assert capped.startswith("Found 12 matches in 3 files")
    assert capped.splitlines()[-3:-1] == ["src/m1.py", "1:x = 0  # todo"]
    assert "Stopped at 12 matches; more exist" in capped
    only_md = text_of(await SearchFiles().execute(ctx, {"regex": "todo", "file_pattern": "*.md"}))
    assert only_md.splitlines() == [
        "Found 1 match in 1 file for 'todo'.",
        "notes.md",
        "1:todo: write notes",
    ]
    in_dir = text_of(
        await SearchFiles().execute(
            ctx, {"regex": "todo", "file_pattern": "src/**/*.py", "max_results": 1000}
        )
    )
    assert in_dir.startswith("Found 50 matches in 5 files") and "notes.md" not in in_dir


async def test_search_skips_binary_files(root: Path, ctx: RecordingContext) -> None:
    (root / "blob.bin").write_bytes(b"needle\0\0\0needle")
    (root / "t.txt").write_text("a needle\n")
    text = text_of(await SearchFiles().execute(ctx, {"regex": "needle"}))
    assert "t.txt" in text and "blob.bin" not in text
    assert "1 binary file(s) were skipped" in text


async def test_search_with_an_invalid_regex(root: Path, ctx: RecordingContext) -> None:
    with pytest.raises(
        ToolError,
        match=r"Invalid regex 'read_csv\(': missing \), unterminated subpattern at position 8",
    ):
        await SearchFiles().execute(ctx, {"regex": "read_csv("})


async def test_search_with_no_match(root: Path, ctx: RecordingContext) -> None:
    (root / "t.txt").write_text("hay\n")
    assert (
        text_of(await SearchFiles().execute(ctx, {"regex": "needle"})) == "No matches for 'needle'."
    )


async def test_pipes_are_neither_read_nor_searched(root: Path, ctx: RecordingContext) -> None:
    os.mkfifo(root / "pipe")
    (root / "t.txt").write_text("needle\n")
    with pytest.raises(ToolError, match="not a regular file"):
        await ReadFile().execute(ctx, {"path": "pipe"})
    with pytest.raises(ToolError, match="not a regular file"):
        await WriteToFile().execute(ctx, {"path": "pipe", "content": "x"})
    text = text_of(await SearchFiles().execute(ctx, {"regex": "needle"}))
    assert text.startswith("Found 1 match in 1 file")
