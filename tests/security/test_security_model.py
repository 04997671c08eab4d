"""The README's "What each process sees and reaches", sentence by sentence,
checked from inside the real process through the real daemon.

Where each sentence is checked:

- a shell command: the file system read-only, the workspace writable, the
  private `/tmp`, the secrets absent, the daemon's `/proc` absent, no API key:
  test_sandbox.py::test_a_command_cannot_reach_secrets_or_write_outside;
  read-only mode: ::test_read_only_mode_refuses_workspace_writes; the network:
  ::test_the_network_is_off_unless_the_setting_allows_it; `setsid`:
  ::test_setsid_cannot_outlive_the_command; hdspd's dirs and the kernels' files
  whatever it binds (a workspace of "/tmp"):
  test_sandbox_reach.py::test_a_shell_command_in_a_workspace_holding_hdspds_dirs_cannot_reach_its_sockets;
  its `/proc` shows only its own processes: below;
- a kernel hdsp starts: the same, test_sandbox.py::test_kernel_code_cannot_reach_secrets_or_write_outside
  and test_sandbox_reach.py (hdspd's sockets; another kernel's file, sockets,
  signals and `/proc`); its own directory (0700, only its file and sockets,
  removed at shutdown): below;
- an attached kernel, a remote kernel, an MCP server process: below, each
  compared with this test process's own namespaces (a sandboxed process has a
  PID and a mount namespace of its own);
- a workspace or kernel directory inside hdspd's dirs refused in one line: below
  (and tests/daemon/sandbox/test_sandbox.py for the sandbox alone).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from jupyter_client import KernelManager

from hdsp.client import Client, CommandFailed
from hdsp.protocol import ExecutionResult, McpServerChanged, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.events import collect_turn
from tests.support.host_processes import processes_mentioning
from tests.support.kernel_servers import KernelServer
from tests.support.mcp_servers import BAD_SERVER
from tests.support.scripted_turns import call, done

pytestmark = [pytest.mark.timeout(90)]

#: Printed by code in a kernel: its namespaces and what it sees of hdspd.
NAMESPACES = """
import json, os
print("NS" + json.dumps({
    "pid": os.readlink("/proc/self/ns/pid"),
    "mnt": os.readlink("/proc/self/ns/mnt"),
    "control": os.path.exists(CONTROL),
}))
"""


def host_namespace(kind: str, pid: int | str = "self") -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def stdout(result: ExecutionResult) -> str:
    assert result.status == "ok", result
    return "".join(o.text or "" for o in result.outputs if o.output_type == "stream")


def namespaces(text: str) -> dict[str, Any]:
    line = next(x for x in text.splitlines() if x.startswith("NS"))
    found: dict[str, Any] = json.loads(line.removeprefix("NS"))
    return found


def probe(daemon: DaemonProcess) -> str:
    return f"CONTROL = {str(daemon.runtime_dir / 'control')!r}\n{NAMESPACES}"


async def test_a_started_kernel_is_sandboxed_with_a_directory_of_its_own(
    client: Client, daemon: DaemonProcess, tmp_path: Path
) -> None:
    info = await client.start_kernel(cwd=tmp_path)
    seen = namespaces(stdout(await client.execute_code(info.kernel_id, probe(daemon))))
    assert seen["pid"] != host_namespace("pid") and seen["mnt"] != host_namespace("mnt")
    assert seen["control"] is False
    assert info.connection_file is not None
    own = await anyio.Path(info.connection_file).parent.stat()
    assert own.st_mode & 0o777 == 0o700  # (jupyter_client adds the sticky bit)
    await client.shutdown_kernel(info.kernel_id)
    assert not await anyio.Path(info.connection_file).parent.exists()


async def test_a_shell_commands_proc_shows_only_its_own_processes(
    client: Client, daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    command = "echo PROCS $(for p in /proc/[0-9]*; do cat $p/comm; done)"
    fake_openai.script(call("execute_command", command=command), done())
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "ps",
        workspace=tmp_path,
        approvals={"allowed_commands": ["*"], "always_allow_execute": True},
    )
    await collect_turn(client, ref.task_id, head, until=(TaskCompleted,))
    tool = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"][-1]
    content = tool["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    line = next(x for x in text.splitlines() if x.startswith("PROCS "))
    # bwrap's init, the shell, the substitution's subshell and cat: no hdspd, no kernel.
    shown = set(line.split()[1:])
    assert shown and shown <= {"bwrap", "sh", "cat"}, line


async def test_an_attached_kernel_runs_outside_the_sandbox_with_its_starters_access(
    client: Client, daemon: DaemonProcess, users_kernel: KernelManager
) -> None:
    info = await client.attach_kernel(users_kernel.connection_file)
    seen = namespaces(stdout(await client.execute_code(info.kernel_id, probe(daemon))))
    assert seen == {"pid": host_namespace("pid"), "mnt": host_namespace("mnt"), "control": True}


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_remote_kernel_runs_where_its_server_runs_unwrapped(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    root = short_tmp_dir()
    try:
        with KernelServer("kernelgateway", root) as server:
            daemon_process.data_dir.mkdir(parents=True, exist_ok=True)
            settings = {"kernels": {"gateway": {"url": server.url, "token_secret": "jupyter"}}}
            (daemon_process.data_dir / "settings.json").write_text(json.dumps(settings))
            daemon_process.start()
            from hdsp.client import connect

            async with connect(daemon_process.runtime_dir, name="test") as client:
                await client.set_secret("jupyter", server.token)
                info = await client.start_kernel(provider="gateway")
                code = probe(daemon_process) + "print('PPID', os.getppid())"
                text = stdout(await client.execute_code(info.kernel_id, code))
                assert server.proc is not None
                # Its parent is the server (through its launcher), in this machine's namespaces.
                seen = namespaces(text)
                assert (seen["pid"], seen["mnt"]) == (host_namespace("pid"), host_namespace("mnt"))
                parent = int(text.split("PPID")[1].split()[0])
                assert parent in (server.proc.pid, *_children(server.proc.pid))
                await client.shutdown_kernel(info.kernel_id)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


async def test_an_mcp_server_process_runs_outside_the_sandbox_with_the_sdks_environment(
    client: Client, daemon: DaemonProcess, tmp_path: Path
) -> None:
    marker = f"mcp-probe-{uuid.uuid4().hex[:12]}"
    server = {"command": sys.executable, "args": [str(BAD_SERVER), marker], "env": {"PROBE": "x"}}
    head = (await client.status()).head_seq
    await client.update_settings({"mcp": {"servers": {"probe": server}}})
    await client.list_mcp_servers(str(tmp_path), start=True)
    async with client.events(None, since_seq=head) as events:
        async for event in events:
            if isinstance(event.data, McpServerChanged):
                status = event.data.payload[0]
                if status.name == "probe" and status.state in ("connected", "failed"):
                    assert status.state == "connected", status
                    break
    (pid,) = processes_mentioning(marker)
    assert host_namespace("pid", pid) == host_namespace("pid")
    assert host_namespace("mnt", pid) == host_namespace("mnt")  # it sees hdspd's dirs
    assert os.stat(f"/proc/{pid}").st_uid == os.getuid()
    environ = (await anyio.Path(f"/proc/{pid}/environ").read_bytes()).split(b"\0")
    names = {e.split(b"=", 1)[0].decode() for e in environ if e}
    assert names <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "PROBE"}, names
    assert "PROBE" in names


async def test_a_kernel_directory_inside_hdspds_dirs_is_refused_in_one_line(
    client: Client, daemon: DaemonProcess
) -> None:
    for inside in (daemon.data_dir / "x", daemon.runtime_dir / "k"):
        inside.mkdir(exist_ok=True)
        with pytest.raises(CommandFailed) as refused:
            await client.start_kernel(cwd=inside)
        message = str(refused.value)
        assert "hdspd's own directory" in message and "\n" not in message, message
    assert (await client.list_kernels()).kernels == []
