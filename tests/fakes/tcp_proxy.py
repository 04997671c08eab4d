"""A loopback TCP proxy a test can cut: a real network drop between hdsp and a
Jupyter server, in the test's own event loop::

    async with TcpProxy("127.0.0.1", server_port) as proxy:   # listens on 127.0.0.1:<free port>
        ...  # point the client at proxy.url
        proxy.down()     # every connection through it is cut at once (both ends
                         # closed, what was in flight lost), and new ones are
                         # refused until ...
        proxy.up()       # ... it forwards again

`connections` counts the connections it accepted and forwarded. Bytes are
forwarded as they come, in both directions; a connection accepted while the
proxy is down is closed before anything is read from it.
"""

from __future__ import annotations

from typing import Any

import anyio
from anyio.abc import SocketListener, SocketStream, TaskGroup

__all__ = ["TcpProxy"]

_CHUNK = 65536


class TcpProxy:
    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.port = 0
        self.connections = 0
        self._up = True
        self._cut = anyio.Event()
        self._listener: SocketListener | None = None
        self._tg: TaskGroup | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def down(self) -> None:
        """Cut every connection now, and refuse new ones until `up()`."""
        self._up = False
        cut, self._cut = self._cut, anyio.Event()
        cut.set()

    def up(self) -> None:
        self._up = True

    async def __aenter__(self) -> TcpProxy:
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = self._listener.extra(anyio.abc.SocketAttribute.local_port)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._listener.serve, self._handle)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._tg is not None and self._listener is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(*exc_info)
        await self._listener.aclose()

    async def _handle(self, client: SocketStream) -> None:
        async with client:
            if not self._up:
                return
            try:
                server = await anyio.connect_tcp(*self.upstream)
            except OSError:
                return
            self.connections += 1
            cut = self._cut
            async with server, anyio.create_task_group() as tg:

                async def pump(source: SocketStream, sink: SocketStream) -> None:
                    try:
                        while True:
                            data = await source.receive(_CHUNK)
                            await sink.send(data)
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                        pass
                    tg.cancel_scope.cancel()

                async def watch() -> None:
                    await cut.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(pump, client, server)
                tg.start_soon(pump, server, client)
                tg.start_soon(watch)
