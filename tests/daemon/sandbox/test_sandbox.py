"""The sandbox in-process: the environment allowlist, the mount order, and real
bwrap sandboxes around the shell tool and the kernel service (interrupt,
restart, cancel and shutdown of a sandboxed kernel, which takes its children
with it)."""

from __future__ import annotations

import shutil
import socket
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from hdsp.daemon.config.settings import SandboxSettings
from hdsp.daemon.kernels import KernelService
from hdsp.daemon.paths import Paths
from hdsp.daemon.sandbox import (
    MountLayout,
    Sandbox,
    SandboxUnavailable,
    bwrap_argv,
    child_environment,
)
from hdsp.daemon.sandbox.sandbox import HIDDEN_IN_HOME
from hdsp.daemon.tools import ExecuteCommand
from hdsp.protocol import ClineMessage, Say
from tests.daemon.tools.tool_results import text_in
from tests.support.daemon_process import short_tmp_dir
from tests.support.host_processes import processes_mentioning
from tests.support.kernel_helpers import EventRecorder, kernel_dir, running_service
from tests.support.tool_context import RecordingContext

pytestmark = pytest.mark.timeout(60)


def _marker() -> str:
    """An argument of `sleep` no other process has: a test finds its processes by it."""
    return f"303.{uuid.uuid4().int % 10**9}"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The home directory the sandboxed processes are given."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def ctx(tmp_path: Path) -> RecordingContext:
    """A task whose workspace is tmp/ws."""
    (tmp_path / "ws").mkdir()
    return RecordingContext(tmp_path / "ws")


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
        sockets=Path("/run/k/a"),
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
    assert tmp < ssh < config < bind < joined.index("--bind /run/k/a /run/k/a")
    assert argv[-2:] == ["--", "sh"]


def mounts(argv: list[str]) -> list[str]:
    """The mounts of a bwrap argv after the bare sandbox's, one string each."""
    out, i = [], argv.index("/tmp") + 1
    while argv[i] != "--":
        width = {"--tmpfs": 2, "--chdir": 2, "--unsetenv": 2}.get(argv[i], 3)
        out.append(" ".join(argv[i : i + width]))
        i += width
    return out


def test_a_workspace_of_tmp_or_home_shows_no_hidden_path_inside_it_and_a_kernel_its_own_dir() -> (
    None
):
    """Issue 32, hole 1, as argv: the runtime dir when XDG_RUNTIME_DIR is unset
    (/tmp/runtime-UID/hdsp) under a workspace of /tmp; the data dir and ~/.ssh
    under a workspace of the home directory. Each is covered again after the
    workspace's bind, and a kernel's own socket directory is bound last."""
    run, data = Path("/tmp/runtime-1000/hdsp"), Path("/home/u/.local/share/hdsp")
    sockets = run / "k" / "0123abcd"
    for ws, inside in ((Path("/tmp"), run), (Path("/home/u"), data)):
        layout = MountLayout(
            hidden=[Path("/home/u/.ssh"), sockets.parent],
            private=[data, run],
            workspace=ws,
            writable=True,
            sockets=sockets,
            cwd=ws,
        )
        argv = bwrap_argv("bwrap", layout, ["sh"], exists=lambda p: True, is_dir=lambda p: True)
        got = mounts(argv)
        bind = got.index(f"--bind {ws} {ws}")
        assert got.index(f"--tmpfs {inside}") > bind, got
        assert got.index("--tmpfs /home/u/.ssh") > (bind if ws.name == "u" else -1), got
        assert got.index(f"--bind {sockets} {sockets}") == max(
            i for i, m in enumerate(got) if m.startswith(("--bind", "--tmpfs", "--ro-bind"))
        )


def test_an_interpreter_inside_a_tmp_workspace_stays_writable_with_it() -> None:
    """The workspace's bind shows what lies inside it: a venv there is not
    bound again read-only (pip install into it still works)."""
    venv, ws = Path("/tmp/proj/.venv"), Path("/tmp/proj")
    layout = MountLayout(hidden=[], workspace=ws, writable=True, reexposed=[venv, Path("/tmp/x")])
    got = mounts(bwrap_argv("bwrap", layout, ["sh"], exists=lambda p: True))
    assert got == ["--ro-bind /tmp/x /tmp/x", f"--bind {ws} {ws}"], got


@pytest.mark.parametrize("inside", ["data", "run", "run/k", "data/checkpoints/x"])
def test_a_workspace_inside_hdspds_own_directories_is_refused_in_one_line(
    tmp_path: Path, inside: str
) -> None:
    (tmp_path / inside).mkdir(parents=True)
    (tmp_path / "home").mkdir()
    sandbox = make_sandbox(tmp_path, tmp_path / "home")
    with pytest.raises(SandboxUnavailable) as refused:
        sandbox.wrap(["true"], workspace=tmp_path / inside)
    message = refused.value.message
    assert message.startswith(f"Refused: the workspace {tmp_path / inside} lies inside hdspd's")
    assert "\n" not in message and "which no sandbox may see" in message


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
    text = text_in(result)
    assert "No such file or directory" in text and "hidden" not in text
    assert "\nw\n/usr/local/bin:/usr/bin:/bin\n" in text and text.endswith(str(ws))
    assert (ws / "f").read_text() == "w\n"


async def test_a_timeout_kills_the_whole_namespace_setsid_included(
    tmp_path: Path, home: Path, ctx: RecordingContext
) -> None:
    marker = _marker()
    tool = ExecuteCommand(sandbox=make_sandbox(tmp_path, home), kill_grace=1)
    command = f"setsid sleep {marker} & trap '' TERM; sleep {marker}"
    with anyio.fail_after(20):
        result = await tool.execute(ctx, {"command": command, "timeout": 1})
    assert result.is_error and "timed out after 1 s" in text_in(result)
    assert processes_mentioning(f"sleep {marker}") == []


async def test_cancelling_a_sandboxed_command_leaves_nothing(
    tmp_path: Path, home: Path, ctx: RecordingContext
) -> None:
    marker = _marker()
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
    marker = _marker()
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
    tmp_path: Path, home: Path, ctx: RecordingContext
) -> None:
    """The sandbox's /tmp is a new, empty one: a daemon whose venv (or checkout)
    lies under the host's /tmp could not start a kernel. Its interpreter is shown
    again, read-only; what lies beside it under /tmp is not."""
    venv = tmp_path / "venv"
    await anyio.run_process([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    (tmp_path / "beside").write_text("not for the sandbox")
    command = (
        f"{venv}/bin/python -c 'print(\"ran\", 6 * 7)'; cat {tmp_path}/beside; "
        f"touch {venv}/written && echo wrote"
    )
    shown = ExecuteCommand(sandbox=make_sandbox(tmp_path, home, interpreter=[venv]))
    text = text_in(await shown.execute(ctx, {"command": command}))
    assert "ran 42" in text, text
    assert "not for the sandbox" not in text and "No such file or directory" in text
    assert "wrote" not in text and "Read-only file system" in text
    hidden = ExecuteCommand(sandbox=make_sandbox(tmp_path, home, interpreter=[]))
    text = text_in(await hidden.execute(ctx, {"command": f"{venv}/bin/python -V"}))
    assert "Python 3" not in text and f"{venv}/bin/python: not found" in text


async def test_a_command_in_tmp_itself_sees_the_runtime_dir_under_it_empty(tmp_path: Path) -> None:
    """Issue 32, hole 1, with the workspace `/tmp` itself: the runtime dir under
    it (as /tmp/runtime-UID/hdsp) shows empty, its socket absent; the rest of
    the host's /tmp is there."""
    root = short_tmp_dir()
    try:
        (root / "run").mkdir()
        (root / "data").mkdir()
        (root / "data" / "hdsp.sqlite3").write_text("private")
        (root / "beside").write_text("shown")
        with socket.socket(socket.AF_UNIX) as control:
            control.bind(str(root / "run" / "control"))
            control.listen(1)
            sandbox = make_sandbox(root, tmp_path)
            command = (
                f"ls -A {root}/run {root}/data; test -S {root}/run/control; echo control=$?; "
                f"cat {root}/beside"
            )
            ctx = RecordingContext(Path("/tmp"))
            text = text_in(await ExecuteCommand(sandbox=sandbox).execute(ctx, {"command": command}))
        assert "control=1" in text and "hdsp.sqlite3" not in text, text
        assert text.endswith("shown"), text
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_a_kernel_starts_with_the_longest_runtime_dir_the_daemon_accepts(
    tmp_path: Path,
) -> None:
    """The daemon accepts a runtime dir up to 92 characters (its `control`
    socket within 100); a kernel's sockets are `<runtime>/k/<8 hex>/s-N`,
    107 characters then: the Linux limit, reached and not passed."""
    base = short_tmp_dir()
    try:
        run = base / ("r" * (92 - len(str(base)) - 1))
        assert len(str(run)) == 92
        Paths(data_dir=base / "data", runtime_dir=run).check()
        home = tmp_path / "home"
        home.mkdir()
        sandbox = make_sandbox(base, home)
        recorder = EventRecorder()
        service = KernelService(recorder.emit, runtime_dir=run / "k", launcher=sandbox)
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            try:
                info = await service.start_kernel(cwd=str(kernel_dir(tmp_path)))
                assert info.connection_file is not None
                own = Path(info.connection_file).parent
                sockets = [p for p in own.iterdir() if p.is_socket()]
                assert len(sockets) == 5 and max(len(str(p)) for p in sockets) == 107
                r = await service.execute(info.kernel_id, "print(6 * 7)")
                assert r.status == "ok" and r.outputs[0].text == "42\n"
            finally:
                with anyio.move_on_after(30, shield=True):
                    await service.aclose()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_sandboxed_child_gets_private_writable_config_and_cache_dirs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = make_sandbox(tmp_path, home).environment()
    assert env["MPLCONFIGDIR"].startswith("/tmp/")
    assert env["XDG_CACHE_HOME"].startswith("/tmp/")
    assert env["XDG_CONFIG_HOME"].startswith("/tmp/")
    assert env["IPYTHONDIR"].startswith("/tmp/")
    given = make_sandbox(tmp_path, home).environment({"MPLCONFIGDIR": "/tmp/mine"})
    assert given["MPLCONFIGDIR"] == "/tmp/mine"
    off = make_sandbox(tmp_path, home, mode="off").environment()
    assert not {"MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "IPYTHONDIR"} & set(off)


async def test_a_fresh_sandboxed_kernels_first_plot_prints_no_warning(tmp_path: Path) -> None:
    """~/.config is hidden in the sandbox: without a writable MPLCONFIGDIR every
    kernel's first plot printed matplotlib's "mkdir -p failed ... Read-only file
    system" (and "created a temporary cache directory")."""
    pytest.importorskip("matplotlib")
    async with running_service(launcher=kernel_sandbox(tmp_path)) as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        code = (
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3])\n"
            "plt.show()\n"
            "import matplotlib, os\n"
            "print(matplotlib.get_cachedir(), os.access(matplotlib.get_cachedir(), os.W_OK))\n"
            "print(get_ipython().ipython_dir)"
        )
        r = await svc.execute(info.kernel_id, code, time_limit=50)
        assert r.status == "ok", r
        streams = "".join(o.text or "" for o in r.outputs if o.output_type == "stream")
        assert any("image/png" in (o.data or {}) for o in r.outputs), r.outputs
        assert streams.split() == ["/tmp/.config/matplotlib", "True", "/tmp/.ipython"], streams
