"""Where a task works: the directory `hdsp` runs in (not the daemon's), and never
`/`, the daemon's home itself or the daemon's own directories unless a person
names one on purpose (the agent reads its workspace without asking)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import ErrorCode, StartNewTask, StartNewTaskData, TaskConfiguration
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.scripted_turns import call


def hdsp(daemon: DaemonProcess, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hdsp.client", *args],
        env={"HDSP_RUNTIME_DIR": str(daemon.runtime_dir), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def home() -> Iterator[Path]:
    """The daemon's $HOME, and its working directory (as under systemd)."""
    path = short_tmp_dir()
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=True)


@pytest.fixture
def home_daemon(fake_openai: FakeOpenAI, home: Path) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(
        short_tmp_dir(),
        env={
            "HDSP_BASE_URL": fake_openai.base_url,
            "HDSP_MODEL": "gpt-test",
            "HDSP_API_KEY": "sk-test-not-a-real-key",
            "HOME": str(home),
        },
        cwd=home,
    )
    try:
        proc.start()
        yield proc
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            proc.stop()
        proc.cleanup()


def test_run_works_where_hdsp_runs_and_send_keeps_it(
    home_daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    fake_openai.script(FakeReply.text("first"), FakeReply.text("second"))
    r = hdsp(home_daemon, project, "run", "--detach", "hello")
    assert r.returncode == 0, r.stderr
    task_id = r.stdout.strip()
    r = hdsp(home_daemon, project, "--json", "show", task_id)
    assert json.loads(r.stdout)["item"]["workspace"] == str(project)
    first = fake_openai.wait_for_requests(1)[0]
    assert f"Workspace: {project}" in first["messages"][0]["content"]

    r = hdsp(home_daemon, elsewhere, "send", task_id, "more")
    assert r.returncode == 0, r.stderr
    r = hdsp(home_daemon, elsewhere, "--json", "show", task_id)
    assert json.loads(r.stdout)["item"]["workspace"] == str(project)
    second = fake_openai.wait_for_requests(2)[1]
    assert f"Workspace: {project}" in second["messages"][0]["content"]


async def start(client: Client, workspace: str | None, *, allow: bool = False) -> str:
    config = TaskConfiguration(workspace=workspace, allow_broad_workspace=allow)
    ref = await client.request(StartNewTask(data=StartNewTaskData(text="hi", configuration=config)))
    task_id: str = ref.task_id
    return task_id


async def test_root_home_and_the_daemons_dirs_are_refused_unless_allowed(
    home_daemon: DaemonProcess, fake_openai: FakeOpenAI, home: Path
) -> None:
    fake_openai.script(*[FakeReply.text("ok")] * 8)
    (home / "project").mkdir()
    (home_daemon.data_dir / "inside").mkdir()
    refused = {
        "/": "the root directory",
        str(home): "your home directory",
        str(home_daemon.data_dir): "hdspd's own directory",
        str(home_daemon.data_dir / "inside"): "hdspd's own directory",
        str(home_daemon.runtime_dir): "hdspd's own directory",
    }
    async with connect(home_daemon.runtime_dir) as client:
        for workspace, why in refused.items():
            with pytest.raises(CommandFailed) as caught:
                await start(client, workspace)
            assert caught.value.code == ErrorCode.INVALID_REQUEST
            assert why in caught.value.message and "--allow-broad-workspace" in caught.value.message
        # An old client that names no workspace does not get the daemon's cwd ($HOME).
        with pytest.raises(CommandFailed) as caught:
            await start(client, None)
        assert "no workspace was given" in caught.value.message
        assert str(home) in caught.value.message
        # Below the home directory is fine, and the flag lets a person mean it.
        await start(client, str(home / "project"))
        for workspace in refused:
            await start(client, workspace, allow=True)


def test_the_cli_flag_names_a_broad_workspace_on_purpose(
    home_daemon: DaemonProcess, fake_openai: FakeOpenAI, home: Path
) -> None:
    fake_openai.script(FakeReply.text("ok"))
    r = hdsp(home_daemon, home, "run", "--detach", "hello")
    assert r.returncode == 2 and "your home directory" in r.stderr, r.stderr
    assert "--allow-broad-workspace" in r.stderr
    r = hdsp(home_daemon, home, "run", "--detach", "--allow-broad-workspace", "hello")
    assert r.returncode == 2 and "needs --workspace" in r.stderr
    r = hdsp(
        home_daemon,
        home,
        "run",
        "--detach",
        "--workspace",
        str(home),
        "--allow-broad-workspace",
        "hi",
    )
    assert r.returncode == 0, r.stderr


def test_a_model_cannot_read_the_home_of_a_daemon_started_there(
    home_daemon: DaemonProcess, fake_openai: FakeOpenAI, home: Path
) -> None:
    """Finding 1: under systemd hdspd runs in $HOME; a task started with no
    --workspace used to work there, where reads need no approval."""
    secret = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "id_rsa").write_text(secret)
    project = home / "project"
    project.mkdir()
    fake_openai.script(
        call("read_file", path=".ssh/id_rsa"),
        call("read_file", path="../.ssh/id_rsa"),
        call("list_files", path="."),  # (three failures in a row would stop the task)
        call("read_file", path=str(home / ".ssh" / "id_rsa")),
        call("list_files", path="..", recursive=True),
        call("attempt_completion", result="done"),
    )
    r = hdsp(home_daemon, project, "run", "--yes", "Summarise this project")
    assert r.returncode == 0, r.stdout + r.stderr
    last = fake_openai.requests[-1]["messages"]
    results = [m["content"] for m in last if m["role"] == "tool"]
    assert len(results) == 5
    assert "No such file" in results[0]
    assert all("outside the workspace" in results[i] for i in (1, 3, 4)), results
    sent = json.dumps(fake_openai.requests)
    assert "OPENSSH" not in sent and "b3BlbnNzaC1rZXkt" not in sent
    assert "OPENSSH" not in r.stdout + r.stderr
