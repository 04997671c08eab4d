"""Where a task works: the directory `hdsp` runs in (not the daemon's), and never
`/`, the daemon's home itself or the daemon's own directories unless a person
names one on purpose (the agent reads its workspace without asking).

A kernel a client starts (`hdsp kernels start`, a client library's or a raw
`StartKernel`) follows the same rules, with no way around them: it works in the
client's directory (resolved where the client runs), never in the daemon's own,
and from inside it sees what a task's kernel sees (real daemon, bwrap, ipykernel).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import (
    ErrorCode,
    StartKernel,
    StartNewTask,
    StartNewTaskData,
    TaskConfiguration,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import run_hdsp_sync
from tests.support.daemon_process import DaemonProcess, model_env, short_tmp_dir
from tests.support.raw_peer import RawPeer
from tests.support.sandbox_probes import probe_code
from tests.support.scripted_turns import call


def hdsp(daemon: DaemonProcess, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HDSP_RUNTIME_DIR": str(daemon.runtime_dir), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    return run_hdsp_sync(env, *args, cwd=cwd)


@pytest.fixture
def home() -> Iterator[Path]:
    """The daemon's $HOME, and its working directory (as under systemd)."""
    path = short_tmp_dir()
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=True)


def daemon_in(home: Path, root: Path, fake_openai: FakeOpenAI) -> Iterator[DaemonProcess]:
    """hdspd running with `home` as its $HOME and working directory, its own
    files under `root`; stopped afterwards."""
    proc = DaemonProcess(root, env={**model_env(fake_openai.base_url), "HOME": str(home)}, cwd=home)
    try:
        proc.start()
        yield proc
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            proc.stop()


@pytest.fixture
def home_daemon(fake_openai: FakeOpenAI, home: Path) -> Iterator[DaemonProcess]:
    root = short_tmp_dir()
    try:
        yield from daemon_in(home, root, fake_openai)
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
        # (/home: a sandbox bound there could write ~/.bashrc)
        str(home.parent): "a directory that holds your home directory",
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


# ---- kernels a client starts ------------------------------------------------------

SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- kernel-cwd-test-key"
KEYRING_KEY = "sk-ant-kernel-cwd-keyring-0123456789"

KERNEL_PROBES = """\
probe("ssh", lambda: open(os.path.join(HOME, ".ssh", "id_rsa")).read())
probe("keyring", lambda: open(KEYRING).read())
probe("data", lambda: open(os.path.join(DATA, "hdsp.sqlite3"), "rb").read(1))
probe("home-write", lambda: pathlib.Path(HOME, NAME).write_text("x"))
probe("etc-write", lambda: pathlib.Path("/etc", NAME).write_text("x"))
probe("inside", lambda: pathlib.Path(NAME).write_text("in"))
"""


@pytest.fixture
def daemon_at_home(fake_openai: FakeOpenAI, home: Path) -> Iterator[DaemonProcess]:
    """hdspd as a user's unit runs it: in $HOME, its data dir, runtime dir and
    plain-text keyring file under $HOME too, and an SSH key in ~/.ssh."""
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "id_rsa").write_text(SSH_KEY)
    (home / "project" / "sub").mkdir(parents=True)
    (home / "project" / "to-home").symlink_to(home)
    (home / "project" / "alias").symlink_to(home / "project" / "sub")
    yield from daemon_in(home, home, fake_openai)


async def probe_kernel(daemon: DaemonProcess, client: Client, kernel_id: str) -> str:
    """What code in the kernel could reach, one `label refused:|ALLOWED` line each,
    and the probe's files found (and removed) in $HOME or /etc afterwards."""
    keyring = daemon.root / "xdg-data" / "python_keyring" / "keyring_pass.cfg"
    assert keyring.is_file()  # the daemon keeps a real secret there
    assert (daemon.data_dir / "hdsp.sqlite3").is_file()
    name = f"hdsp-kernel-probe-{uuid.uuid4().hex}"
    code = probe_code(
        KERNEL_PROBES,
        HOME=str(daemon.root),
        KEYRING=str(keyring),
        DATA=str(daemon.data_dir),
        NAME=name,
    )
    try:
        result = await client.execute_code(kernel_id, code, timeout=30)
    finally:
        outside = remove_outside(daemon, name)
    assert result.status == "ok", result
    seen = "".join(o.text or "" for o in result.outputs if o.output_type == "stream")
    return seen + f"written outside: {[str(p) for p in outside]}\n"


def remove_outside(daemon: DaemonProcess, name: str) -> list[Path]:
    """The probe's files that a kernel managed to write outside its directory
    (in $HOME or /etc), removed."""
    written = [p for p in (daemon.root / name, Path("/etc") / name) if p.exists()]
    for path in written:
        path.unlink()
    return written


def assert_confined(seen: str) -> None:
    for label in ("ssh", "keyring", "data"):
        assert f"{label} refused: FileNotFoundError" in seen, (label, seen)
    for label in ("home-write", "etc-write"):
        assert f"{label} refused: OSError" in seen, (label, seen)  # EROFS
    assert SSH_KEY not in seen and KEYRING_KEY not in seen
    assert "written outside: []" in seen, seen


async def test_kernels_start_in_home_root_or_the_daemons_dirs_is_refused(
    daemon_at_home: DaemonProcess, home: Path
) -> None:
    """Issue 32, hole 3: `hdsp kernels start` ran its kernel in hdspd's own cwd
    ($HOME under systemd), took `--cwd ~` and `--cwd /`, and resolved a relative
    `--cwd` in the daemon. Each such start is now refused in one line (exit 2);
    had one started, its kernel must still be confined (checked, then failed)."""
    project = home / "project"
    cases = [
        (home, ()),  # no --cwd, run from $HOME: the unit's case
        (project, ("--cwd", str(home))),  # --cwd ~ (the shell expands it)
        (project, ("--cwd", "/")),
        (project, ("--cwd", "..")),
        (project, ("--cwd", "to-home")),  # a symlink to $HOME
        (project, ("--cwd", str(daemon_at_home.data_dir))),
        (project, ("--cwd", str(daemon_at_home.runtime_dir))),
        (Path("/"), ()),
    ]
    why = {
        str(home): "your home directory",
        "/": "the root directory",
        str(daemon_at_home.data_dir): "hdspd's own directory",
        str(daemon_at_home.runtime_dir): "hdspd's own directory",
    }
    async with connect(daemon_at_home.runtime_dir) as client:
        await client.set_secret("anthropic", KEYRING_KEY)
        started: list[str] = []
        for cwd, args in cases:
            r = hdsp(daemon_at_home, cwd, "--json", "kernels", "start", *args)
            if r.returncode == 0:
                info = json.loads(r.stdout)
                started.append(f"{cwd} {args}: kernel in {info['cwd']}")
                assert_confined(await probe_kernel(daemon_at_home, client, info["kernelId"]))
                continue
            assert r.returncode == 2, (cwd, args, r.stdout, r.stderr)
            line = r.stderr.strip()
            assert "\n" not in line and r.stdout == "", (cwd, args, r.stderr)
            assert "as the kernel's directory" in line, line
            assert any(f"Refusing {d} " in line and w in line for d, w in why.items()), line
        assert started == [], started
        assert (await client.list_kernels()).kernels == []


async def test_kernels_start_works_where_it_runs_and_sees_what_a_task_kernel_sees(
    daemon_at_home: DaemonProcess, home: Path
) -> None:
    project = home / "project"
    async with connect(daemon_at_home.runtime_dir) as client:
        await client.set_secret("anthropic", KEYRING_KEY)
        for args, where in (
            ((), project),  # no --cwd: the directory hdsp runs in, not the daemon's
            (("--cwd", "sub"), project / "sub"),  # relative: from where it was typed
            (("--cwd", "alias"), project / "sub"),  # a symlink: resolved
        ):
            r = hdsp(daemon_at_home, project, "--json", "kernels", "start", *args)
            assert r.returncode == 0, (args, r.stderr)
            info = json.loads(r.stdout)
            assert info["cwd"] == str(where), (args, info)
            seen = await probe_kernel(daemon_at_home, client, info["kernelId"])
            assert_confined(seen)
            assert "inside ALLOWED" in seen, seen


def test_kernels_start_from_a_removed_directory_says_so(
    daemon_at_home: DaemonProcess, home: Path
) -> None:
    gone = home / "project" / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && exec "$0" -m hdsp.client kernels start'
    r = subprocess.run(
        ["sh", "-c", script, sys.executable, str(gone)],
        env={"HDSP_RUNTIME_DIR": str(daemon_at_home.runtime_dir), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.strip() == (
        "hdsp: The current directory no longer exists; cd somewhere or pass --cwd DIR."
    )


async def test_the_daemon_refuses_a_kernel_directory_a_client_left_unsafe(
    daemon_at_home: DaemonProcess, home: Path
) -> None:
    """Not only the CLI: a client library call or a raw frame that names no
    directory, a relative one, `/`, the home itself (or a link to it) or the
    daemon's own directory is refused by the daemon, never run in its cwd."""
    data = daemon_at_home.data_dir
    async with connect(daemon_at_home.runtime_dir) as client:
        for cwd, said in (
            (None, "give the kernel's directory"),
            ("project", "must be an absolute path"),
            ("/", "the root directory"),
            (str(home), "your home directory"),
            (str(home / "project" / "to-home"), "your home directory"),
            (str(home / "project" / ".."), "your home directory"),
            (str(home.parent), "a directory that holds your home directory"),
            (str(data), "hdspd's own directory"),
        ):
            with pytest.raises(CommandFailed) as caught:
                await client.request(StartKernel(cwd=cwd))
            assert caught.value.code == ErrorCode.INVALID_REQUEST, (cwd, caught.value)
            assert said in caught.value.message and "\n" not in caught.value.message
        with pytest.raises(CommandFailed) as caught:
            await client.start_kernel(cwd=home)
        assert "your home directory" in caught.value.message
        with RawPeer(daemon_at_home) as raw:
            await raw.handshake()
            reply = await raw.ask(raw.raw_command({"commandName": "StartKernel"}))
            assert reply.error is not None and reply.error.code == ErrorCode.INVALID_REQUEST
            assert "give the kernel's directory" in reply.error.message
        assert (await client.list_kernels()).kernels == []
