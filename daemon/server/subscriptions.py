"""Subscriptions on the `events` socket (XPUB), bounded.

ZeroMQ keeps every subscription a peer sends in a trie, a node per byte: about
12 KB for a 256-byte topic, 200 KB for a 4 KiB one, and removing a peer walks the
whole trie. `XPUB_MANUAL` does not help: in libzmq 4.3 a manual XPUB still
stores every subscription it receives (to unsubscribe on disconnect), accepted or
not. And there is no call that drops one peer of an XPUB. So the bounds are:

- Size: the socket's `MAXMSGSIZE` is a little above `MAX_TOPIC`; ZeroMQ cuts the
  connection of a peer that sends a longer subscription before storing any of it.
- Count and bytes: at most `max_per_peer` subscriptions per peer process, of at
  most `MAX_BYTES_PER_PEER` bytes in all (ZeroMQ tells the
  peer's address, for `ipc://` its uid, gid and pid, not which connection). A peer
  over the limit has its connections to this socket cut: found among the daemon's
  own file descriptors by the peer's pid (SO_PEERCRED) and the socket's path, and
  shut down, which ZeroMQ sees as the peer going away (it frees the peer's
  subscriptions and tells us with an unsubscription for each). Over TCP (a team
  daemon, under CURVE) a peer is the name its key is authorised under at its IP
  address; its cut shuts down every connection from that address to the TCP
  events port (other clients there reconnect by themselves, and replay). Freeing them is
  one call into libzmq that walks the trie with the event loop stopped, a cost
  that grows with the bytes the peer held: 65 ms for 1,025 topics of 200 bytes
  on this 2-core machine, 0.2-1.1 s when it is busy, which held a Ping that long
  at the first cut of a flood; with the byte bound it is a fifth of that.
- Rate: a peer may send a burst of `4 * max_per_peer` (un)subscriptions, then
  `max_per_peer` a second; past that its connections are cut the same way. A
  churning peer (subscribe, unsubscribe, again) would otherwise queue work in
  front of everyone's sync probes without ever holding too many.
- Time: messages are read a bounded batch at a time, with a checkpoint between
  batches, so a flood never starves the control socket or the signal handler;
  the socket's receive high-water mark (100) bounds what ZeroMQ processes at
  once, and makes a fast peer wait for the daemon, not the other way round.
- Memory: after many unsubscriptions, freed heap goes back to the OS
  (glibc's malloc_trim), so a flood's memory does not stay with the daemon.

A well-behaved client subscribes to a few task ids (36 bytes), to everything
(the empty topic) and, for a moment, to sync probes.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import structlog
import zmq
import zmq.asyncio

from ..memory import malloc_trim
from .connections import shut_down_tcp

__all__ = ["MAX_BYTES_PER_PEER", "MAX_TOPIC", "SubscriptionGuard"]

log = structlog.get_logger("hdsp.server")

#: The longest topic a peer may subscribe to (task ids are 36 bytes).
MAX_TOPIC = 256
#: Bytes of topics one peer process may hold: room for 1,024 task ids (36 bytes)
#: and sync probes, and what bounds the work of freeing a cut peer's trie.
MAX_BYTES_PER_PEER = 40 * 1024
#: Room for the framing of a subscription: "\x01" (ZMTP 3.0) or "\x09SUBSCRIBE".
_SUBSCRIBE_OVERHEAD = 16
#: What CURVE wraps around a message: "\x07MESSAGE", a nonce, a MAC and flags
#: (ZeroMQ RFC 26). The cap then also lets CURVE's INITIATE command through.
_CURVE_OVERHEAD = 33
#: Subscription messages handled before other tasks get a turn.
_BATCH = 256
#: Unsubscriptions after which freed memory is handed back to the OS.
_TRIM_AFTER = 2048

_SO_PEERCRED_FORMAT = "3i"  # struct ucred: pid, uid, gid


class SubscriptionGuard:
    """Reads the subscriptions of one XPUB socket and keeps them within bounds."""

    def __init__(
        self,
        *,
        endpoint: str,
        on_subscribe: Callable[[bytes], Awaitable[None]],
        max_per_peer: int = 1024,
        tcp_endpoint: str | None = None,
    ) -> None:
        self._path = endpoint.removeprefix("ipc://") if endpoint.startswith("ipc://") else None
        #: The port of the socket's TCP endpoint, if it has one.
        self._tcp_port = None if tcp_endpoint is None else int(tcp_endpoint.rsplit(":", 1)[1])
        self._on_subscribe = on_subscribe
        self.max_per_peer = max_per_peer
        #: Per peer address, the topics it holds (a topic may be held twice).
        self._held: dict[str, Counter[bytes]] = {}
        #: Per peer address, the bytes of the topics it holds.
        self._held_bytes: Counter[str] = Counter()
        #: Per peer address, its token bucket: tokens, when last filled, and
        #: whether it was cut since it last had a token.
        self._budgets: dict[str, tuple[float, float, bool]] = {}
        self._unsubscribed = 0
        #: Peers whose connections were cut, for tests and logs.
        self.cuts = 0

    @staticmethod
    def max_frame(*, curve: bool = False) -> int:
        """The socket's MAXMSGSIZE: a subscription to a topic of `MAX_TOPIC`
        bytes, and its framing (and CURVE's, on TCP)."""
        return MAX_TOPIC + _SUBSCRIBE_OVERHEAD + (_CURVE_OVERHEAD if curve else 0)

    @staticmethod
    def configure(pub: zmq.asyncio.Socket) -> None:
        """Socket options the guard relies on; set before bind."""
        pub.setsockopt(zmq.MAXMSGSIZE, SubscriptionGuard.max_frame())
        # libzmq does a pipe's whole backlog of subscriptions (trie work, ~30 us
        # each) in one call of ours: at 1000 a churning peer stalled it for
        # seconds, at 100 for about a tenth of one (measured on 2 busy cores).
        pub.setsockopt(zmq.RCVHWM, 100)
        # Every subscription and unsubscription, also of a topic another peer holds.
        pub.setsockopt(zmq.XPUB_VERBOSER, 1)

    def held(self) -> int:
        return sum(sum(c.values()) for c in self._held.values())

    async def run(self, pub: zmq.asyncio.Socket) -> None:
        drain: zmq.Socket[bytes] = zmq.Socket.shadow(pub.underlying)
        while True:
            first = await pub.recv(copy=False)
            await self._handle(first)
            for _ in range(_BATCH):
                try:
                    frame = drain.recv(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                await self._handle(frame)
            if self._unsubscribed >= _TRIM_AFTER:
                self._unsubscribed = 0
                trim = malloc_trim()  # (looked up by the warm-up: cached)
                if trim is not None:
                    trim(0)
            await anyio.lowlevel.checkpoint()

    async def _handle(self, frame: zmq.Frame) -> None:
        msg = frame.bytes
        if not msg or msg[0] not in (0, 1):
            return  # not a subscription (a peer may send anything upstream)
        topic = msg[1:]
        peer: str | None
        try:
            peer = str(frame.get("Peer-Address"))
        except zmq.ZMQError:
            peer = None  # ZeroMQ's own unsubscription for a peer that went away
        else:
            with contextlib.suppress(zmq.ZMQError):  # over TCP: who, at that address
                peer = f"{frame.get('User-Id')}@{peer}"
        if peer is not None and not self._spend(peer):
            return
        if msg[0] == 0:
            self._forget(peer, topic)
            return
        key = peer or "?"
        held = self._held.setdefault(key, Counter())
        held[topic] += 1
        self._held_bytes[key] += len(topic)
        if held.total() > self.max_per_peer:
            self._cut_peer(key, f"holds more than {self.max_per_peer} subscriptions")
            return
        if self._held_bytes[key] > MAX_BYTES_PER_PEER:
            self._cut_peer(key, f"holds more than {MAX_BYTES_PER_PEER} bytes of topics")
            return
        await self._on_subscribe(topic)

    def _spend(self, peer: str) -> bool:
        """Take a token from the peer's bucket; False when it is empty. The first
        message refused after a refill cuts the peer's connections (once: what it
        queued before the cut still arrives, and is only read)."""
        capacity, rate = 4.0 * self.max_per_peer, float(self.max_per_peer)
        now = time.monotonic()
        tokens, stamp, was_cut = self._budgets.get(peer, (capacity, now, False))
        tokens = min(capacity, tokens + (now - stamp) * rate)
        if len(self._budgets) > 4 * self.max_per_peer:  # forget idle peers
            self._budgets = {p: b for p, b in self._budgets.items() if p in self._held}
        if tokens >= 1:
            self._budgets[peer] = (tokens - 1, now, False)
            return True
        self._budgets[peer] = (tokens, now, True)
        if not was_cut:
            self._cut_peer(peer, "sends (un)subscriptions faster than its budget")
        return False

    def _cut_peer(self, peer: str, why: str) -> None:
        log.warning("cutting an events peer's connections", peer=peer, reason=why)
        self._held.pop(peer, None)  # (its bucket stays: it must earn a new one)
        self._held_bytes.pop(peer, None)
        self.cuts += 1
        self._cut(peer)

    def _forget(self, peer: str | None, topic: bytes) -> None:
        self._unsubscribed += 1
        if peer is not None:
            candidates = [peer]
        else:  # a peer went away; any that holds the topic may have been it
            candidates = [p for p, held in self._held.items() if topic in held]
        for key in candidates:
            held = self._held.get(key)
            if held is None or topic not in held:
                continue
            held[topic] -= 1
            self._held_bytes[key] -= len(topic)
            if held[topic] <= 0:
                del held[topic]
            if not held:
                del self._held[key]
                self._held_bytes.pop(key, None)
            return

    def _cut(self, peer: str) -> None:
        """Shut down this socket's connections from the peer's process (over
        TCP: from the peer's address)."""
        if "@" in peer:
            if self._tcp_port is not None:
                shut_down_tcp(self._tcp_port, peer=peer.rsplit("@", 1)[1])
            return
        pid_text = peer.rsplit(":", 1)[-1]
        if self._path is None or not pid_text.isdigit():
            return
        pid = int(pid_text)
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                fd = int(name)
                if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                    continue
                sock = socket.socket(fileno=os.dup(fd))
                try:
                    if sock.family != socket.AF_UNIX or sock.getsockname() != self._path:
                        continue
                    cred = sock.getsockopt(
                        socket.SOL_SOCKET,
                        socket.SO_PEERCRED,
                        struct.calcsize(_SO_PEERCRED_FORMAT),
                    )
                    if struct.unpack(_SO_PEERCRED_FORMAT, cred)[0] == pid:
                        sock.shutdown(socket.SHUT_RDWR)
                finally:
                    sock.close()  # closes our duplicate only
