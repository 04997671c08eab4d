"""Whose runtime dir the client and the daemon trust: only one of our own that
nobody else can write. Another user who creates it first (as `/tmp/runtime-USER`
when XDG_RUNTIME_DIR is unset) must get nothing: no connection, no secret."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hdsp.client import DaemonNotRunning, find_daemon
from tests.support.daemon_process import DaemonProcess, short_tmp_dir

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")


@pytest.fixture
def root() -> Iterator[Path]:
    path = short_tmp_dir()
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=True)


def fake_daemon(runtime: Path, owner: int | None = None) -> socket.socket:
    """What an impostor leaves: a discovery file naming a socket it listens on."""
    runtime.mkdir(exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(runtime / "control"))
    listener.listen(8)
    listener.setblocking(False)
    info = {
        "protocolVersion": 1,
        "serverVersion": "0",
        "pid": os.getpid(),
        "control": f"ipc://{runtime / 'control'}",
        "events": f"ipc://{runtime / 'events'}",
        "startedAt": 0,
    }
    (runtime / "hdspd.json").write_text(json.dumps(info))
    if owner is not None:
        for path in (runtime, runtime / "hdspd.json", runtime / "control"):
            os.chown(path, owner, owner)
    return listener


def nobody_connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def secret_set(runtime: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hdsp.client", "secret", "set", "anthropic"],
        env={"HDSP_RUNTIME_DIR": str(runtime), "PATH": "/usr/bin:/bin"},
        input="sk-ant-the-real-key\n",
        capture_output=True,
        text=True,
        timeout=30,
    )


@as_root
def test_the_client_sends_nothing_to_a_runtime_dir_of_another_user(root: Path) -> None:
    runtime = root / "run"
    with fake_daemon(runtime, owner=NOBODY) as listener:
        r = secret_set(runtime)
        assert r.returncode == 3, r.stderr
        assert f"{runtime} belongs to nobody (uid {NOBODY}), not to you" in r.stderr
        assert "nothing was sent" in r.stderr
        assert nobody_connected(listener)


@as_root
def test_the_client_refuses_a_runtime_dir_another_user_can_rename(root: Path) -> None:
    parent = root / "runtime-0"  # made by someone else before we came
    parent.mkdir()
    os.chown(parent, NOBODY, NOBODY)
    runtime = parent / "hdsp"
    with fake_daemon(runtime) as listener:
        os.chmod(runtime, 0o700)
        with pytest.raises(DaemonNotRunning, match=f"{parent} belongs to nobody"):
            find_daemon(runtime)
        assert nobody_connected(listener)


@as_root
def test_the_client_refuses_a_discovery_file_of_another_user(root: Path) -> None:
    runtime = root / "run"
    with fake_daemon(runtime) as listener:
        os.chmod(runtime, 0o700)
        os.chown(runtime / "hdspd.json", NOBODY, NOBODY)
        with pytest.raises(DaemonNotRunning, match=r"hdspd\.json belongs to nobody"):
            find_daemon(runtime)
        assert nobody_connected(listener)


def test_the_client_refuses_a_runtime_dir_others_can_write_or_a_symlink(root: Path) -> None:
    runtime = root / "run"
    with fake_daemon(runtime) as listener:
        os.chmod(runtime, 0o777)
        r = secret_set(runtime)
        assert r.returncode == 3 and "writable by other users (mode 0777" in r.stderr, r.stderr
        os.chmod(runtime, 0o700)
        os.chmod(runtime / "hdspd.json", 0o666)
        with pytest.raises(DaemonNotRunning, match=r"hdspd\.json is writable by other users"):
            find_daemon(runtime)
        link = root / "link"
        link.symlink_to(runtime)
        with pytest.raises(DaemonNotRunning, match="is a symbolic link"):
            find_daemon(link)
        assert nobody_connected(listener)


@as_root
def test_the_daemon_refuses_a_runtime_dir_of_another_user(root: Path) -> None:
    runtime = root / "run"
    runtime.mkdir(mode=0o700)
    os.chown(runtime, NOBODY, NOBODY)
    daemon = DaemonProcess(root)
    with pytest.raises(AssertionError, match="exited before it was ready"):
        daemon.start()
    assert daemon.wait() == 2
    assert f"{runtime} belongs to nobody (uid {NOBODY})" in daemon.stderr()
    assert not (runtime / "hdspd.json").exists()


@as_root
def test_the_daemon_refuses_a_runtime_dir_inside_a_dir_of_another_user(root: Path) -> None:
    parent = root / "runtime-0"
    parent.mkdir()
    os.chown(parent, NOBODY, NOBODY)
    daemon = DaemonProcess(root, env={"HDSP_RUNTIME_DIR": str(parent / "hdsp")})
    with pytest.raises(AssertionError, match="exited before it was ready"):
        daemon.start()
    assert f"{parent} belongs to nobody" in daemon.stderr()


def test_the_daemon_makes_its_runtime_dir_private_and_tightens_its_own(root: Path) -> None:
    # Missing, parent and all (as /tmp/runtime-USER/hdsp): created 0700.
    runtime = root / "runtime-x" / "hdsp"
    with DaemonProcess(root, env={"HDSP_RUNTIME_DIR": str(runtime)}):
        for path in (runtime, runtime.parent):
            assert stat.S_IMODE(path.stat().st_mode) == 0o700
        assert runtime.stat().st_uid == os.geteuid()
        assert find_daemon(runtime).pid > 0
    # Ours but open to everyone: tightened to 0700 before use.
    open_dir = root / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with DaemonProcess(root, env={"HDSP_RUNTIME_DIR": str(open_dir)}):
        assert stat.S_IMODE(open_dir.stat().st_mode) == 0o700
        assert find_daemon(open_dir).pid > 0
