"""A real Jupyter server with hdsp's extension, next to the real hdspd of the suite's
`daemon_process` fixture (against the fake model)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse
from tornado.websocket import WebSocketClientConnection, websocket_connect

from tests.support.daemon_process import DaemonProcess, call_failed
from tests.support.jupyter_process import JupyterProcess


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.csv").write_text("x,y\n1,2\n3,4\n")
    return ws


@pytest.fixture
def jupyter_process(
    daemon_process: DaemonProcess, workspace: Path, request: pytest.FixtureRequest
) -> Iterator[JupyterProcess]:
    """A Jupyter server, not started yet, that finds `daemon_process`."""
    proc = JupyterProcess.beside(daemon_process, workspace)
    try:
        yield proc
    finally:
        proc.finish(show_log=call_failed(request))


@pytest.fixture
def jupyter(daemon: DaemonProcess, jupyter_process: JupyterProcess) -> JupyterProcess:
    jupyter_process.start()
    return jupyter_process


class Lab:
    """The extension's HTTP surface, as the browser reaches it (with the token)."""

    def __init__(self, server: JupyterProcess) -> None:
        self.server = server
        self.http = AsyncHTTPClient()
        self.sockets: list[WebSocketClientConnection] = []

    def headers(self, authenticated: bool) -> dict[str, str]:
        return {"Authorization": f"token {self.server.token}"} if authenticated else {}

    async def fetch(
        self, path: str, *, body: Any = None, authenticated: bool = True
    ) -> HTTPResponse:
        """A request; the response whatever its status."""
        try:
            return await self.http.fetch(
                self.server.url + path,
                method="GET" if body is None else "POST",
                body=None if body is None else json.dumps(body),
                headers=self.headers(authenticated),
                raise_error=False,
                follow_redirects=False,
            )
        except HTTPClientError as exc:  # (raise_error=False still raises for 599)
            assert exc.response is not None
            return exc.response

    async def status(self) -> dict[str, Any]:
        response = await self.fetch("hdsp/status")
        assert response.code == 200, response.body
        return dict(json.loads(response.body))

    async def command(self, command: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = await self.fetch("hdsp/command", body={"command": command})
        return response.code, json.loads(response.body)

    async def events(
        self, since: int | None = None, *, authenticated: bool = True
    ) -> WebSocketClientConnection:
        query = "" if since is None else f"?since={since}"
        request = HTTPRequest(
            self.server.ws_url + "hdsp/events" + query, headers=self.headers(authenticated)
        )
        ws = await websocket_connect(request)
        self.sockets.append(ws)
        return ws

    def close(self) -> None:
        for ws in self.sockets:
            ws.close()


@pytest.fixture
async def lab(jupyter: JupyterProcess) -> AsyncIterator[Lab]:
    lab = Lab(jupyter)
    try:
        yield lab
    finally:
        lab.close()
