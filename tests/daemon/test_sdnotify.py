"""hdsp.daemon.sdnotify against a real AF_UNIX datagram socket standing in for systemd."""

from __future__ import annotations

import io
import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hdsp.daemon.logs import configure_logging
from hdsp.daemon.sdnotify import notify, notify_ready, notify_status, notify_stopping


@pytest.fixture
def systemd_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A datagram socket bound where $NOTIFY_SOCKET points, as systemd provides."""
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        # Sending is synchronous for AF_UNIX datagrams: what was sent is queued
        # by the time notify() returns, so reading never needs to wait.
        sock.setblocking(False)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        yield sock


@pytest.fixture
def log_stream(restore_logging: None) -> io.StringIO:
    stream = io.StringIO()
    configure_logging(level="debug", stream=stream)
    return stream


def test_ready(systemd_socket: socket.socket) -> None:
    assert notify_ready() is True
    assert systemd_socket.recv(4096) == b"READY=1"


def test_stopping(systemd_socket: socket.socket) -> None:
    assert notify_stopping() is True
    assert systemd_socket.recv(4096) == b"STOPPING=1"


def test_status_is_one_line(systemd_socket: socket.socket) -> None:
    assert notify_status("serving 3 tasks") is True
    assert notify_status("two\nlines") is True
    assert systemd_socket.recv(4096) == b"STATUS=serving 3 tasks"
    assert systemd_socket.recv(4096) == b"STATUS=two lines"


def test_each_call_is_one_datagram_in_order(systemd_socket: socket.socket) -> None:
    notify_status("starting")
    notify_ready()
    notify_stopping()
    received = [systemd_socket.recv(4096) for _ in range(3)]
    assert received == [b"STATUS=starting", b"READY=1", b"STOPPING=1"]
    with pytest.raises(BlockingIOError):
        systemd_socket.recv(4096)


def test_abstract_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"hdsp-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.setblocking(False)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert notify_ready() is True
        assert sock.recv(4096) == b"READY=1"


def test_no_variable_is_a_quiet_no_op(
    monkeypatch: pytest.MonkeyPatch, log_stream: io.StringIO
) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify_ready() is False
    assert notify_stopping() is False
    assert notify_status("x") is False
    monkeypatch.setenv("NOTIFY_SOCKET", "")
    assert notify_ready() is False
    assert log_stream.getvalue() == ""


def test_nobody_listening_warns_and_does_not_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_stream: io.StringIO
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "gone"))
    assert notify_ready() is False
    (line,) = [json.loads(text) for text in log_stream.getvalue().splitlines()]
    assert line["level"] == "warning"
    assert line["logger"] == "hdsp.daemon.sdnotify"
    assert line["message"] == "READY=1"
    assert "could not notify systemd" in line["event"]


def test_unsupported_address_warns(
    monkeypatch: pytest.MonkeyPatch, log_stream: io.StringIO
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", "vsock:2:1234")
    assert notify("READY=1") is False
    (line,) = [json.loads(text) for text in log_stream.getvalue().splitlines()]
    assert line["level"] == "warning"
    assert line["notify_socket"] == "vsock:2:1234"
