"""Real Jupyter servers that run kernels, started on loopback with a token, for
the tests of remote kernels (issue 25):

- ``kernelgateway``: Jupyter Kernel Gateway (a dev dependency);
- ``server``: Jupyter Server itself (a dev dependency);
- ``enterprisegateway``: Jupyter Enterprise Gateway with its default local
  process proxy. It pins jupyter_server < 2, jupyter_client < 7 and pyzmq < 25,
  which cannot share hdsp's environment, so it gets a venv of its own, made
  with pip once (`<venv>/hdsp-test-cache/enterprise-gateway-<version>/`). A venv
  that cannot be made fails the tests that need it, with pip's reason.

Every server keeps its Jupyter dirs under the test's root, and its kernels run
in `root_dir` with the Python of the server's own environment. `cull` turns on
the server's culling of idle kernels (every second, connected ones too).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Literal

import httpx2

from tests.support.cached_venv import cached_venv
from tests.support.server_process import ServerProcess

__all__ = [
    "ENTERPRISE_GATEWAY",
    "KINDS",
    "EnterpriseGatewayUnavailable",
    "KernelServer",
    "ServerKind",
    "enterprise_gateway_python",
]

ServerKind = Literal["kernelgateway", "server", "enterprisegateway"]
KINDS: tuple[ServerKind, ...] = ("kernelgateway", "server", "enterprisegateway")

#: The Enterprise Gateway release the tests run.
ENTERPRISE_GATEWAY = "3.3.0"


class EnterpriseGatewayUnavailable(RuntimeError):
    """Enterprise Gateway's venv could not be made."""


def enterprise_gateway_python() -> Path:
    """The interpreter of Enterprise Gateway's venv, made on first use."""
    return cached_venv(
        f"enterprise-gateway-{ENTERPRISE_GATEWAY}",
        # Its kernels' ipykernel, within its jupyter_client < 7.
        [f"jupyter_enterprise_gateway=={ENTERPRISE_GATEWAY}", "ipykernel>=6.29,<7"],
        what=f"Jupyter Enterprise Gateway {ENTERPRISE_GATEWAY}",
        failure=EnterpriseGatewayUnavailable,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class KernelServer(ServerProcess):
    """One Jupyter server of `kind`, on 127.0.0.1 with a random token."""

    stop_timeout = 10.0
    own_session = True

    def __init__(
        self,
        kind: ServerKind,
        root: Path,
        *,
        cull: float | None = None,
        json_only: bool = False,
        port: int = 0,
        token: str | None = None,
    ) -> None:
        """`json_only`: Jupyter Server speaks only the JSON WebSocket protocol
        (not v1); `port` and `token`: those of a server started before (a
        server that restarts), else new ones."""
        super().__init__(kind, root / f"{kind}.stderr")
        self.kind = kind
        self.root = root
        self.root_dir = root / "kernels"
        self.cull = cull
        self.json_only = json_only
        self.token = token if token is not None else os.urandom(24).hex()
        self.port = port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _command(self, python: Path) -> list[str]:
        port, token = str(self.port), self.token
        culling = []
        if self.cull is not None:
            culling = [
                f"--MappingKernelManager.cull_idle_timeout={self.cull:g}",
                "--MappingKernelManager.cull_interval=1",
                "--MappingKernelManager.cull_connected=True",
            ]
        root = ["--allow-root"] if os.geteuid() == 0 else []
        if self.kind == "kernelgateway":
            return [
                str(python),
                "-m",
                "kernel_gateway",
                "--KernelGatewayApp.ip=127.0.0.1",
                f"--KernelGatewayApp.port={port}",
                "--KernelGatewayApp.port_retries=0",
                f"--KernelGatewayApp.auth_token={token}",
                "--JupyterWebsocketPersonality.list_kernels=True",
                *culling,
            ]
        if self.kind == "server":
            return [
                str(python),
                "-m",
                "jupyter_server",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--port-retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={self.root_dir}",
                *root,
                *culling,
                *(
                    ["--ZMQChannelsWebsocketConnection.kernel_ws_protocol="]
                    if self.json_only
                    else []
                ),
            ]
        return [
            str(python),
            "-m",
            "enterprise_gateway",
            "--EnterpriseGatewayApp.ip=127.0.0.1",
            f"--EnterpriseGatewayApp.port={port}",
            "--EnterpriseGatewayApp.port_retries=0",
            f"--EnterpriseGatewayApp.auth_token={token}",
            "--EnterpriseGatewayApp.list_kernels=True",
            # It refuses to start kernels for root by default (CI runs as root).
            "--EnterpriseGatewayApp.unauthorized_users=nobody",
            *culling,
        ]

    def start(self, timeout: float = 60.0) -> None:
        python = (
            enterprise_gateway_python()
            if self.kind == "enterprisegateway"
            else Path(sys.executable)
        )
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HDSP_", "JUPYTER_"))}
        env.update(
            JUPYTER_CONFIG_DIR=str(self.root / "jupyter-config"),
            JUPYTER_RUNTIME_DIR=str(self.root / "jupyter-runtime"),
            JUPYTER_DATA_DIR=str(self.root / "jupyter-data"),
            JUPYTER_PLATFORM_DIRS="1",
            # The kernelspec says `python`: the server's environment's.
            PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}",
            PYDEVD_DISABLE_FILE_VALIDATION="1",
            PYTHONUNBUFFERED="1",
        )
        proc = self._spawn(self._command(python), env=env, cwd=self.root_dir)
        headers = {"Authorization": f"token {self.token}"} if self.token else {}
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"{self.kind} exited ({proc.returncode}):\n{self.stderr()}")
            try:
                answer = httpx2.get(f"{self.url}api/kernelspecs", headers=headers, timeout=5)
                if answer.status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind} did not answer:\n{self.stderr()}")
            time.sleep(0.1)  # the server is starting

    def stop(self) -> None:
        """SIGTERM, then SIGKILL for it and its kernels if it has not exited in 10 s."""
        self.terminate()
