"""The sandbox in-process: the environment allowlist, the mount order, and real
bwrap sandboxes around the shell tool and the kernel service (interrupt,
restart, cancel and shutdown of a sandboxed kernel, which takes its children
with it)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import anyio
import pytest

from hdsp.daemon.config.settings import SandboxSettings
from hdsp.daemon.paths import Paths
from hdsp.daemon.sandbox import MountLayout, Sandbox, bwrap_argv, child_environment
from hdsp.daemon.sandbox.sandbox import HIDDEN_IN_HOME
from hdsp.daemon.tools import ExecuteCommand, ToolResult
from hdsp.protocol import ClineMessage, Say
from tests.support.daemon_process import short_tmp_dir
from tests.support.host_processes import processes_mentioning
from tests.support.kernel_helpers import kernel_dir, running_service
from tests.support.tool_context import RecordingContext

pytestmark = pytest.mark.timeout(60)


def text_of(result: ToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def make_sandbox(
    root: Path, home: Path, interpreter: list[Path] | None = None, **settings: object
) -> Sandbox:
    chosen = SandboxSettings.model_validate(settings)
    return Sandbox(
        lambda: chosen,
        paths=Paths(data_dir=root / "data", runtime_dir=root / "run"),
        secret_values=lambda: ["sk-known-secret-value"],
        environ={"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        interpreter=interpreter,
    )


def test_the_environment_is_an_allowlist_without_known_secrets() -> None:
    parent = {
        "PATH": "/bin",
        "LC_ALL": "C",
        "PYTHONPATH": "/x",
        "OPENAI_API_KEY": "sk-a",
        "GITHUB_TOKEN": "ghp_x",
        "DATABASE_URL": "postgres://u:p@h/db",
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "PYTHONWARNINGS": "contains sk-known-secret-value here",
        "HTTPS_PROXY": "http://proxy:3128",
        "HTTP_PROXY": "http://user:pw@proxy:3128",
    }
    env = child_environment(parent, secret_values=["sk-known-secret-value"], network=True)
    assert env == {
        "PATH": "/bin",
        "LC_ALL": "C",
        "PYTHONPATH": "/x",
        "HTTPS_PROXY": "http://proxy:3128",
    }
    assert "HTTPS_PROXY" not in child_environment(parent, network=False)


def test_hidden_paths_are_covered_after_tmp_and_the_workspace_is_bound_after_them() -> None:
    home = Path("/home/u")
    ws = home / ".config" / "project"  # under a hidden directory: stays visible
    layout = MountLayout(
        hidden=[home / ".ssh", home / ".config", home / ".config" / "hdsp", home / ".netrc"],
        workspace=ws,
        writable=True,
        extra_writable=[Path("/run/k")],
        reexposed=[home],
        cwd=ws,
    )
    argv = bwrap_argv(
        "bwrap", layout, ["sh"], exists=lambda p: True, is_dir=lambda p: p.name != ".netrc"
    )
    joined = " ".join(argv)
    assert "--unshare-all" in argv and "--share-net" not in argv
    assert "--die-with-parent" in argv and "--disable-userns" in argv
    tmp = joined.index("--tmpfs /tmp")
    ssh = joined.index("--tmpfs /home/u/.ssh")
    config = joined.index("--tmpfs /home/u/.config ")
    assert "/home/u/.config/hdsp" not in joined  # inside a hidden directory already
    assert "--ro-bind /dev/null /home/u/.netrc" in joined
    bind = joined.index(f"--bind {ws} {ws}")
    assert tmp < ssh < config < bind < joined.index("--bind /run/k /run/k")
    assert argv[-2:] == ["--", "sh"]


def test_libpq_s_password_and_service_files_are_hidden() -> None:
    """The PostgreSQL store's credentials (README: ~/.pgpass, a service file)
    never show to sandboxed code."""
    assert {".pgpass", ".pg_service.conf"} <= set(HIDDEN_IN_HOME)


async def test_a_workspace_under_a_hidden_directory_stays_usable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = home / ".config" / "project"
    ws.mkdir(parents=True)
    (home / ".config" / "secret").write_text("hidden")
    sandbox = make_sandbox(tmp_path, home)
    ctx = RecordingContext(ws)
    tool = ExecuteCommand(sandbox=sandbox)
    result = await tool.execute(
        ctx, {"command": "cat ../secret; echo w > f && cat f; echo $PATH; pwd"}
    )
    text = text_of(result)
    assert "No such file or directory" in text and "hidden" not in text
    assert "\nw\n/usr/local/bin:/usr/bin:/bin\n" in text and text.endswith(str(ws))
    assert (ws / "f").read_text() == "w\n"


async def test_a_timeout_kills_the_whole_namespace_setsid_included(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "ws").mkdir()
    marker = f"303.{uuid.uuid4().int % 10**9}"
    ctx = RecordingContext(tmp_path / "ws")
    tool = ExecuteCommand(sandbox=make_sandbox(tmp_path, home), kill_grace=1)
    command = f"setsid sleep {marker} & trap '' TERM; sleep {marker}"
    with anyio.fail_after(20):
        result = await tool.execute(ctx, {"command": command, "timeout": 1})
    assert result.is_error and "timed out after 1 s" in text_of(result)
    assert processes_mentioning(f"sleep {marker}") == []


async def test_cancelling_a_sandboxed_command_leaves_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "ws").mkdir()
    marker = f"303.{uuid.uuid4().int % 10**9}"
    ctx = RecordingContext(tmp_path / "ws")
    tool = ExecuteCommand(sandbox=make_sandbox(tmp_path, home), update_interval=0.01)

    def started(message: ClineMessage) -> bool:
        return message.say == Say.COMMAND_OUTPUT and "started" in (message.text or "")

    scope = anyio.CancelScope()

    async def run() -> None:
        with scope:
            await tool.execute(ctx, {"command": f"setsid sleep {marker} & echo started; wait"})

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await ctx.wait_for(started)
        scope.cancel()
    assert processes_mentioning(f"sleep {marker}") == []


async def test_an_unavailable_sandbox_refuses_with_a_fix(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, tmp_path, bwrap_path="/nonexistent/bwrap")
    status = sandbox.status()
    assert status.mechanism == "unavailable" and status.problem is not None
    assert "apt-get install bubblewrap" in status.problem
    assert "sandbox.mode off" in status.problem
    from hdsp.daemon.tools import ToolError

    with pytest.raises(ToolError, match="The command was not run"):
        await ExecuteCommand(sandbox=sandbox).execute(
            RecordingContext(tmp_path), {"command": "true"}
        )


# ---- kernels ----------------------------------------------------------------------


def kernel_sandbox(tmp_path: Path) -> Sandbox:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return make_sandbox(short_tmp_dir(), home)


async def test_a_sandboxed_kernel_is_interrupted_by_message_and_restarted(
    tmp_path: Path,
) -> None:
    async with running_service(launcher=kernel_sandbox(tmp_path), interrupt_grace=1.0) as (
        svc,
        _,
    ):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        await svc.execute(info.kernel_id, "x = 41")
        r = await svc.execute(info.kernel_id, "while True:\n    pass", time_limit=1)
        assert (r.status, r.kernel_restarted) == ("timeout", False)
        assert r.outputs[-1].ename == "KeyboardInterrupt"
        after = await svc.execute(info.kernel_id, "x + 1")
        assert after.outputs[0].data == {"text/plain": "42"}
        ignore = (
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
        )
        r = await svc.execute(info.kernel_id, ignore, time_limit=0.5)
        assert (r.status, r.kernel_restarted) == ("timeout", True)
        again = await svc.execute(info.kernel_id, "import os; os.getpid()")
        assert again.status == "ok"


async def test_a_sandboxed_kernels_children_die_with_it(tmp_path: Path) -> None:
    marker = f"303.{uuid.uuid4().int % 10**9}"
    async with running_service(launcher=kernel_sandbox(tmp_path)) as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        code = f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)"
        r = await svc.execute(info.kernel_id, code)
        assert r.status == "ok"
        assert processes_mentioning(f"sleep {marker}")
        await svc.shutdown_kernel(info.kernel_id)
        assert processes_mentioning(f"sleep {marker}") == []
        assert processes_mentioning(info.connection_file) == []


async def test_a_python_under_tmp_runs_in_the_sandbox_and_its_neighbours_stay_hidden(
    tmp_path: Path,
) -> None:
    """The sandbox's /tmp is a new, empty one: a daemon whose venv (or checkout)
    lies under the host's /tmp could not start a kernel. Its interpreter is shown
    again, read-only; what lies beside it under /tmp is not."""
    venv = tmp_path / "venv"
    await anyio.run_process([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    (tmp_path / "beside").write_text("not for the sandbox")
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "ws").mkdir()
    ctx = RecordingContext(tmp_path / "ws")
    command = (
        f"{venv}/bin/python -c 'print(\"ran\", 6 * 7)'; cat {tmp_path}/beside; "
        f"touch {venv}/written && echo wrote"
    )
    shown = ExecuteCommand(sandbox=make_sandbox(tmp_path, home, interpreter=[venv]))
    text = text_of(await shown.execute(ctx, {"command": command}))
    assert "ran 42" in text, text
    assert "not for the sandbox" not in text and "No such file or directory" in text
    assert "wrote" not in text and "Read-only file system" in text
    hidden = ExecuteCommand(sandbox=make_sandbox(tmp_path, home, interpreter=[]))
    text = text_of(await hidden.execute(ctx, {"command": f"{venv}/bin/python -V"}))
    assert "Python 3" not in text and f"{venv}/bin/python: not found" in text
