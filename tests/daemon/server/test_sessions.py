"""Which sessions count as connected: by their connection's state, on real
sockets (the daemon end to end is tests/integration/test_client_liveness.py)."""

from __future__ import annotations

import socket

from hdsp.daemon.server import Sessions
from hdsp.protocol import ClientInfo

_INFO = ClientInfo(name="t", version="0", pid=1)  # pid 1 lives: it counts for nothing


def test_a_session_ends_with_its_connection() -> None:
    sessions = Sessions()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        sessions.opened(ours.fileno())
        sessions.connect(b"a", _INFO, connection=ours.fileno())
        assert sessions.live() == 1
        theirs.close()  # the peer's process ended: the kernel closed its end
        assert sessions.live() == 0
        assert sessions.get(b"a") is None


def test_zeromq_closing_a_connection_ends_its_sessions_only() -> None:
    sessions = Sessions()
    first, first_peer = socket.socketpair()
    second, second_peer = socket.socketpair()
    with first, first_peer, second, second_peer:
        for sock, identity in ((first, b"a"), (second, b"b")):
            sessions.opened(sock.fileno())
            sessions.connect(identity, _INFO, connection=sock.fileno())
        sessions.closed(first.fileno())
        assert sessions.get(b"a") is None and sessions.get(b"b") is not None
        assert sessions.live() == 1


def test_a_connect_read_after_its_connection_closed_is_not_kept() -> None:
    sessions = Sessions()
    sessions.opened(42)
    sessions.closed(42)
    session = sessions.connect(b"a", _INFO, connection=42)
    assert session.client_id and sessions.get(b"a") is None and sessions.live() == 0
