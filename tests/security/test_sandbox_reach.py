"""What sandboxed code can reach, through the real daemon, real bwrap and real
kernels (issue 32): never hdspd's own sockets and files, whatever directory the
sandbox binds, and never another kernel.

The daemon runs as where `XDG_RUNTIME_DIR` is unset: its runtime dir is
`<root>/runtime-UID/hdsp`, as `/tmp/runtime-UID/hdsp` is, and its data dir is
`<root>/data`; `<root>` stands for `/tmp` and is the workspace or the kernel's
directory, so the sandbox's bind of it holds both.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from jupyter_client import KernelManager

from hdsp.client import Client, connect
from hdsp.protocol import ExecutionResult, TaskCompleted, discovery_path
from tests.fakes.openai_server import FakeOpenAI
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.host_processes import processes_mentioning
from tests.support.scripted_turns import call, done

pytestmark = [pytest.mark.timeout(90)]

#: Run in a sandbox: what of `PATHS` (name -> path) exists, what each directory
#: lists, and whether a Unix socket there accepts a connection.
REACH = """
import json, os, socket
def reach(path):
    try:
        listing = sorted(os.listdir(path)) if os.path.isdir(path) else None
    except OSError as exc:
        listing = type(exc).__name__
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        connected = "CONNECTED"
    except OSError as exc:
        connected = type(exc).__name__
    finally:
        s.close()
    return {"exists": os.path.lexists(path), "lists": listing, "connect": connected}
print("REACH" + json.dumps({name: reach(path) for name, path in PATHS.items()}))
"""


def reach_code(paths: dict[str, Path]) -> str:
    return f"PATHS = {json.dumps({k: str(v) for k, v in paths.items()})}\n{REACH}"


def reached(text: str) -> dict[str, dict[str, Any]]:
    line = next(x for x in text.splitlines() if x.startswith("REACH"))
    found: dict[str, dict[str, Any]] = json.loads(line.removeprefix("REACH"))
    return found


def stdout(result: ExecutionResult) -> str:
    assert result.status == "ok", result
    return "".join(o.text or "" for o in result.outputs if o.output_type == "stream")


@pytest.fixture
def daemon(daemon_process: DaemonProcess, tmp_path: Path) -> DaemonProcess:
    root = daemon_process.root
    daemon_process.runtime_dir = root / f"runtime-{os.getuid()}" / "hdsp"
    # Beside the directory the sandboxes bind, as /root is beside /tmp: a
    # directory that holds the home is refused as a workspace.
    (tmp_path / "home").mkdir()
    daemon_process.extra_env["HOME"] = str(tmp_path / "home")
    daemon_process.extra_env["JUPYTER_RUNTIME_DIR"] = str(root / "jupyter" / "runtime")
    daemon_process.start()
    return daemon_process


@pytest.fixture
async def client(daemon: DaemonProcess) -> Any:
    async with connect(daemon.runtime_dir, name="test") as c:
        yield c


def daemons_own(daemon: DaemonProcess) -> dict[str, Path]:
    run = daemon.runtime_dir
    return {
        "control": run / "control",
        "events": run / "events",
        "discovery": discovery_path(run),
        "run": run,
        "data": daemon.data_dir,
        "database": daemon.data_dir / "hdsp.sqlite3",
    }


def assert_unseen(seen: dict[str, dict[str, Any]], *, kernel_dir: str | None = None) -> None:
    """Nothing of hdspd's is there: its sockets absent, its directories empty
    (a kernel's runtime dir holds only the way to its own socket directory)."""
    for name in ("control", "events", "discovery", "database"):
        assert seen[name] == {"exists": False, "lists": None, "connect": "FileNotFoundError"}, (
            name,
            seen,
        )
    assert seen["data"]["lists"] == [], seen
    assert seen["run"]["lists"] == ([] if kernel_dir is None else ["k"]), seen


async def test_a_kernel_in_a_directory_holding_hdspds_dirs_cannot_reach_its_sockets(
    client: Client, daemon: DaemonProcess
) -> None:
    """Hole 1, a kernel: `hdsp kernels start` in the directory that holds the
    runtime dir (as /tmp holds /tmp/runtime-UID/hdsp) and the data dir."""
    assert (daemon.runtime_dir / "control").is_socket()
    info = await client.start_kernel(cwd=daemon.root)
    seen = reached(
        stdout(await client.execute_code(info.kernel_id, reach_code(daemons_own(daemon))))
    )
    assert_unseen(seen, kernel_dir=info.kernel_id[:8])
    # Its own directory is there, with its own connection file and sockets only.
    assert info.connection_file is not None
    own = Path(info.connection_file).parent
    listing = reached(stdout(await client.execute_code(info.kernel_id, reach_code({"own": own}))))
    names = listing["own"]["lists"]
    assert names[0] == Path(info.connection_file).name and len(names) == 6, names
    assert all(n.startswith("s-") for n in names[1:]), names


async def test_a_shell_command_in_a_workspace_holding_hdspds_dirs_cannot_reach_its_sockets(
    client: Client, daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    """Hole 1, a shell command: a task whose workspace holds both directories."""
    code = reach_code(daemons_own(daemon)).replace('"', '\\"')
    command = f'python3 -c "{code}"'
    fake_openai.script(call("execute_command", command=command), done())
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "look",
        workspace=daemon.root,
        approvals={"allowed_commands": ["*"], "always_allow_execute": True},
    )
    await collect_turn(client, ref.task_id, head, until=(TaskCompleted,))
    tool = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"][-1]
    text = tool["content"] if isinstance(tool["content"], str) else json.dumps(tool["content"])
    assert_unseen(reached(text))


async def test_a_kernel_cannot_open_connect_to_or_signal_another_kernel(
    client: Client, daemon: DaemonProcess
) -> None:
    """Hole 2: from kernel B, kernel A's connection file (its HMAC key), its
    sockets and its processes are not there; the attack of the issue (load A's
    connection file, execute in A) cannot start."""
    a_dir, b_dir = daemon.root / "a", daemon.root / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    a = await client.start_kernel(cwd=a_dir)
    b = await client.start_kernel(cwd=b_dir)
    assert a.connection_file is not None and b.connection_file is not None
    a_file = Path(a.connection_file)
    a_info = json.loads(await anyio.Path(a_file).read_text())
    a_sockets = {
        name: Path(f"{a_info['ip']}-{a_info[name]}")
        for name in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
    }
    assert all(p.is_socket() for p in a_sockets.values())
    a_pids = processes_mentioning(str(a_file))
    assert a_pids
    attack = f"""
from jupyter_client import BlockingKernelClient
c = BlockingKernelClient()
try:
    c.load_connection_file({str(a_file)!r})
    c.start_channels()
    c.execute("open({str(a_dir / "pwned")!r}, 'w').write('from B')")
    print("attack: reply", c.get_shell_msg(timeout=20)["content"]["status"])
except Exception as exc:
    print("attack: refused", type(exc).__name__)
import os, signal
for pid in {a_pids!r}:
    try:
        os.kill(pid, 0)
        print("signal: ALLOWED", pid)
    except OSError as exc:
        print("signal: refused", type(exc).__name__)
mine = []
for name in os.listdir("/proc"):
    if name.isdigit():
        try:
            mine.append(open(f"/proc/{{name}}/cmdline", "rb").read())
        except OSError:
            pass
print("proc mentions A:", any({str(a_file).encode()!r} in c or {a.kernel_id[:8].encode()!r} in c for c in mine))
"""
    paths = {"file": a_file, "dir": a_file.parent, "kernels": a_file.parent.parent}
    paths |= {name: path for name, path in a_sockets.items()}
    text = stdout(await client.execute_code(b.kernel_id, reach_code(paths) + attack))
    seen = reached(text)
    assert "attack: refused FileNotFoundError" in text, text
    assert "signal: ALLOWED" not in text and "signal: refused ProcessLookupError" in text, text
    assert "proc mentions A: False" in text, text
    for name in ("file", "dir", *a_sockets):
        assert seen[name]["exists"] is False and seen[name]["connect"] == "FileNotFoundError", (
            name,
            seen,
        )
    assert seen["kernels"]["lists"] == [b.kernel_id[:8]], seen  # B's own directory only
    assert not (a_dir / "pwned").exists()
    # A still runs, untouched.
    assert "a-ok" in stdout(await client.execute_code(a.kernel_id, "print('a-ok')"))


async def test_a_kernel_cannot_reach_a_notebooks_kernel_in_the_directory_it_binds(
    client: Client, daemon: DaemonProcess
) -> None:
    """The same path to a notebook's kernel (Jupyter's runtime dir, here under
    the kernel's directory): its connection file is not there."""
    runtime = daemon.root / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    notebook = KernelManager(connection_file=str(runtime / "kernel-nb.json"))
    notebook.start_kernel(cwd=str(daemon.root))
    try:
        b = await client.start_kernel(cwd=daemon.root)
        paths = {"file": runtime / "kernel-nb.json", "runtime": runtime}
        seen = reached(stdout(await client.execute_code(b.kernel_id, reach_code(paths))))
        assert seen["file"]["exists"] is False and seen["runtime"]["lists"] == [], seen
    finally:
        notebook.shutdown_kernel(now=True)
        notebook.cleanup_resources()
