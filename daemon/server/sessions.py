"""Clients that have said `Connect`, keyed by their ZeroMQ routing identity."""

from __future__ import annotations

import os
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from hdsp.protocol import ClientInfo

__all__ = ["Session", "Sessions"]


@dataclass(slots=True)
class Session:
    client_id: str
    identity: bytes
    info: ClientInfo
    connected_at: float


class Sessions:
    """At most `limit` sessions; the least recently active is forgotten first (a
    client that vanished without `Disconnect` must not be kept forever)."""

    def __init__(self, limit: int = 4096) -> None:
        self._by_identity: OrderedDict[bytes, Session] = OrderedDict()
        self._limit = limit

    def __len__(self) -> int:
        return len(self._by_identity)

    def connect(self, identity: bytes, info: ClientInfo) -> Session:
        session = Session(
            client_id=f"c-{uuid.uuid4().hex[:16]}",
            identity=identity,
            info=info,
            connected_at=time.time(),
        )
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

    def live(self) -> int:
        """How many clients are connected: sessions of processes that ended
        without a Disconnect (killed) are forgotten first."""
        for identity, session in list(self._by_identity.items()):
            if session.info.pid is not None and not _process_exists(session.info.pid):
                del self._by_identity[identity]
        return len(self._by_identity)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user
    return True
