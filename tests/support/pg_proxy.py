"""A Unix-socket relay between a PostgreSQL client and the test server, that can
cut a connection the moment the client sends COMMIT: before the server gets it,
or after the server has answered it (the answer never reaches the client). The
server's side stays open, as when the network, not the server, is what failed:
the server goes on believing in the old session until it is ended.

Clients reach it through a URL whose host is `socket_dir` (libpq finds the
socket `.s.PGSQL.5432` there, as on the server's own)."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Literal

__all__ = ["PgProxy"]

_PORT_SOCKET = ".s.PGSQL.5432"
Cut = Literal["before", "after"]


class PgProxy:
    def __init__(self, server_socket_dir: Path) -> None:
        self._target = str(server_socket_dir / _PORT_SOCKET)
        self.socket_dir = Path(tempfile.mkdtemp(prefix="hdsp-pgp-", dir="/tmp"))
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.socket_dir / _PORT_SOCKET))
        self._listener.listen(16)
        self._lock = threading.Lock()
        self._cut: Cut | None = None
        #: Set once a connection was cut.
        self.cut_done = threading.Event()
        #: Every socket of every relay, closed with the proxy.
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_at_commit(self, when: Cut) -> None:
        """Cut the next connection that sends COMMIT, `when` relative to the server."""
        with self._lock:
            self._cut = when
            self.cut_done.clear()

    def _take_cut(self) -> Cut | None:
        with self._lock:
            cut, self._cut = self._cut, None
            return cut

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self._target)
            with self._lock:
                self._sockets += [client, server]
            _Relay(self, client, server).start()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


class _Relay:
    def __init__(self, proxy: PgProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        #: "after": COMMIT went to the server; its answer is to be swallowed.
        self.swallow = False

    def start(self) -> None:
        threading.Thread(target=self._upstream, daemon=True).start()
        threading.Thread(target=self._downstream, daemon=True).start()

    def _cut(self) -> None:
        """The client loses its connection; the server's stays, unanswered (until
        the proxy closes)."""
        self.proxy.cut_done.set()
        self.client.shutdown(socket.SHUT_RDWR)

    def _upstream(self) -> None:
        try:
            while data := self.client.recv(65536):
                if b"COMMIT" in data and (cut := self.proxy._take_cut()) is not None:
                    if cut == "before":
                        self._cut()
                        return
                    self.swallow = True
                self.server.sendall(data)
        except OSError:
            return

    def _downstream(self) -> None:
        try:
            while data := self.server.recv(65536):
                if self.swallow:
                    self._cut()
                    return
                self.client.sendall(data)
        except OSError:
            return
