"""Checkpoints (issue 20) through the real loop: a scripted model writes, edits
and deletes files, edits a notebook and runs code in the real daemon; the real
`git` keeps a shadow repository in the daemon's data dir; clients list, diff and
restore checkpoints over ZeroMQ."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import nbformat
import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import (
    Ask,
    CheckpointRestored,
    CheckpointRestoreResult,
    CheckpointSaved,
    ErrorCode,
    MessageEvent,
    RestoreCheckpoint,
    RestoreCheckpointData,
    Say,
    TaskCompleted,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.scripted_turns import call, done, run_task

# Real git, a real daemon (two for the kill -9) and kernels: slow on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ALLOW = {
    "always_allow_write": True,
    "always_allow_command": True,
    "always_allow_execute": True,
    "always_allow_read_only": True,
}


def _git(repo: Path, *args: str) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # (No optional locks: the test's own `git status` must not refresh the index.)
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_OPTIONAL_LOCKS="0")
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True
    ).stdout


def _user_repo_state(repo: Path) -> tuple[bytes, bytes, bytes, bytes]:
    return (
        _git(repo, "rev-parse", "HEAD"),
        (repo / ".git" / "index").read_bytes(),
        _git(repo, "status", "--porcelain=v1", "-uall"),
        _git(repo, "stash", "list"),
    )


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` but the user's own .git folders."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = Path(dirpath) / name
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.csv").write_bytes(b"x,y\r\n1,2\r\n3,4\r\n")
    (ws / "notes.md").write_text("hello world\nsecond line\n")
    (ws / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (ws / "script.sh").chmod(0o755)
    (ws / ".gitignore").write_text("ignored.log\n")
    (ws / "ignored.log").write_text("never in a checkpoint\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("a = 1\nprint(a)"),
        nbformat.v4.new_markdown_cell("# Title"),
    ]
    nbformat.write(nb, ws / "analysis.ipynb")
    # The user's own repository, and a nested one inside the workspace.
    _git(ws, "init", "-q")
    _git(ws, "-c", "user.name=u", "-c", "user.email=u@x", "add", "-A")
    _git(ws, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "user's commit")
    (ws / "notes.md").write_text("hello world\nsecond line\nuncommitted\n")  # a dirty tree
    nested = ws / "vendor" / "lib"
    nested.mkdir(parents=True)
    _git(nested, "init", "-q")
    (nested / "lib.py").write_text("VERSION = 1\n")
    return ws


async def test_a_task_s_changes_are_diffed_and_restored_byte_for_byte(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    before = _files(workspace)
    user_repo = _user_repo_state(workspace)
    nested_repo = _git(workspace / "vendor" / "lib", "status", "--porcelain=v1", "-uall")
    fake_openai.script(
        call("write_to_file", path="new.txt", content="brand new\n"),
        call("edit_file", path="notes.md", edits=[{"search": "second", "replace": "2nd"}]),
        call("execute_command", command="rm data.csv"),
        call("read_notebook", path="analysis.ipynb"),
        call("edit_cell", path="analysis.ipynb", index=0, source="a = 2\nprint(a * 10)"),
        call("write_to_file", path="vendor/lib/lib.py", content="VERSION = 2\n"),
        done(),
    )
    task_id, events = await run_task(client, "change things", workspace, **ALLOW)
    saved = [e.data for e in events if isinstance(e.data, CheckpointSaved)]
    said = [
        e.data.payload[0].message
        for e in events
        if isinstance(e.data, MessageEvent)
        and e.data.payload[0].message.say == Say.CHECKPOINT_SAVED
        and not e.data.payload[0].message.partial
    ]
    # One checkpoint before each change: two writes, an edit, a command, a cell edit.
    assert len(saved) == 5 and len(said) == 5
    assert [s.payload[1].reason for s in saved] == [
        "before write_to_file",
        "before edit_file",
        "before execute_command",
        "before edit_cell",
        "before write_to_file",
    ]
    assert [s.payload[1].message_ts for s in saved] == [m.ts for m in said]
    first = saved[0].payload[1]
    assert any("vendor/lib/" in note for note in first.notes)  # the nested repository
    after = _files(workspace)
    user_repo_after = _user_repo_state(workspace)
    assert user_repo_after[:2] == user_repo[:2]  # HEAD and index bytes as they were
    assert after["new.txt"] == b"brand new\n" and "data.csv" not in after

    listing = await client.list_checkpoints(task_id)
    assert [c.number for c in listing.checkpoints] == [1, 2, 3, 4, 5]
    assert listing.nested == ["vendor/lib/"]  # the user is told what is not kept
    assert listing.checkpoints[1].changed == ["new.txt"]
    assert listing.checkpoints[2].changed == ["notes.md"]

    diff = await client.diff_checkpoints(task_id, 1)
    by_path = {f.path: f for f in diff.files}
    assert by_path["new.txt"].status == "added" and "+brand new" in by_path["new.txt"].diff
    assert by_path["notes.md"].status == "modified" and "+2nd line" in by_path["notes.md"].diff
    assert by_path["data.csv"].status == "deleted"
    nb_change = by_path["analysis.ipynb"]
    assert nb_change.notebook and "cell 0 (code) changed" in nb_change.diff
    assert "-a = 1" in nb_change.diff and "+a = 2" in nb_change.diff
    assert '"cell_type"' not in nb_change.diff  # no JSON noise
    assert "ignored.log" not in by_path and not any(p.startswith("vendor/") for p in by_path)
    assert diff.nested == ["vendor/lib/"]
    between = await client.diff_checkpoints(task_id, 2, 3)
    assert [f.path for f in between.files] == ["notes.md"]

    result = await client.restore_checkpoint(task_id, 1)
    assert result.undo_checkpoint == 6 and result.nested == ["vendor/lib/"]
    restored = _files(workspace)
    # Every file back byte for byte (the deleted one back, the new one gone), but
    # the nested repository's, which checkpoints leave to its own git.
    restored_nested = restored.pop("vendor/lib/lib.py")
    after_nested = after.pop("vendor/lib/lib.py")
    assert restored_nested == after_nested == b"VERSION = 2\n"
    before.pop("vendor/lib/lib.py")
    assert restored == before
    assert os.access(workspace / "script.sh", os.X_OK)
    assert _user_repo_state(workspace) == user_repo
    assert _git(workspace / "vendor" / "lib", "status", "--porcelain=v1", "-uall") == nested_repo

    # The restore is undone by restoring the checkpoint it took first.
    await client.restore_checkpoint(task_id, 6)
    assert _files(workspace) == {**after, "vendor/lib/lib.py": after_nested}
    assert _user_repo_state(workspace) == user_repo_after
    snap = await client.get_task(task_id)
    assert any(m.say == Say.CHECKPOINT_RESTORED for m in snap.messages)


async def test_history_restore_rewinds_to_the_checkpoint_s_message(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("write_to_file", path="one.txt", content="1\n"),
        call("write_to_file", path="two.txt", content="2\n"),
        done(),
    )
    task_id, _ = await run_task(client, "two files", workspace, **ALLOW)
    first, second = (await client.list_checkpoints(task_id)).checkpoints
    assert first.message_ts is not None and second.message_ts is not None

    # History only: the files stay as they are.
    result = await client.restore_checkpoint(task_id, 2, restore="history")
    assert result.rewound and result.files == [] and result.undo_checkpoint is None
    assert (workspace / "one.txt").exists() and (workspace / "two.txt").exists()
    snap = await client.get_task(task_id)
    later = [m.say for m in snap.messages if m.ts >= second.message_ts]
    # The history ends before the checkpoint's message; what the restore said follows.
    assert later == [Say.CHECKPOINT_RESTORED]

    # Both, to the first checkpoint: its files and its place in the history.
    result = await client.restore_checkpoint(task_id, 1, restore="both")
    assert result.rewound and result.files == ["one.txt", "two.txt"]
    assert not (workspace / "one.txt").exists() and not (workspace / "two.txt").exists()
    snap = await client.get_task(task_id)
    later = [m.say for m in snap.messages if m.ts >= first.message_ts]
    assert later == [Say.CHECKPOINT_SAVED, Say.CHECKPOINT_RESTORED]


async def test_a_home_directory_workspace_is_refused_for_checkpoints(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    daemon_process.extra_env["HOME"] = str(home)
    daemon_process.start()
    fake_openai.script(call("write_to_file", path="x.txt", content="x"), done())
    async with connect(daemon_process.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task(
            "write at home", workspace=home, approvals=ALLOW, allow_broad_workspace=True
        )
        task_id = ref.task_id
        await collect_turn(client, task_id, head, until=(TaskCompleted,))
        listing = await client.list_checkpoints(task_id)
        assert not listing.enabled and listing.checkpoints == []
        assert "home directory" in (listing.note or "")
        snap = await client.get_task(task_id)
        assert any(m.say == Say.ERROR and "home directory" in (m.text or "") for m in snap.messages)
    assert (home / "x.txt").read_text() == "x"
    assert not (home / ".git").exists()


async def _answer_replay(
    client: Client, task_id: str, since: int, approve: bool
) -> list[dict[str, object]]:
    """Wait for the replay ask (after the event `since`) and answer it; returns
    the cells it showed."""
    async with client.events(task_id, since_seq=since) as events:
        async for event in events:
            if not isinstance(event.data, MessageEvent):
                continue
            m = event.data.payload[0].message
            if m.type == "ask" and m.ask == Ask.TOOL and '"replay_kernel"' in (m.text or ""):
                cells: list[dict[str, object]] = json.loads(m.text or "{}")["cells"]
                answer = "yesButtonClicked" if approve else "noButtonClicked"
                await client.respond_to_ask(task_id, m.ts, answer)
                return cells
    raise AssertionError("no replay ask")


async def _restore_with_kernel(
    client: Client, task_id: str, number: int, skip: tuple[int, ...] = ()
) -> tuple[CheckpointRestoreResult, list[dict[str, object]]]:
    shown: list[list[dict[str, object]]] = []
    head = (await client.status()).head_seq

    async def answer() -> None:
        shown.append(await _answer_replay(client, task_id, head, True))

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        result = await client.request(
            RestoreCheckpoint(
                data=RestoreCheckpointData(
                    task_id=task_id, checkpoint=number, with_kernel=True, skip=list(skip)
                )
            )
        )
    return result, shown[0]


async def test_kernel_state_comes_back_by_replay_and_a_failing_cell_stops_it(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    (workspace / ".hdspignore").write_text("flag.txt\n")
    (workspace / "flag.txt").write_text("present")
    build = "import pandas as pd\ndf = pd.DataFrame({'a': [1], 'b': ['x']})"
    fake_openai.script(
        call("execute_code", code=build),
        call("execute_code", code="df.loc[len(df)] = [2, 'y']"),
        call("execute_code", code="flag = open('flag.txt').read()"),
        call("execute_code", code="df.loc[len(df)] = [3, 'z']\ndf['a'] *= 10\nprint(df)"),
        done(),
    )
    task_id, _ = await run_task(client, "build df", workspace, **ALLOW)
    cps = (await client.list_checkpoints(task_id)).checkpoints
    assert [c.executions for c in cps] == [0, 1, 2, 3]

    # The DataFrame as the agent left it.
    kernels = await client.list_kernels()
    (kernel,) = [k for k in kernels.kernels if task_id in (k.task_ids or [])]
    show = "print(df.to_dict('list'))"
    value = await client.execute_code(kernel.kernel_id, show)
    left = "".join(o.text or "" for o in value.outputs)
    assert "{'a': [10, 20, 30], 'b': ['x', 'y', 'z']}" in left

    # Checkpoint 3 was taken before the third execution: df has two rows.
    result, cells = await _restore_with_kernel(client, task_id, 3)
    assert [c["code"] for c in cells] == [build, "df.loc[len(df)] = [2, 'y']"]
    assert result.kernel is not None and result.kernel.failed_at is None
    assert [e.status for e in result.kernel.executions] == ["ok", "ok"]
    variables = {v.name: v for v in result.kernel.variables}
    assert variables["df"].type == "DataFrame"
    kernels = await client.list_kernels()
    (kernel,) = [k for k in kernels.kernels if task_id in (k.task_ids or [])]
    value = await client.execute_code(kernel.kernel_id, show)
    restored_df = "".join(o.text or "" for o in value.outputs)
    assert "{'a': [1, 2], 'b': ['x', 'y']}" in restored_df  # by value

    # Replaying up to checkpoint 4 meets the third cell, which cannot run now.
    (workspace / "flag.txt").unlink()
    result, cells = await _restore_with_kernel(client, task_id, 4)
    assert result.kernel is not None
    assert result.kernel.failed_at == 3 and "FileNotFoundError" in (result.kernel.error or "")
    assert [e.status for e in result.kernel.executions] == ["ok", "ok", "error"]
    snap = await client.get_task(task_id)
    restored = [m for m in snap.messages if m.say == Say.CHECKPOINT_RESTORED]
    assert "stopped at execution 3" in (restored[-1].text or "")

    # Skipping that cell (the user marks it not replayable) gets past it.
    result, cells = await _restore_with_kernel(client, task_id, 4, skip=(3,))
    assert result.kernel is not None and result.kernel.failed_at is None
    assert [e.status for e in result.kernel.executions] == ["ok", "ok", "skipped"]


async def test_checkpoints_survive_a_kill_9_and_restore_after_it(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    original = (workspace / "notes.md").read_bytes()
    fake_openai.script(
        call("write_to_file", path="notes.md", content="overwritten\n"),
        done(),
    )
    async with connect(daemon.runtime_dir) as client:
        task_id, _ = await run_task(client, "overwrite", workspace, **ALLOW)
    daemon.kill()
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        listing = await client.list_checkpoints(task_id)
        assert [c.reason for c in listing.checkpoints] == ["before write_to_file"]
        result = await client.restore_checkpoint(task_id, 1)
        assert result.files == ["notes.md"] and result.undo_checkpoint == 2
        assert (workspace / "notes.md").read_bytes() == original
        with pytest.raises(CommandFailed):
            await client.restore_checkpoint(task_id, 99)


async def test_a_replay_ask_pending_at_a_kill_9_is_asked_again_and_the_replay_completes(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("execute_code", code="df = {'a': [1]}"),
        call("execute_code", code="df['a'].append(2)"),
        call("execute_code", code="df['a'].append(3)"),
        done(),
    )
    async with connect(daemon.runtime_dir) as client:
        task_id, _ = await run_task(client, "build df", workspace, **ALLOW)
        result = await client.request(
            RestoreCheckpoint(
                data=RestoreCheckpointData(
                    task_id=task_id, checkpoint=3, with_kernel=True, wait_for_replay=False
                )
            )
        )
        assert result.replay_pending and result.kernel is None and result.undo_checkpoint == 4
        snap = await client.get_task(task_id)
        (ask,) = [m for m in snap.messages if m.type == "ask" and not m.is_answered]
        assert '"replay_kernel"' in (ask.text or "")
        # A second restore while the first one's replay waits is refused, clearly.
        with pytest.raises(CommandFailed) as refused:
            await client.restore_checkpoint(task_id, 1)
        assert refused.value.code == ErrorCode.INVALID_STATE
        assert "waits for the approval" in str(refused.value)
        before_kill = (await client.status()).head_seq
    daemon.kill()
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        # The ask is posted again (published anew, still unanswered) ...
        async with client.events(task_id, since_seq=before_kill) as events:
            async for event in events:
                if isinstance(event.data, MessageEvent):
                    m = event.data.payload[0].message
                    if m.ts == ask.ts and not m.is_answered:
                        break
        cells = json.loads(ask.text or "{}")["cells"]
        assert [c["code"] for c in cells] == ["df = {'a': [1]}", "df['a'].append(2)"]
        # ... and answering it replays the kernel and finishes the restore.
        head = (await client.status()).head_seq
        await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
        events_seen = await collect_turn(client, task_id, head, until=(CheckpointRestored,))
        restored = [e.data for e in events_seen if isinstance(e.data, CheckpointRestored)]
        assert restored[0].payload[1].number == 3
        snap = await client.get_task(task_id)
        said = [m for m in snap.messages if m.say == Say.CHECKPOINT_RESTORED]
        assert "kernel replayed 2 execution(s); variables: df" in (said[-1].text or "")
        kernels = await client.list_kernels()
        (kernel,) = [k for k in kernels.kernels if task_id in (k.task_ids or [])]
        value = await client.execute_code(kernel.kernel_id, "print(df['a'])")
        assert "[1, 2]" in "".join(o.text or "" for o in value.outputs)
        # Nothing waits any more: the next restore goes through.
        assert (await client.restore_checkpoint(task_id, 1)).checkpoint == 1
    daemon.kill()
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        snap = await client.get_task(task_id)
        assert not [m for m in snap.messages if m.type == "ask" and not m.is_answered]


async def test_checkpoints_off_in_the_settings_take_none(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings({"checkpoints": {"enabled": False}})
    fake_openai.script(call("write_to_file", path="x.txt", content="x"), done())
    task_id, events = await run_task(client, "write", workspace, **ALLOW)
    assert not [e for e in events if isinstance(e.data, CheckpointSaved)]
    listing = await client.list_checkpoints(task_id)
    assert listing.checkpoints == [] and not listing.enabled
    assert "checkpoints.enabled" in (listing.note or "")
    assert (workspace / "x.txt").read_text() == "x"


async def test_a_cell_marked_no_replay_is_skipped_with_a_note(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("execute_code", code="x = 1"),
        call("execute_code", code="# hdsp: no-replay\ny = 2"),
        call("execute_code", code="x += 1"),
        done(),
    )
    task_id, _ = await run_task(client, "count", workspace, **ALLOW)
    result, cells = await _restore_with_kernel(client, task_id, 3)
    assert [c.get("skip") for c in cells] == [None, "skipped: marked `# hdsp: no-replay`"]
    assert result.kernel is not None and result.kernel.failed_at is None
    assert [(e.status, e.note) for e in result.kernel.executions] == [
        ("ok", None),
        ("skipped", "skipped: marked `# hdsp: no-replay`"),
    ]
    variables = {v.name: v.summary for v in result.kernel.variables}
    assert variables == {"x": "1"}  # the restored kernel's variables, listed


async def test_the_daemon_s_own_folders_inside_the_workspace_are_never_checkpointed_nor_restored(
    daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    # A workspace that holds hdspd's data dir (its database, settings and the
    # shadow repositories themselves) and its runtime dir.
    workspace = daemon.data_dir.parent
    assert daemon.runtime_dir.parent == workspace
    (workspace / ".hdspignore").write_text("hdspd.stderr\n")  # (the test's log of hdspd)
    fake_openai.script(
        call("write_to_file", path="one.txt", content="1\n"),
        call("write_to_file", path="one.txt", content="2\n"),
        done(),
    )
    async with connect(daemon.runtime_dir) as client:
        task_id, _ = await run_task(client, "write twice", workspace, **ALLOW)
        first, second = (await client.list_checkpoints(task_id)).checkpoints
        assert first.changed == [".hdspignore"] and second.changed == ["one.txt"]
        result = await client.restore_checkpoint(task_id, 1)
        assert result.files == ["one.txt"]
        assert not (workspace / "one.txt").exists()
        # The daemon's database was left alone: it still answers, with all of it.
        numbers = [c.number for c in (await client.list_checkpoints(task_id)).checkpoints]
        assert numbers == [1, 2, 3]
