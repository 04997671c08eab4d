"""File names a POSIX file system allows, through the real daemon (issue 32,
hole 4): a name that is not UTF-8 once ended hdspd, when the checkpoint taken
before the first approved command could not encode it (`UnicodeEncodeError:
surrogates not allowed` in the journal's writer). Now the daemon stays up, the
task goes on, every client sees the name escaped (`r\\xff.csv`), and a restore
brings the file back under its very bytes."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

from hdsp.client import Client, CommandFailed
from hdsp.protocol import CheckpointSaved, MessageEvent, Say, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.test_mcp_serve_e2e import approved_call, mcp_session, text_of
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.events import collect_turn
from tests.support.model_requests import tool_results
from tests.support.scripted_turns import call, done, start

# A real daemon, its sandbox and git: 2-5 s each (more on a loaded machine).
pytestmark = pytest.mark.timeout(180)

#: The file of the issue, and one whose name would break a line.
RAW = b"r\xff.csv"
NEWLINE = b"two\nlines-\x1b[31m.txt"


def _raw_names(directory: Path) -> set[bytes]:
    return set(os.listdir(os.fsencode(directory)))


async def test_a_name_that_is_not_utf8_neither_stops_the_daemon_nor_the_task(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / os.fsdecode(RAW)).write_bytes(b"a,b\n1,2\n")
    (workspace / os.fsdecode(NEWLINE)).write_bytes(b"x\n")
    fake_openai.script(
        call("execute_command", command="ls"),
        call("list_files", path="."),
        call("read_file", path="r\\xff.csv"),
        call("write_to_file", path="two\\x0alines-\\x1b[31m.txt", content="y\n"),
        done("listed"),
    )
    task_id, head = await start(
        client, "look", workspace, always_allow_command=True, always_allow_write=True
    )
    events = await collect_turn(client, task_id, head)
    assert isinstance(events[-1].data, TaskCompleted), events[-1]
    assert daemon.proc is not None and daemon.proc.poll() is None
    await client.status()  # still answering

    # The checkpoint before the command lists both files, escaped, in its event,
    # its message and the store.
    saved = [e.data.payload[1] for e in events if isinstance(e.data, CheckpointSaved)]
    expected = sorted(["r\\xff.csv", "two\\x0alines-\\x1b[31m.txt"])
    assert [sorted(s.changed) for s in saved] == [expected, []]
    said = [
        e.data.payload[0].message
        for e in events
        if isinstance(e.data, MessageEvent)
        and e.data.payload[0].message.say == Say.CHECKPOINT_SAVED
    ]
    assert said and sorted((said[0].checkpoint or {})["changed"]) == expected
    listing = await client.list_checkpoints(task_id)
    assert sorted(listing.checkpoints[0].changed) == expected

    # The model saw the names escaped, one per line, and could use them.
    listed = tool_results(fake_openai, 2)[-1]
    assert "r\\xff.csv" in listed and "two\\x0alines-\\x1b[31m.txt" in listed
    assert "1,2" in tool_results(fake_openai, 3)[-1]
    assert (workspace / os.fsdecode(NEWLINE)).read_bytes() == b"y\n"
    assert _raw_names(workspace) == {RAW, NEWLINE}  # no file by the escaped spelling

    # The CLI shows them escaped, each on its line (a newline breaks no line).
    short = task_id[:8]
    for args in (("checkpoints", short), ("show", short)):
        r = await run_hdsp(daemon.runtime_dir, *args)
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stdout and "\udcff" not in r.stdout
        assert "two\\x0alines-\\x1b[31m.txt" in r.stdout, r.stdout
        assert not any(line.startswith("lines-") for line in r.stdout.splitlines())
    r = await run_hdsp(daemon.runtime_dir, "checkpoints", short)
    assert any("changed: " in line and "r\\xff.csv" in line for line in r.stdout.splitlines())

    # A restore brings back the very bytes of the names and of the content.
    os.unlink(os.fsencode(workspace) + b"/" + RAW)
    diff = await client.diff_checkpoints(task_id, 1)
    assert {f.path: f.status for f in diff.files} == {
        "r\\xff.csv": "deleted",
        "two\\x0alines-\\x1b[31m.txt": "modified",
    }
    restored = await client.restore_checkpoint(task_id, 1)
    assert sorted(restored.files) == expected
    assert _raw_names(workspace) == {RAW, NEWLINE}
    assert (workspace / os.fsdecode(RAW)).read_bytes() == b"a,b\n1,2\n"
    assert (workspace / os.fsdecode(NEWLINE)).read_bytes() == b"x\n"
    assert daemon.proc.poll() is None


async def test_a_workspace_whose_own_path_is_not_utf8_is_refused_clearly(
    daemon: DaemonProcess, client: Client, tmp_path: Path
) -> None:
    odd = os.fsdecode(os.fsencode(tmp_path) + b"/proj\xff")
    os.mkdir(odd)
    with pytest.raises(CommandFailed, match=r"proj\\xff has a name that is not valid UTF-8"):
        await client.start_task("look", workspace=odd)
    assert daemon.proc is not None and daemon.proc.poll() is None
    await client.status()


async def test_odd_names_through_hdsp_mcp_serve(daemon: DaemonProcess, client: Client) -> None:
    workspace = short_tmp_dir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("print('from nb')")]
    (workspace / "nb\udcff.ipynb").write_text(nbformat.writes(notebook))
    async with mcp_session(daemon, workspace) as session:
        read = await session.call_tool("read_notebook", {"path": "nb\\xff.ipynb"})
        assert not read.is_error and "from nb" in text_of(read)
        assert "nb\\xff.ipynb" in text_of(read)
        made, _ = await approved_call(
            client,
            session,
            "insert_cell",
            {"path": "two\\x0alines.ipynb", "source": "1 + 1"},
        )
        assert not made.is_error, text_of(made)
        assert "two\\x0alines.ipynb" in text_of(made)
    assert _raw_names(workspace) == {b"nb\xff.ipynb", b"two\nlines.ipynb"}
    assert daemon.proc is not None and daemon.proc.poll() is None
