"""The shadow repository with the real git: it never reads or writes the user's
repository (whatever GIT_* the environment says), leaves out nested
repositories, ignored and oversized files with notes, refuses the home
directory, and restores byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from hdsp.daemon.checkpoints import ShadowRepo, WorkspaceRefused, refusal


def _git(repo: Path, *args: str) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_OPTIONAL_LOCKS="0")
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=u", "-c", "user.email=u@x", *args],
        env=env,
        check=True,
        capture_output=True,
    ).stdout


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    (ws / ".gitignore").write_text("*.log\n")
    (ws / ".hdspignore").write_text("secret/\n")
    (ws / "x.log").write_text("log\n")
    (ws / "secret").mkdir()
    (ws / "secret" / "k").write_text("k")
    _git(ws, "init", "-q")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "user")
    return ws


async def test_the_environment_s_git_variables_never_reach_the_user_s_repository(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_DIR", str(workspace / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(workspace))
    monkeypatch.setenv("GIT_INDEX_FILE", str(workspace / ".git" / "index"))
    head, index = _git(workspace, "rev-parse", "HEAD"), (workspace / ".git" / "index").read_bytes()
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=3)
    (workspace / "big.bin").write_bytes(b"12345")
    saved = await repo.save("one")
    assert saved.changed == ["a.txt"]  # the rest is over the 3-byte limit
    assert any("big.bin" in note and "size limit" in note for note in saved.notes)
    assert _git(workspace, "rev-parse", "HEAD") == head
    assert (workspace / ".git" / "index").read_bytes() == index
    assert repo.git_dir.is_relative_to(tmp_path / "data")
    # Nothing changed: no new commit.
    assert (await repo.save("two")).commit == saved.commit


async def test_a_nested_repository_is_left_to_its_own_git(workspace: Path, tmp_path: Path) -> None:
    nested = workspace / "sub"
    nested.mkdir()
    _git(nested, "init", "-q")
    (nested / "n.txt").write_text("n")
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    saved = await repo.save("one")
    assert any(note.startswith("sub/ is a git repository") for note in saved.notes)
    (nested / "n.txt").write_text("changed")
    assert (await repo.save("two")).changed == []
    assert (nested / ".git" / "HEAD").exists()


async def test_restore_brings_files_back_and_removes_new_ones(
    workspace: Path, tmp_path: Path
) -> None:
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    first = await repo.save("one")
    (workspace / "a.txt").write_bytes(b"\x00binary\r\n")
    (workspace / "new.txt").write_text("new")
    (workspace / "dir").mkdir()
    (workspace / "dir" / "deep.txt").write_text("deep")
    await repo.save("two")
    changed = await repo.restore(first.commit)
    assert sorted(changed) == ["a.txt", "dir/deep.txt", "new.txt"]
    assert (workspace / "a.txt").read_text() == "a\n"
    assert not (workspace / "new.txt").exists() and not (workspace / "dir").exists()
    assert (workspace / "x.log").read_text() == "log\n"  # ignored: never touched
    assert (workspace / "secret" / "k").read_text() == "k"


def test_home_desktop_documents_and_root_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for place in (tmp_path, tmp_path / "Desktop", tmp_path / "Documents", Path("/")):
        assert refusal(place) is not None, place
    assert refusal(tmp_path / "project") is None


async def test_opening_a_refused_workspace_raises_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    repo = ShadowRepo(tmp_path / ".local" / "hdsp", tmp_path, max_file_bytes=1)
    with pytest.raises(WorkspaceRefused, match="home directory"):
        await repo.save("x")
    assert not (tmp_path / ".git").exists()


async def test_a_file_grown_over_the_limit_is_never_overwritten_by_a_restore(
    workspace: Path, tmp_path: Path
) -> None:
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=100)
    (workspace / "data.bin").write_bytes(b"small")
    first = await repo.save("one")
    (workspace / "data.bin").write_bytes(b"x" * 500)  # its present content: in no checkpoint
    (workspace / "a.txt").write_text("changed\n")
    saved = await repo.save("two")
    assert any("data.bin" in note for note in saved.notes)
    assert await repo.restore(first.commit) == ["a.txt"]
    assert (workspace / "data.bin").read_bytes() == b"x" * 500
    assert (workspace / "a.txt").read_text() == "a\n"


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under `root`, .git folders included (byte for byte)."""
    found = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


async def test_a_restore_never_touches_a_nested_repository_not_even_one_made_later(
    workspace: Path, tmp_path: Path
) -> None:
    # `lib/` is a plain folder at the first checkpoint; then it becomes a
    # repository of its own, and its files change.
    (workspace / "lib").mkdir()
    (workspace / "lib" / "mod.py").write_text("V = 1\n")
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    first = await repo.save("one")
    assert "lib/mod.py" in first.changed
    _git(workspace / "lib", "init", "-q")
    (workspace / "lib" / "mod.py").write_text("V = 2\n")
    (workspace / "lib" / "new.py").write_text("new\n")
    _git(workspace / "lib", "add", "-A")
    _git(workspace / "lib", "commit", "-qm", "theirs")
    (workspace / "a.txt").write_text("changed\n")
    second = await repo.save("two")
    assert any(note.startswith("lib/ is a git repository") for note in second.notes)
    assert second.changed == ["a.txt"] and repo.nested == {"lib/"}
    nested_before = _tree(workspace / "lib")

    assert await repo.restore(first.commit) == ["a.txt"]
    assert _tree(workspace / "lib") == nested_before  # its files and its .git, as they were
    assert (workspace / "a.txt").read_text() == "a\n"
    assert await repo.changes(first.commit, second.commit) == [("M", "a.txt")]

    # A new ShadowRepo (a daemon restarted) still knows it, from the exclude file.
    again = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    await again.open()
    assert again.nested == {"lib/"}
    assert await again.restore(second.commit) == ["a.txt"]
    assert _tree(workspace / "lib") == nested_before


async def test_a_folder_whose_git_is_gone_is_checkpointed_again(
    workspace: Path, tmp_path: Path
) -> None:
    nested = workspace / "sub"
    nested.mkdir()
    _git(nested, "init", "-q")
    (nested / "n.txt").write_text("n")
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    await repo.save("one")
    assert repo.nested == {"sub/"}
    shutil.rmtree(nested / ".git")
    saved = await repo.save("two")
    assert repo.nested == set() and saved.changed == ["sub/n.txt"]


async def test_gitignore_hdspignore_and_the_settings_patterns_are_never_in_a_checkpoint(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".gitignore").write_text("*.tmp\n")  # a nested .gitignore too
    (workspace / "sub" / "keep.txt").write_text("keep")
    (workspace / "sub" / "scratch.tmp").write_text("scratch")
    (workspace / "model.ckpt").write_text("weights")
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6, exclude=["*.ckpt"])
    saved = await repo.save("one")
    _, listed = await repo.git("ls-tree", "-r", "--name-only", saved.commit)
    kept = set(listed.decode().split())
    assert kept == {".gitignore", ".hdspignore", "a.txt", "sub/.gitignore", "sub/keep.txt"}
    # Changed, they are still not in the next one; nor does a restore touch them.
    for name in ("x.log", "secret/k", "sub/scratch.tmp", "model.ckpt"):
        (workspace / name).write_text("changed")
    (workspace / "a.txt").write_text("changed\n")
    assert (await repo.save("two")).changed == ["a.txt"]
    assert await repo.restore(saved.commit) == ["a.txt"]
    for name in ("x.log", "secret/k", "sub/scratch.tmp", "model.ckpt"):
        assert (workspace / name).read_text() == "changed"


# ---- what the workspace says cannot steer the shadow repository -------------------


async def test_the_workspace_s_gitattributes_neither_change_the_bytes_nor_hide_a_diff(
    workspace: Path, tmp_path: Path
) -> None:
    # A model that can write files could write these: line endings turned on
    # checkout, keywords expanded, an encoding conversion, and diffs hidden.
    (workspace / ".gitattributes").write_text(
        "* text eol=crlf ident\n*.py -diff\n*.csv working-tree-encoding=UTF-16LE-BOM\n"
    )
    (workspace / "code.py").write_bytes(b"x = 1\n")
    (workspace / "ids.txt").write_bytes(b"$Id$\nlf\ncrlf\r\n")
    (workspace / "data.csv").write_bytes(b"a,b\n1,2\n")  # UTF-8, not what it claims
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    first = await repo.save("one")
    assert {"code.py", "ids.txt", "data.csv"} <= set(first.changed)
    saved = {name: (workspace / name).read_bytes() for name in ("code.py", "ids.txt", "data.csv")}
    (workspace / "code.py").write_bytes(b"x = 2  # the agent's change\n")
    second = await repo.save("two")
    diff = await repo.unified_diff(first.commit, second.commit, "code.py")
    assert "+x = 2  # the agent's change" in diff and "Binary files" not in diff
    _, blob = await repo.git("cat-file", "blob", f"{first.commit}:ids.txt")
    assert blob == saved["ids.txt"]
    for name in ("ids.txt", "data.csv"):
        (workspace / name).write_bytes(b"changed\n")
    await repo.save("three")
    assert sorted(await repo.restore(first.commit)) == ["code.py", "data.csv", "ids.txt"]
    for name, data in saved.items():
        assert (workspace / name).read_bytes() == data, name


async def test_a_folder_made_a_link_out_stops_no_checkpoint_and_no_restore_writes_through_it(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("the user's, outside\n")
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside\n")
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    first = await repo.save("one")
    shutil.rmtree(workspace / "d")
    (workspace / "d").symlink_to(outside)
    second = await repo.save("two")
    assert second.commit != first.commit and set(second.changed) == {"d", "d/f.txt"}
    _, mode = await repo.git("ls-tree", second.commit, "d")
    assert mode.startswith(b"120000 ")  # the link itself, never what it points to
    (workspace / "leak").symlink_to(outside / "f.txt")
    third = await repo.save("three")
    assert await repo.show(third.commit, "leak") == os.fsencode(outside / "f.txt")
    assert "the user's, outside" not in await repo.unified_diff(second.commit, third.commit, "leak")
    assert sorted(await repo.restore(first.commit)) == ["d", "d/f.txt", "leak"]
    assert not (workspace / "d").is_symlink()
    assert (workspace / "d" / "f.txt").read_text() == "inside\n"
    assert (outside / "f.txt").read_text() == "the user's, outside\n"
    assert sorted(os.listdir(outside)) == ["f.txt"]


async def test_a_hdspignore_that_is_a_pipe_or_leads_out_of_the_workspace_is_not_read(
    workspace: Path, tmp_path: Path
) -> None:
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    await repo.save("one")
    (workspace / ".hdspignore").unlink()
    os.mkfifo(workspace / ".hdspignore")  # git would wait forever for a writer
    (workspace / "a.txt").write_text("changed\n")
    with anyio.fail_after(30):
        second = await repo.save("two")
    assert "a.txt" in second.changed
    # (It was a file the first checkpoint kept: a pipe now, which git cannot keep.)
    assert ".hdspignore is not a regular file (a pipe, a socket): not saved." in second.notes
    # A link to a file outside: its lines are not patterns (nor read at all).
    (workspace / ".hdspignore").unlink()
    outside = tmp_path / "patterns"
    outside.write_text("a.txt\n")
    (workspace / ".hdspignore").symlink_to(outside)
    (workspace / "a.txt").write_text("changed again\n")
    assert "a.txt" in (await repo.save("three")).changed
    # A regular one is read again when it changes.
    (workspace / ".hdspignore").unlink()
    (workspace / ".hdspignore").write_text("late.txt\n")
    (workspace / "late.txt").write_text("hidden")
    (workspace / "a.txt").write_text("and again\n")
    assert "late.txt" not in (await repo.save("four")).changed


async def test_hdsp_s_own_folders_inside_the_workspace_are_never_in_a_checkpoint(
    workspace: Path, tmp_path: Path
) -> None:
    data = workspace / ".local" / "hdsp"
    repo = ShadowRepo(
        data / "checkpoints", workspace, max_file_bytes=10**6, private=[data, workspace / "run"]
    )
    (workspace / "run").mkdir()
    (workspace / "run" / "discovery.json").write_text("{}")
    first = await repo.save("one")
    assert repo.git_dir.is_relative_to(data)
    _, listed = await repo.git("ls-tree", "-r", "--name-only", first.commit)
    assert not [p for p in listed.decode().split() if p.startswith((".local/", "run/"))]
    (workspace / "a.txt").write_text("changed\n")
    second = await repo.save("two")
    assert second.changed == ["a.txt"]  # not the shadow repository's own new objects
    (workspace / "run" / "discovery.json").write_text('{"new": 1}')
    await repo.restore(first.commit)
    assert (workspace / "run" / "discovery.json").read_text() == '{"new": 1}'


def test_a_workspace_that_holds_the_home_directory_or_lies_in_hdsp_s_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "me"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert "holds your home directory" in (refusal(tmp_path / "home") or "")
    data = home / ".local" / "share" / "hdsp"
    assert "hdsp's own folder" in (refusal(data / "x", private=[data]) or "")
    assert refusal(home / "project", private=[data]) is None


async def test_file_names_are_never_patterns_to_git(workspace: Path, tmp_path: Path) -> None:
    # A file named `*` (or `[ab]`): were names pathspecs, `git add *` would take in
    # the file over the size limit, and a restore of `*` would overwrite it.
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=100)
    (workspace / "data.bin").write_bytes(b"small")
    first = await repo.save("one")
    (workspace / "data.bin").write_bytes(b"x" * 500)
    (workspace / "*").write_text("star\n")
    (workspace / "[ad].txt").write_text("brackets\n")
    second = await repo.save("two")
    assert second.changed == ["*", "[ad].txt"]
    _, blob = await repo.git("cat-file", "blob", f"{second.commit}:data.bin")
    assert blob == b"small"
    assert sorted(await repo.restore(first.commit)) == ["*", "[ad].txt"]
    assert (workspace / "data.bin").read_bytes() == b"x" * 500
    assert not (workspace / "*").exists() and (workspace / "a.txt").read_text() == "a\n"


async def test_no_config_hook_or_fsmonitor_of_a_repository_in_the_workspace_ever_runs(
    workspace: Path, tmp_path: Path
) -> None:
    # The user's repository (the workspace's .git) and a nested one, with what a
    # model could write into them: an fsmonitor command, hooks, a diff driver.
    marker = tmp_path / "ran"
    command = f"touch {marker}; false"
    nested = workspace / "sub"
    nested.mkdir()
    _git(nested, "init", "-q")
    (nested / "n.txt").write_text("n")
    for repo_dir in (workspace / ".git", nested / ".git"):
        with (repo_dir / "config").open("a") as config:
            config.write(
                f'[core]\n\tfsmonitor = "{command}"\n\tpager = "{command}"\n'
                f'[diff]\n\texternal = "{command}"\n[diff "x"]\n\ttextconv = "{command}"\n'
                f'[filter "x"]\n\tclean = "{command}"\n\tsmudge = "{command}"\n'
            )
        for hook in ("pre-commit", "post-commit", "post-checkout", "post-index-change"):
            path = repo_dir / "hooks" / hook
            path.write_text(f"#!/bin/sh\n{command}\n")
            path.chmod(0o755)
    (workspace / ".gitattributes").write_text("* diff=x filter=x\n")
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    first = await repo.save("one")
    (workspace / "a.txt").write_text("changed\n")
    second = await repo.save("two")
    assert "+changed" in await repo.unified_diff(first.commit, second.commit, "a.txt")
    await repo.restore(first.commit)
    assert (workspace / "a.txt").read_text() == "a\n"
    assert not marker.exists()


async def test_a_lock_left_by_a_killed_git_does_not_stop_later_checkpoints(
    workspace: Path, tmp_path: Path
) -> None:
    # git killed hard (the deadline's SIGKILL, or hdspd's whole group killed)
    # leaves its lock files behind; only hdsp uses the shadow repository, and it
    # runs one git at a time on it, so one found there is stale.
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    first = await repo.save("one")
    (repo.git_dir / "index.lock").write_bytes(b"")
    (repo.git_dir / "HEAD.lock").write_text(first.commit + "\n")
    again = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)  # after a restart
    (workspace / "a.txt").write_text("changed\n")
    second = await again.save("two")
    assert second.changed == ["a.txt"]
    (repo.git_dir / "index.lock").write_bytes(b"")  # (and one killed by a deadline)
    (workspace / "a.txt").write_text("changed again\n")
    assert (await again.save("three")).changed == ["a.txt"]
    assert await again.restore(first.commit) == ["a.txt"]


async def test_a_file_gone_between_the_status_and_the_save_is_left_out_without_failing(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database's journal (JupyterLab's collaboration store keeps one in the
    # workspace) comes and goes: `git status` lists it, and it is gone by the
    # time the save stages it. The checkpoint is taken all the same.
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=10**6)
    await repo.save("one")
    journal = workspace / ".jupyter_ystore.db-journal"
    journal.write_bytes(b"journal")
    (workspace / "a.txt").write_text("changed")
    status = repo._status

    async def listed_then_gone() -> list[tuple[str, str]]:
        entries = await status()
        journal.unlink()
        return entries

    monkeypatch.setattr(repo, "_status", listed_then_gone)
    saved = await repo.save("two")
    assert "a.txt" in saved.changed
    assert await repo.show(saved.commit, "a.txt") == b"changed"
    assert await repo.show(saved.commit, journal.name) is None
