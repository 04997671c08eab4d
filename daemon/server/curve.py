"""CURVE on the daemon's TCP endpoints: a team daemon.

hdspd listens on TCP only when the `tcp.listen` setting names an address, and
then only with ZeroMQ CURVE (RFC 26), which encrypts every frame and proves both
ends' keys. Nothing here offers TCP without it.

- `TcpListener` makes a socket's next bind a CURVE server, with the daemon's
  key pair (:mod:`hdsp.daemon.config.curve_keys` reads it) and ZAP deciding
  every handshake, and `ZAP_ENFORCE_DOMAIN`, so that no ZAP handler means no
  one comes in.
- **ZAP** (RFC 27): libzmq asks the daemon about every CURVE handshake; the
  answer comes from pyzmq's `zmq.auth.Authenticator`, served by a task of the
  server's task group (`ZapHandler.serve`), which asks the authorised keys. A
  key not in them is refused (status 400): libzmq then closes the connection
  before any frame reaches the daemon, and the client's socket reports a failed
  authentication. An authorised key's NAME becomes the connection's User-Id,
  which every frame on it carries: who the client is, whatever name its
  `Connect` gives.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import structlog
import zmq
import zmq.asyncio
import zmq.auth
from anyio.abc import TaskStatus
from zmq.utils import z85

from hdsp.protocol import tcp_endpoints

__all__ = ["ZAP_DOMAIN", "AuthorizedNames", "TcpBindFailed", "TcpListener", "ZapHandler"]

log = structlog.get_logger("hdsp.server")

#: The ZAP domain of the TCP endpoints (the ipc:// endpoints have none: ZAP
#: never hears of them).
ZAP_DOMAIN = "hdsp"
#: How often one refused key is logged (seconds): a client retries every few
#: hundred milliseconds, and its refusals must not flood the log.
_REFUSAL_LOG_INTERVAL = 60.0
_REFUSALS_REMEMBERED = 256


class TcpBindFailed(Exception):
    """A TCP endpoint could not be bound (its port taken, say); the message
    names it and the setting."""


class AuthorizedNames(Protocol):
    """Who may come in over TCP (the authorised keys file, read when it changes)."""

    def name_of(self, key: bytes) -> str | None:
        """The name the Z85 public `key` is authorised under; None: refused."""

    def allows(self, name: str) -> bool:
        """Whether some key is authorised under `name` now."""

    def take_revoked(self) -> set[str]:
        """The names whose key was revoked or replaced since the last call."""

    def count(self) -> int:
        """How many keys are authorised now."""


@dataclass(frozen=True)
class TcpListener:
    """What the server needs to listen on TCP: the address (`tcp.listen`), the
    daemon's key pair (Z85) and who is authorised."""

    address: str
    public_key: bytes
    secret_key: bytes
    authorized: AuthorizedNames

    def __repr__(self) -> str:  # never the secret key, whoever prints it
        return f"TcpListener(address={self.address!r}, public_key={self.public_key!r})"

    @property
    def control(self) -> str:
        return tcp_endpoints(self.address).control

    @property
    def events(self) -> str:
        return tcp_endpoints(self.address).events

    def secure(self, sock: zmq.Socket[Any]) -> None:
        """Make `sock`'s next bind a CURVE server whose handshakes ZAP decides
        (options apply to the binds after them: its ipc:// endpoint, bound
        before, stays as it was)."""
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public_key)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret_key)
        sock.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN.encode())
        # No ZAP handler (it failed to start) refuses, never lets everyone in.
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        # A peer that says nothing after connecting holds a descriptor this long.
        sock.setsockopt(zmq.HANDSHAKE_IVL, 10_000)
        if self.address.startswith("tcp://["):
            sock.setsockopt(zmq.IPV6, 1)


class ZapHandler(zmq.auth.Authenticator):
    """pyzmq's ZAP handler, asked about the authorised keys file: a key in it
    is let in, under its name as User-Id; any other key is refused."""

    def __init__(self, context: zmq.Context[Any], keys: AuthorizedNames) -> None:
        super().__init__(context, log=logging.getLogger("hdsp.zap"))
        self._keys = keys
        #: The name the last key let in has (its User-Id, asked for right after).
        self._granted: tuple[bytes, str] | None = None
        self._refused: OrderedDict[bytes, float] = OrderedDict()
        self.configure_curve_callback(ZAP_DOMAIN, self)

    def callback(self, domain: str, key: bytes) -> bool:
        """pyzmq's credentials callback: whether the Z85 public `key` may come in."""
        try:
            name = self._keys.name_of(key)
        except Exception:  # never a crash of the handler: refused, and said
            log.exception("authorised keys lookup failed; client refused")
            name = None
        if name is None:
            self._log_refusal(key)
            self._granted = None
            return False
        self._granted = (key, name)
        log.info("tcp client authenticated", user=name, key=key.decode("ascii", "replace"))
        return True

    def curve_user_id(self, client_public_key: bytes) -> str:
        granted = self._granted
        if granted is None or granted[0] != z85.encode(client_public_key):
            return ""  # (not reached: pyzmq asks right after `callback` said yes)
        return granted[1]

    def _log_refusal(self, key: bytes) -> None:
        now = time.monotonic()
        last = self._refused.get(key)
        if last is not None and now - last < _REFUSAL_LOG_INTERVAL:
            return
        self._refused[key] = now
        self._refused.move_to_end(key)
        while len(self._refused) > _REFUSALS_REMEMBERED:
            self._refused.popitem(last=False)
        log.warning(
            "tcp client refused: its key is not authorised",
            key=key.decode("ascii", "replace"),
            hint="hdspd keys authorize NAME KEY",
        )

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Answer libzmq's ZAP requests until cancelled (`start()` first)."""
        assert self.zap_socket is not None, "start() the handler before serving"
        ready = zmq.asyncio.Socket.shadow(self.zap_socket.underlying)
        task_status.started()
        while True:
            await ready.poll(zmq.POLLIN)
            while True:
                try:
                    request = self.zap_socket.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                try:
                    await self.handle_zap_message(request)
                except Exception:
                    # An answer is owed (ZAP's socket is a REP): a refusal.
                    log.exception("ZAP request failed; client refused")
                    if len(request) > 1:
                        with contextlib.suppress(zmq.ZMQError):
                            self._send_zap_reply(request[1], b"500", b"Internal error")
