"""Confinement that holds against a hostile file system: a directory swapped for a
symlink while the tools run, paths the OS rejects, error messages that would leak
where a symlink points, names that are not UTF-8, notebook tools on protected
paths, and the modes of the files the agent creates."""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hdsp.daemon.approvals import ApprovalPolicy, Decision
from hdsp.daemon.config import ApprovalSettings
from hdsp.daemon.tools import (
    EditFile,
    ListFiles,
    OutsideWorkspaceError,
    ReadFile,
    SearchFiles,
    ToolError,
    Workspace,
    WriteToFile,
)
from hdsp.daemon.tools.notebook_tools import (
    DeleteCell,
    EditCell,
    InsertCell,
    NotebookTracker,
    ReadNotebook,
    RunCell,
)
from tests.daemon.tools.tool_results import names_in, text_of
from tests.support.tool_context import RecordingContext


def write_raw(path: bytes, data: bytes) -> None:
    """Write a file whose name is given as bytes (it may not be UTF-8)."""
    with open(path, "wb") as f:
        f.write(data)


def read_raw(path: bytes) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ (the workspace) beside outside/ (which holds a secret)."""
    root = tmp_path.resolve() / "root"
    root.mkdir()
    outside = tmp_path.resolve() / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("SECRET-4711\n")
    return root


# ---- a concurrent swapper ---------------------------------------------------------

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)


def _exchange(a: Path, b: Path) -> None:
    """Swap two directory entries atomically (renameat2 RENAME_EXCHANGE), so that
    `a` always exists: a symlink one instant, a real directory the next."""
    if _libc.renameat2(_AT_FDCWD, bytes(a), _AT_FDCWD, bytes(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


@pytest.fixture
def swapper(tree: Path) -> Iterator[threading.Event]:
    """`root/d` flips, as fast as it can, between a real directory (holding f.txt
    with "inside") and a symlink to `outside/` (holding the secret f.txt)."""
    (tree / "d").mkdir()
    (tree / "d" / "f.txt").write_text("inside\n")
    (tree / "spare").symlink_to(tree.parent / "outside")
    stop = threading.Event()
    flips = [0]

    def run() -> None:
        while not stop.is_set():
            _exchange(tree / "d", tree / "spare")
            flips[0] += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join()
    assert flips[0] > 100, "the swapper hardly ran; the test proved nothing"


def test_a_directory_swapped_for_a_symlink_never_leads_out(
    tree: Path, swapper: threading.Event
) -> None:
    outside = tree.parent / "outside"
    reader, writer = ReadFile(), WriteToFile()
    inside_reads = secret_reads = created = 0
    for i in range(800):
        try:
            text = reader.read(tree, {"path": "d/f.txt"})
        except ToolError:
            pass
        else:
            inside_reads += "inside" in text
            secret_reads += "SECRET" in text
        try:
            writer.write(tree, {"path": f"d/new-{i}.txt", "content": "x\n"})
            created += 1
        except ToolError:
            pass
    swapper.set()
    assert secret_reads == 0
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "SECRET-4711\n"
    # The race was real: the tools did read and write inside, between the swaps.
    assert inside_reads > 0 and created > 0


def test_listings_and_searches_of_a_swapped_directory_never_see_the_outside(
    tree: Path, swapper: threading.Event
) -> None:
    (tree.parent / "outside" / "outside-only.txt").write_text("x")
    lister, searcher = ListFiles(), SearchFiles()
    listed = searched = 0
    for _ in range(400):
        try:
            listing = lister.list(tree, {"path": "d"})
        except ToolError:
            pass
        else:
            listed += 1
            assert "outside-only" not in listing
        try:
            found = searcher.search(tree, {"regex": "4711|inside", "path": "d"})
        except ToolError:
            continue
        searched += "inside" in found
        assert "SECRET-4711" not in found
        found = searcher.search(tree, {"regex": "4711|inside"})
        assert "SECRET-4711" not in found
    assert listed > 0 and searched > 0


# ---- error messages ------------------------------------------------------------------


async def test_errors_never_say_where_an_outside_symlink_points(tree: Path) -> None:
    outside = tree.parent / "outside"
    (tree / "escape").symlink_to(outside)
    (tree / "etc-link").symlink_to("/etc/passwd")
    ws = Workspace(tree)
    ctx = RecordingContext(tree)
    for path in ("escape/f.txt", "escape", "etc-link"):
        for attempt in (ws.resolve, ws.resolve_for_write):
            with pytest.raises(OutsideWorkspaceError) as caught:
                attempt(path)
            message = str(caught.value)
            assert "leads out of the workspace through a symbolic link" in message
            assert str(outside) not in message and "/etc" not in message
        with pytest.raises(ToolError) as caught:
            await ReadFile().execute(ctx, {"path": path})
        assert str(outside) not in str(caught.value) and "/etc" not in str(caught.value)


# ---- paths the OS rejects ---------------------------------------------------------


@pytest.mark.parametrize("path", ["a\0b.txt", "x" * 5000, "d/" + "y" * 300 + "/z.txt"])
async def test_a_path_the_os_rejects_is_a_tool_error(tree: Path, path: str) -> None:
    ctx = RecordingContext(tree)
    tracker = NotebookTracker()
    calls: list[tuple[Any, dict[str, Any]]] = [
        (ReadFile(), {"path": path}),
        (WriteToFile(), {"path": path, "content": "x"}),
        (EditFile(), {"path": path, "edits": [{"search": "a", "replace": "b"}]}),
        (ListFiles(), {"path": path}),
        (SearchFiles(), {"regex": "x", "path": path}),
        (ReadNotebook(tracker), {"path": path + ".ipynb"}),
        (InsertCell(tracker), {"path": path + ".ipynb", "source": "1"}),
    ]
    for tool, args in calls:
        with pytest.raises(ToolError):
            await tool.execute(ctx, args)
    policy = ApprovalPolicy(ApprovalSettings(always_allow_write=True))
    verdict = policy.decide(
        WriteToFile(), {"path": path, "content": "x"}, task_id="t", workspace=tree
    )
    assert verdict.decision in (Decision.DENY, Decision.ASK, Decision.APPROVE)
    assert Workspace(tree).is_protected(path) in (True, False)
    await WriteToFile().preview(ctx, {"path": path, "content": "x"})


# ---- names that are not UTF-8 -------------------------------------------------------


async def test_names_that_are_not_utf8_are_shown_escaped_and_usable(tree: Path) -> None:
    raw = os.fsencode(tree) + b"/report\xff.csv"
    write_raw(raw, b"a,b\n1,caf\xe9\n")
    os.mkdir(os.fsencode(tree) + b"/dir\xfe")
    ctx = RecordingContext(tree)
    listing = text_of(await ListFiles().execute(ctx, {"recursive": True}))
    msgspec.json.encode(listing)  # encodable: no lone surrogates
    assert "report\\xff.csv" in listing and "dir\\xfe/" in listing

    found = text_of(await SearchFiles().execute(ctx, {"regex": "caf"}))
    msgspec.json.encode(found)
    assert "report\\xff.csv" in found

    read = text_of(await ReadFile().execute(ctx, {"path": "report\\xff.csv"}))
    msgspec.json.encode(read)
    assert "report\\xff.csv" in read and "1,caf" in read

    await WriteToFile().execute(ctx, {"path": "dir\\xfe/out.txt", "content": "ok\n"})
    assert read_raw(os.fsencode(tree) + b"/dir\xfe/out.txt") == b"ok\n"
    # A name that really holds a backslash and an "x" keeps its meaning.
    (tree / "lit\\xff.txt").write_text("literal\n")
    listing = text_of(await ListFiles().execute(ctx, {}))
    shown = next(line for line in listing.splitlines() if line.startswith("lit"))
    name = shown.split("  ")[0]
    assert "literal" in text_of(await ReadFile().execute(ctx, {"path": name}))


async def test_notebook_tools_take_names_that_are_not_utf8(tree: Path) -> None:
    ctx = RecordingContext(tree)
    tracker = NotebookTracker()
    created = text_of(
        await InsertCell(tracker).execute(ctx, {"path": "nb\\xff.ipynb", "source": "1 + 1"})
    )
    msgspec.json.encode(created)
    assert "nb\\xff.ipynb" in created
    assert read_raw(os.fsencode(tree) + b"/nb\xff.ipynb") is not None
    read = text_of(await ReadNotebook(tracker).execute(ctx, {"path": "nb\\xff.ipynb"}))
    msgspec.json.encode(read)
    assert "1 + 1" in read


# ---- notebook tools and protected paths -----------------------------------------------


@pytest.mark.parametrize("path", [".git/x.ipynb", ".hdsp/x.ipynb", "locked/x.ipynb"])
def test_notebook_writes_to_protected_paths_ask(tree: Path, path: str) -> None:
    policy = ApprovalPolicy(
        ApprovalSettings(
            always_allow_write=True, always_allow_execute=True, protected_paths=["locked/"]
        )
    )
    tracker = NotebookTracker()
    for tool, args in (
        (InsertCell(tracker), {"path": path, "source": "x"}),
        (EditCell(tracker), {"path": path, "index": 0, "source": "x"}),
        (DeleteCell(tracker), {"path": path, "index": 0}),
        (RunCell(tracker), {"path": path, "index": 0}),
    ):
        verdict = policy.decide(tool, args, task_id="t", workspace=tree)
        assert (verdict.decision, verdict.protected) == (Decision.ASK, True), tool.name
        assert "protected" in verdict.reason
    plain = policy.decide(InsertCell(tracker), {"path": "ok.ipynb", "source": "x"}, task_id="t")
    assert plain.decision is Decision.APPROVE
    read = policy.decide(ReadNotebook(tracker), {"path": path}, task_id="t", workspace=tree)
    assert read.decision is Decision.APPROVE


def test_notebook_writes_outside_or_hidden_are_denied_up_front(tree: Path) -> None:
    (tree / ".hdspignore").write_text("private/\n")
    (tree / "escape").symlink_to(tree.parent / "outside")
    policy = ApprovalPolicy(ApprovalSettings(always_allow_write=True))
    for path in ("../x.ipynb", "escape/x.ipynb", "private/x.ipynb"):
        verdict = policy.decide(
            InsertCell(NotebookTracker()),
            {"path": path, "source": "x"},
            task_id="t",
            workspace=tree,
        )
        assert verdict.decision is Decision.DENY, path


async def test_notebook_tools_refuse_a_symlink_out(tree: Path) -> None:
    (tree / "escape").symlink_to(tree.parent / "outside")
    ctx = RecordingContext(tree)
    with pytest.raises(OutsideWorkspaceError):
        await InsertCell(NotebookTracker()).execute(ctx, {"path": "escape/x.ipynb", "source": "1"})
    assert not (tree.parent / "outside" / "x.ipynb").exists()


# ---- modes of what the agent creates ---------------------------------------------------


@pytest.fixture
def umask() -> Iterator[Any]:
    """Set the process umask for a test, and restore it after."""
    saved = os.umask(0o022)
    os.umask(saved)

    def set_umask(value: int) -> None:
        os.umask(value)

    try:
        yield set_umask
    finally:
        os.umask(saved)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
async def test_created_files_and_notebooks_honour_the_umask(
    tree: Path, umask: Any, mask: int, expected: int
) -> None:
    umask(mask)
    ctx = RecordingContext(tree)
    tracker = NotebookTracker()
    await WriteToFile().execute(ctx, {"path": "new/dir/a.txt", "content": "a\n"})
    await InsertCell(tracker).execute(ctx, {"path": "n.ipynb", "source": "1"})
    assert _mode(tree / "new" / "dir" / "a.txt") == expected
    assert _mode(tree / "n.ipynb") == expected
    assert _mode(tree / "new" / "dir") == 0o777 & ~mask
    # Replacing a file keeps its mode, whatever the umask.
    (tree / "a.txt").write_text("old\n")
    os.chmod(tree / "a.txt", 0o640)
    await WriteToFile().execute(ctx, {"path": "a.txt", "content": "new\n"})
    await EditFile().execute(ctx, {"path": "a.txt", "edits": [{"search": "new", "replace": "x"}]})
    assert _mode(tree / "a.txt") == 0o640
    await ReadNotebook(tracker).execute(ctx, {"path": "n.ipynb"})
    os.chmod(tree / "n.ipynb", 0o604)
    await InsertCell(tracker).execute(ctx, {"path": "n.ipynb", "source": "2"})
    assert _mode(tree / "n.ipynb") == 0o604
    # No temporary files are left behind.
    assert names_in(tree) == ["a.txt", "n.ipynb", "new"]


def test_renameat2_is_available_here(tmp_path: Path) -> None:
    """The swapper above needs RENAME_EXCHANGE; say so plainly if the FS lacks it."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").symlink_to(tmp_path / "a")
    try:
        _exchange(tmp_path / "a", tmp_path / "b")
    except OSError as exc:  # pragma: no cover - depends on the file system
        assert exc.errno in (errno.EINVAL, errno.ENOSYS)
        pytest.skip("RENAME_EXCHANGE is not supported here")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_dir()


async def test_content_that_is_not_unicode_is_a_tool_error(tree: Path) -> None:
    ctx = RecordingContext(tree)
    with pytest.raises(ToolError, match="not a Unicode character"):
        await WriteToFile().execute(ctx, {"path": "a.txt", "content": "x\ud800y"})
    (tree / "b.txt").write_text("old\n")
    with pytest.raises(ToolError, match="not a Unicode character"):
        await EditFile().execute(
            ctx, {"path": "b.txt", "edits": [{"search": "old", "replace": "\udcff"}]}
        )
    assert names_in(tree) == ["b.txt"]
