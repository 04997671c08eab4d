"""Workspace confinement on a real directory tree: every way out is refused,
`.hdspignore` hides paths from every tool, protected paths are reported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hdsp.daemon.tools import (
    IgnoredPathError,
    ListFiles,
    OutsideWorkspaceError,
    PathNotFoundError,
    ReadFile,
    SearchFiles,
    ToolError,
    Workspace,
    WriteToFile,
)
from tests.support.tool_context import RecordingContext


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ (the workspace) beside outside/ (which must stay out of reach)."""
    root = tmp_path.resolve() / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "sales.csv").write_text("region,amount\nnorth,10\n")
    (root / "notes.txt").write_text("hello\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    return root


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "..", "data/../../outside/secret.txt", "./../root/../outside"],
)
def test_dot_dot_out_of_the_root_is_refused(tree: Path, path: str) -> None:
    ws = Workspace(tree)
    with pytest.raises(OutsideWorkspaceError, match="outside the workspace"):
        ws.resolve(path)
    with pytest.raises(OutsideWorkspaceError):
        ws.resolve_for_write(path)


def test_dot_dot_that_stays_inside_is_fine(tree: Path) -> None:
    assert Workspace(tree).resolve("data/../notes.txt") == tree / "notes.txt"


def test_absolute_paths(tree: Path) -> None:
    ws = Workspace(tree)
    with pytest.raises(OutsideWorkspaceError):
        ws.resolve(str(tree.parent / "outside" / "secret.txt"))
    with pytest.raises(OutsideWorkspaceError):
        ws.resolve("/etc/passwd")
    assert ws.resolve(str(tree / "data" / "sales.csv")) == tree / "data" / "sales.csv"
    assert ws.resolve(str(tree)) == tree


def test_a_symlink_out_of_the_root_is_refused(tree: Path) -> None:
    (tree / "escape").symlink_to(tree.parent / "outside")
    (tree / "secret-link.txt").symlink_to(tree.parent / "outside" / "secret.txt")
    ws = Workspace(tree)
    for path in ("escape/secret.txt", "escape", "secret-link.txt"):
        with pytest.raises(OutsideWorkspaceError, match="symbolic link"):
            ws.resolve(path)
        with pytest.raises(OutsideWorkspaceError):
            ws.resolve_for_write(path)
    # A new file through the link would land outside too.
    with pytest.raises(OutsideWorkspaceError):
        ws.resolve_for_write("escape/new.txt")


def test_a_symlink_inside_the_root_is_fine(tree: Path) -> None:
    (tree / "alias").symlink_to(tree / "data")
    ws = Workspace(tree)
    assert ws.resolve("alias/sales.csv") == tree / "data" / "sales.csv"
    assert ws.resolve_for_write("alias/new.csv") == tree / "data" / "new.csv"


def test_a_root_named_through_a_symlink_accepts_both_spellings(tree: Path) -> None:
    link = tree.parent / "root-link"
    link.symlink_to(tree)
    ws = Workspace(link)
    assert ws.root == tree
    assert ws.resolve(str(link / "notes.txt")) == tree / "notes.txt"
    assert ws.resolve(str(tree / "notes.txt")) == tree / "notes.txt"


def test_hdspignore_hides_paths_and_refuses_writes(tree: Path) -> None:
    (tree / "secrets").mkdir()
    (tree / "secrets" / "db.txt").write_text("password\n")
    (tree / "api.key").write_text("k\n")
    (tree / ".hdspignore").write_text("secrets/\n*.key\n")
    (tree / "peek").symlink_to(tree / "secrets")
    ws = Workspace(tree)
    for path in ("secrets", "secrets/db.txt", "api.key", "data/other.key", "peek/db.txt"):
        with pytest.raises(PathNotFoundError, match="No such file"):
            ws.resolve(path)
        with pytest.raises(IgnoredPathError, match=r"\.hdspignore"):
            ws.resolve_for_write(path)
    assert ws.resolve("notes.txt") == tree / "notes.txt"


def test_hdspignore_is_read_again_when_it_changes(tree: Path) -> None:
    ws = Workspace(tree)
    assert ws.resolve("notes.txt") == tree / "notes.txt"
    (tree / ".hdspignore").write_text("notes.txt\n")
    with pytest.raises(PathNotFoundError):
        ws.resolve("notes.txt")
    (tree / ".hdspignore").write_text("# nothing hidden any more\n")
    assert ws.resolve("notes.txt") == tree / "notes.txt"
    (tree / ".hdspignore").unlink()
    assert ws.resolve("notes.txt") == tree / "notes.txt"


def test_a_negation_cannot_bring_back_a_file_of_a_hidden_directory(tree: Path) -> None:
    (tree / "secrets").mkdir()
    (tree / "secrets" / "keep.txt").write_text("x\n")
    (tree / ".hdspignore").write_text("secrets/\n!secrets/keep.txt\n")
    with pytest.raises(PathNotFoundError):
        Workspace(tree).resolve("secrets/keep.txt")


async def test_ignored_files_are_invisible_to_read_list_and_search(tree: Path) -> None:
    (tree / "secrets").mkdir()
    (tree / "secrets" / "db.txt").write_text("needle password\n")
    (tree / "data" / "private.csv").write_text("needle,1\n")
    (tree / "data" / "public.csv").write_text("needle,2\n")
    (tree / ".hdspignore").write_text("secrets/\nprivate.csv\n")
    ctx = RecordingContext(tree)

    with pytest.raises(ToolError) as hidden:
        await ReadFile().execute(ctx, {"path": "secrets/db.txt"})
    with pytest.raises(ToolError) as missing:
        await ReadFile().execute(ctx, {"path": "secrets/nothing.txt"})
    # Hidden and missing look exactly alike, apart from the path named.
    assert str(hidden.value).replace("db", "nothing") == str(missing.value)

    listing = await ListFiles().execute(ctx, {"path": ".", "recursive": True})
    text = listing.content[0].text  # type: ignore[union-attr]
    assert "data/public.csv" in text
    assert "secrets" not in text and "private.csv" not in text
    with pytest.raises(PathNotFoundError):
        await ListFiles().execute(ctx, {"path": "secrets"})

    found = await SearchFiles().execute(ctx, {"regex": "needle"})
    text = found.content[0].text  # type: ignore[union-attr]
    assert "data/public.csv" in text
    assert "secrets" not in text and "private.csv" not in text and "password" not in text
    with pytest.raises(PathNotFoundError):
        await SearchFiles().execute(ctx, {"regex": "needle", "path": "secrets/db.txt"})

    with pytest.raises(IgnoredPathError):
        await WriteToFile().execute(ctx, {"path": "secrets/new.txt", "content": "x"})
    assert not (tree / "secrets" / "new.txt").exists()


async def test_tools_refuse_paths_outside(tree: Path) -> None:
    ctx = RecordingContext(tree)
    with pytest.raises(OutsideWorkspaceError):
        await ReadFile().execute(ctx, {"path": "../outside/secret.txt"})
    with pytest.raises(OutsideWorkspaceError):
        await WriteToFile().execute(ctx, {"path": "../outside/evil.txt", "content": "x"})
    assert not (tree.parent / "outside" / "evil.txt").exists()
    with pytest.raises(OutsideWorkspaceError):
        await ListFiles().execute(ctx, {"path": str(tree.parent)})


async def test_listings_skip_symlinks_that_lead_out(tree: Path) -> None:
    (tree / "escape").symlink_to(tree.parent / "outside")
    (tree / "alias").symlink_to(tree / "data")
    listing = await ListFiles().execute(RecordingContext(tree), {"recursive": True})
    text = listing.content[0].text  # type: ignore[union-attr]
    assert "escape" not in text
    assert "alias/" in text  # listed, but not entered: no loops
    assert "alias/sales.csv" not in text


def test_protected_paths(tree: Path) -> None:
    (tree / ".git").mkdir()
    (tree / "sub" / ".git").mkdir(parents=True)
    ws = Workspace(tree, protected=["*.lock", "/config/"])
    for path in (
        ".hdspignore",
        ".git/config",
        ".git",
        "sub/.git/HEAD",
        ".hdsp/settings.json",
        "poetry.lock",
        "deps/uv.lock",
        "config/app.toml",
        "../outside/x",
    ):
        assert ws.is_protected(path), path
    for path in ("notes.txt", "data/sales.csv", "src/config/app.toml", "git/notes"):
        assert not ws.is_protected(path), path
    (tree / "dot-git").symlink_to(tree / ".git")
    assert ws.is_protected("dot-git/config")


def test_walk_is_breadth_first_and_skips_noise(tree: Path) -> None:
    (tree / "data" / "deep" / "deeper").mkdir(parents=True)
    (tree / "data" / "deep" / "deeper" / "x.txt").write_text("x")
    (tree / ".git" / "objects").mkdir(parents=True)
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__" / "m.pyc").write_bytes(b"\0")
    ws = Workspace(tree)
    seen = [e.relative for e in ws.walk(tree, recursive=True)]
    assert seen.index("notes.txt") < seen.index("data/sales.csv") < seen.index("data/deep/deeper")
    assert ".git" in seen and ".git/objects" not in seen
    assert "__pycache__" in seen and "__pycache__/m.pyc" not in seen
    # Started inside a noise directory, a walk sees its content.
    assert [e.relative for e in ws.walk(tree / ".git", recursive=True)] == [".git/objects"]


def test_workspace_is_a_path_like(tree: Path) -> None:
    assert os.fspath(Workspace(tree)) == str(tree)


def test_a_workspace_that_is_gone_says_so(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="is not a directory"):
        Workspace(tmp_path / "gone")
