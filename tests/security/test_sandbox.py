"""The sandbox through the real daemon: a scripted model (an attacker's prompt
injection) makes shell commands and kernel code reach for the user's secrets,
write outside the workspace, read the daemon's environment, use the network and
leave processes behind; what the model is told comes from the fake server's
recorded requests. The daemon runs with a fake HOME holding an SSH key, a
`.config` file and a real keyring file (hdsp's own, written by `SetSecret`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.client import Client, connect
from hdsp.protocol import TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.host_processes import processes_mentioning
from tests.support.sandbox_probes import probe_code
from tests.support.scripted_turns import call, done

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]

ENV_KEY = "sk-env-openai-key-0123456789abcdef"
KEYRING_KEY = "sk-ant-keyring-key-0123456789abcdef"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- fake-ssh-key-material"
CONFIG_TEXT = "token-in-dot-config-0123456789"


def tool_result(fake: FakeOpenAI, request: int) -> str:
    """The last tool result the model received in request `request`."""
    tool = [m for m in fake.requests[request]["messages"] if m["role"] == "tool"][-1]
    content = tool["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


def everything_the_model_got(fake: FakeOpenAI) -> str:
    return json.dumps(fake.requests)


@pytest.fixture
def home(daemon_process: DaemonProcess) -> Path:
    home = daemon_process.root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SSH_KEY)
    (home / ".config" / "tool").mkdir(parents=True)
    (home / ".config" / "tool" / "credentials").write_text(CONFIG_TEXT)
    (home / "notes.txt").write_text("readable\n")
    daemon_process.extra_env.update(HOME=str(home), OPENAI_API_KEY=ENV_KEY)
    return home


@pytest.fixture
def daemon(daemon_process: DaemonProcess, home: Path) -> DaemonProcess:
    daemon_process.start()
    return daemon_process


@pytest.fixture
async def client(daemon: DaemonProcess) -> Any:
    async with connect(daemon.runtime_dir, name="test") as c:
        await c.set_secret("anthropic", KEYRING_KEY)
        yield c


@pytest.fixture
def keyring_file(daemon: DaemonProcess) -> Path:
    # keyrings.alt's PlaintextKeyring under the daemon's XDG_DATA_HOME.
    return daemon.root / "xdg-data" / "python_keyring" / "keyring_pass.cfg"


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on the host's loopback that accepts connections."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


async def run_task(client: Client, fake: FakeOpenAI, workspace: Path, *replies: FakeReply) -> None:
    fake.script(*replies)
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "do it",
        workspace=workspace,
        approvals={"allowed_commands": ["*"], "always_allow_execute": True},
    )
    await collect_turn(client, ref.task_id, head, until=(TaskCompleted,))


async def hdsp(daemon: DaemonProcess, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The `hdsp` CLI, as a user runs it."""
    env = {"HDSP_RUNTIME_DIR": str(daemon.runtime_dir), "PATH": os.environ["PATH"]}
    with anyio.fail_after(30):
        return await anyio.run_process(
            [sys.executable, "-m", "hdsp.client", *args], env=env, check=False
        )


def shell_probes(daemon: DaemonProcess, home: Path, keyring_file: Path) -> str:
    return "; ".join(
        [
            "cat ~/.ssh/id_rsa; echo ssh=$?",
            "cat ~/.config/tool/credentials; echo config=$?",
            f"cat {keyring_file}; echo keyring=$?",
            f"cat /proc/{daemon.proc.pid if daemon.proc else 0}/environ; echo environ=$?",
            "cat ~/notes.txt",
            f"echo x > {home}/outside.txt; echo outside=$?",
            'echo "[key=$OPENAI_API_KEY$HDSP_API_KEY]"',
            "env | grep -c sk- ; echo inside > inside.txt; echo inside=$?",
            "echo t > /tmp/t && cat /tmp/t",
            # The daemon's control socket: a client there may GetBlob any image.
            f"test -S {daemon.runtime_dir / 'control'}; echo control=$?",
        ]
    )


async def test_a_command_cannot_reach_secrets_or_write_outside(
    client: Client,
    fake_openai: FakeOpenAI,
    daemon: DaemonProcess,
    home: Path,
    keyring_file: Path,
    workspace: Path,
) -> None:
    assert await anyio.Path(keyring_file).is_file()  # the daemon keeps a real secret there
    command = shell_probes(daemon, home, keyring_file)
    await run_task(client, fake_openai, workspace, call("execute_command", command=command), done())
    result = tool_result(fake_openai, 1)
    # The model is told why things fail: the sandbox, and what it allows.
    assert result.startswith("Ran in a sandbox (workspace-write): writes only in the workspace")
    assert (daemon.runtime_dir / "control").is_socket()
    for probe in ("ssh", "config", "keyring", "environ", "outside", "control"):
        assert f"{probe}=0" not in result and f"{probe}=" in result, (probe, result)
    assert "No such file or directory" in result and "Read-only file system" in result
    assert "[key=]" in result and "readable" in result
    assert "inside=0" in result and "\nt\n" in result + "\n"
    assert (workspace / "inside.txt").read_text() == "inside\n"
    assert not (home / "outside.txt").exists()
    got = everything_the_model_got(fake_openai)
    stored = (await anyio.Path(keyring_file).read_text()).strip()
    for secret in (SSH_KEY, CONFIG_TEXT, ENV_KEY, KEYRING_KEY, stored):
        assert secret not in got


KERNEL_PROBES = """\
probe("ssh", lambda: open(os.path.expanduser("~/.ssh/id_rsa")).read())
probe("config", lambda: open(os.path.expanduser("~/.config/tool/credentials")).read())
probe("keyring", lambda: open(KEYRING).read())
probe("environ", lambda: open(f"/proc/{DAEMON}/environ").read())
probe("outside", lambda: open(os.path.join(HOME, "outside.txt"), "w").write("x"))
probe("inside", lambda: pathlib.Path("inside.txt").write_text("in"))
probe("tmp", lambda: pathlib.Path("/tmp/t").write_text("t"))
print("keys", sorted(k for k, v in os.environ.items() if "sk-" in v or k.endswith("API_KEY")))
"""


async def test_kernel_code_cannot_reach_secrets_or_write_outside(
    client: Client,
    fake_openai: FakeOpenAI,
    daemon: DaemonProcess,
    home: Path,
    keyring_file: Path,
    workspace: Path,
) -> None:
    code = probe_code(
        KERNEL_PROBES,
        KEYRING=str(keyring_file),
        HOME=str(home),
        DAEMON=daemon.proc.pid if daemon.proc else 0,
    )
    await run_task(client, fake_openai, workspace, call("execute_code", code=code), done())
    result = tool_result(fake_openai, 1)
    for probe in ("ssh", "config", "keyring", "environ"):
        assert f"{probe} refused: FileNotFoundError" in result, (probe, result)
    assert "outside refused: OSError" in result  # EROFS
    assert "inside ALLOWED" in result and "tmp ALLOWED" in result
    assert "keys []" in result
    assert (workspace / "inside.txt").read_text() == "in"
    assert not (home / "outside.txt").exists()
    got = everything_the_model_got(fake_openai)
    for secret in (SSH_KEY, CONFIG_TEXT, ENV_KEY, KEYRING_KEY):
        assert secret not in got


async def test_read_only_mode_refuses_workspace_writes(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await client.update_settings({"sandbox": {"mode": "read-only"}})
    command = "echo x > w.txt; echo ws=$?; echo t > /tmp/t && echo tmp=$?"
    await run_task(client, fake_openai, workspace, call("execute_command", command=command), done())
    result = tool_result(fake_openai, 1)
    assert result.startswith("Ran in a sandbox (read-only): writes only in /tmp only")
    assert "Read-only file system" in result and "ws=2" in result and "tmp=0" in result
    assert not (workspace / "w.txt").exists()
    assert (await client.status()).sandbox is not None


async def test_the_network_is_off_unless_the_setting_allows_it(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, listener: int
) -> None:
    connect_code = (
        f"import socket; socket.create_connection(('127.0.0.1', {listener}), timeout=5); "
        "print('connected')"
    )
    command = f'{sys.executable} -c "{connect_code}"; echo rc=$?'
    await run_task(client, fake_openai, workspace, call("execute_command", command=command), done())
    off = tool_result(fake_openai, 1)
    assert "no network" in off and "connected" not in off and "ConnectionRefusedError" in off
    await client.update_settings({"sandbox": {"network": True}})
    await run_task(client, fake_openai, workspace, call("execute_command", command=command), done())
    on = tool_result(fake_openai, 3)
    assert "network allowed" in on and "connected" in on and "rc=0" in on
    status = await client.status()
    assert status.sandbox is not None and status.sandbox.network


async def test_setsid_cannot_outlive_the_command(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    marker = f"303.{uuid.uuid4().int % 10**9}"
    command = f"setsid sleep {marker} & echo $! > pid.txt; echo started"
    await run_task(client, fake_openai, workspace, call("execute_command", command=command), done())
    assert (workspace / "pid.txt").read_text().strip().isdigit()
    assert "started" in tool_result(fake_openai, 1)
    assert processes_mentioning(f"sleep {marker}") == []


async def test_a_kernels_new_session_child_dies_with_its_task(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    marker = f"303.{uuid.uuid4().int % 10**9}"
    code = (
        "import subprocess\n"
        f"child = subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
        "print('spawned', child.pid)"
    )
    fake_openai.script(call("execute_code", code=code), done())
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "spawn", workspace=workspace, approvals={"always_allow_execute": True}
    )
    await collect_turn(client, ref.task_id, head, until=(TaskCompleted,))
    assert "spawned" in tool_result(fake_openai, 1)
    assert processes_mentioning(f"sleep {marker}")  # alive while the kernel is
    await client.close_task(ref.task_id)
    assert processes_mentioning(f"sleep {marker}") == []


async def test_without_bwrap_commands_and_kernels_are_refused_and_status_says_why(
    client: Client, fake_openai: FakeOpenAI, daemon: DaemonProcess, workspace: Path
) -> None:
    status = await client.status()
    assert status.sandbox is not None
    assert (status.sandbox.mode, status.sandbox.mechanism) == ("workspace-write", "bwrap")
    assert status.sandbox.problem is None and not status.sandbox.network

    await client.update_settings({"sandbox": {"bwrap_path": "/nonexistent/bwrap"}})
    status = await client.status()
    assert status.sandbox is not None and status.sandbox.mechanism == "unavailable"
    assert status.sandbox.problem is not None and "bubblewrap" in status.sandbox.problem

    await run_task(
        client,
        fake_openai,
        workspace,
        call("execute_command", command="echo ran > ran.txt"),
        call("execute_code", code="open('ran.txt', 'w').write('ran')"),
        done(),
    )
    for request in (1, 2):
        refused = tool_result(fake_openai, request)
        assert "apt-get install bubblewrap" in refused, refused
        assert "sandbox.mode off" in refused
    assert "The command was not run" in tool_result(fake_openai, 1)
    assert "No kernel was started" in tool_result(fake_openai, 2)
    assert not (workspace / "ran.txt").exists()

    cli = await hdsp(daemon, "daemon", "status")
    assert "sandbox: workspace-write, network off, UNAVAILABLE" in cli.stdout.decode()


async def test_mode_off_runs_unconfined_and_says_so(
    client: Client, fake_openai: FakeOpenAI, daemon: DaemonProcess, workspace: Path, home: Path
) -> None:
    cli = await hdsp(daemon, "config", "set", "sandbox.mode", "off")
    assert cli.returncode == 0, cli.stderr
    status = await client.status()
    assert status.sandbox is not None and status.sandbox.mode == "off"
    command = f"echo x > {home}/outside.txt; echo [$OPENAI_API_KEY]"
    await run_task(client, fake_openai, workspace, call("execute_command", command=command), done())
    result = tool_result(fake_openai, 1)
    assert result.startswith("WARNING: no sandbox")
    assert (home / "outside.txt").exists()
    assert "[]" in result  # the environment is still allowlisted
    assert "running without a sandbox" in daemon.stderr()
