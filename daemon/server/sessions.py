"""Clients that have said `Connect`, keyed by their ZeroMQ routing identity, and
the connections they came on.

Whether a client is still there is decided on what the daemon itself knows,
never on what a client says (a `Connect` names a pid, which a client may make
up, and which the system may give to another process later):

- ZeroMQ reports each connection of the control socket opened and closed (a
  socket monitor: `opened`/`closed` with the connection's file descriptor),
  and each message carries the descriptor it came on, so a session is bound to
  its connection. When the connection closes (a client killed with SIGKILL:
  the kernel closes its end at once), the session goes.
- Between ZeroMQ seeing the end of a connection and the daemon reading that
  event, `live` asks the kernel directly whether the peer hung up.
- A peer that vanished without closing (a host gone, over TCP) is found by
  ZeroMQ's heartbeats, which close the connection (see the server).

The pid the kernel reports for the peer (SO_PEERCRED, on ipc) is kept for the
log; the pid the client reports, in its `ClientInfo`, as information.
"""

from __future__ import annotations

import select
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hdsp.protocol import ClientInfo

__all__ = ["Session", "Sessions"]


@dataclass(slots=True)
class Session:
    client_id: str
    identity: bytes
    info: ClientInfo
    connected_at: float
    #: The file descriptor of its connection, as ZeroMQ reported it (None: not known).
    connection: int | None = None
    #: The peer's pid as the kernel reported it (not as the client said).
    peer_pid: int | None = None
    #: Over TCP: the name the client's CURVE key is authorised under (ZAP's
    #: User-Id); None on the local socket.
    user: str | None = None

    @property
    def name(self) -> str:
        """Who the client is, for the history: its authenticated name over TCP
        (a TCP client cannot pass for another), else the name its Connect gave."""
        return self.user if self.user is not None else self.info.name


class Sessions:
    """At most `limit` sessions; the least recently active is forgotten first (a
    client that vanished without `Disconnect` must not be kept forever)."""

    def __init__(self, limit: int = 4096) -> None:
        self._by_identity: OrderedDict[bytes, Session] = OrderedDict()
        self._limit = limit
        #: Connections ZeroMQ reported open and not yet closed.
        self._open: set[int] = set()

    def __len__(self) -> int:
        return len(self._by_identity)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._by_identity.values()))

    def connect(
        self,
        identity: bytes,
        info: ClientInfo,
        *,
        connection: int | None = None,
        peer_pid: int | None = None,
        user: str | None = None,
    ) -> Session:
        """A new session for `identity`, bound to `connection`. One whose
        connection already closed (its Connect was read after the end) is not
        kept: its client is gone."""
        session = Session(
            client_id=f"c-{uuid.uuid4().hex[:16]}",
            identity=identity,
            info=info,
            connected_at=time.time(),
            connection=connection,
            peer_pid=peer_pid,
            user=user,
        )
        if connection is not None and connection not in self._open:
            self._by_identity.pop(identity, None)
            return session
        self._by_identity[identity] = session
        self._by_identity.move_to_end(identity)
        while len(self._by_identity) > self._limit:
            self._by_identity.popitem(last=False)
        return session

    def get(self, identity: bytes) -> Session | None:
        session = self._by_identity.get(identity)
        if session is not None:
            self._by_identity.move_to_end(identity)
        return session

    def disconnect(self, identity: bytes) -> Session | None:
        return self._by_identity.pop(identity, None)

    def opened(self, connection: int) -> None:
        """ZeroMQ accepted a connection on descriptor `connection`."""
        self._open.add(connection)

    def closed(self, connection: int) -> None:
        """ZeroMQ closed the connection on `connection`: its sessions end."""
        self._open.discard(connection)
        self._forget(lambda session: session.connection == connection)

    def live(self) -> int:
        """How many clients are connected: sessions whose connection is open."""
        self._forget(
            lambda session: (
                session.connection is not None
                and (session.connection not in self._open or _hung_up(session.connection))
            )
        )
        return len(self._by_identity)

    def _forget(self, ended: Callable[[Session], bool]) -> None:
        for identity, session in list(self._by_identity.items()):
            if ended(session):
                del self._by_identity[identity]


def _hung_up(connection: int) -> bool:
    """Whether the peer of socket `connection` closed its end (the kernel says
    so at once; ZeroMQ's I/O thread may not have read it yet), or the descriptor
    is closed already."""
    poller = select.poll()
    poller.register(connection, select.POLLRDHUP)
    gone = select.POLLRDHUP | select.POLLHUP | select.POLLNVAL
    return any(mask & gone for _, mask in poller.poll(0))
