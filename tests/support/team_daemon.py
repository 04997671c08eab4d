"""A team daemon for tests: the real hdspd listening on loopback TCP under CURVE,
set up with the real commands a team uses (`hdspd keys`, `hdsp keys generate`,
`hdspd keys authorize`, `hdsp remote add`), and `ss` to see what listens."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import zmq.auth

from .cli_process import cli_env
from .daemon_process import DaemonProcess

__all__ = ["TeamDaemon", "tcp_listeners"]


def tcp_listeners(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on, as `ss -ltnp` (iproute2) tells."""
    ss = shutil.which("ss")
    assert ss is not None, "these tests need `ss` (apt-get install iproute2; .ci/run does)"
    out = subprocess.run([ss, "-ltnpH"], capture_output=True, text=True, check=True).stdout
    ports = set()
    for line in out.splitlines():
        if f"pid={pid}," in line:
            local = line.split()[3]
            ports.add(int(local.rsplit(":", 1)[1]))
    return ports


def _free_port_pair() -> int:
    """A port P on 127.0.0.1 with P and P + 1 free (just now)."""
    while True:
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            if port >= 65534:
                continue
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port


class TeamDaemon:
    """Sets up `daemon` (not started) as a team daemon, and clients for it, each
    with a config dir of its own under the daemon's root."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.port = 0
        self.server_key = ""
        self.curve_dir = daemon.data_dir / "curve"

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def hdspd(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hdsp.daemon", *args],
            env=self.daemon.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def hdsp(self, client: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`hdsp ARGS` as the client whose config dir is `client`."""
        return subprocess.run(
            [sys.executable, "-m", "hdsp.client", *args],
            env=cli_env(self.daemon.runtime_dir, HDSP_CONFIG_DIR=str(client), **env),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def make_server_keys(self) -> str:
        done = self.hdspd("keys")
        assert done.returncode == 0, done.stderr
        self.server_key = done.stdout.strip()
        return self.server_key

    def configure(self, address: str | None = None) -> None:
        """Set tcp.listen (on a free loopback port pair unless `address`)."""
        if address is None:
            self.port = _free_port_pair()
            address = self.address
        self.daemon.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        settings = self.daemon.data_dir / "settings.json"
        settings.write_text(json.dumps({"tcp": {"listen": address}}))
        os.chmod(settings, 0o600)

    def start(self, *args: str) -> None:
        """Server keys, tcp.listen, and the daemon started; a port taken between
        choosing it and binding it is chosen again."""
        if not self.server_key:
            self.make_server_keys()
        for _ in range(5):
            self.configure()
            try:
                self.daemon.start(*args)
                return
            except AssertionError:
                if "Address already in use" not in self.daemon.stderr():
                    raise
        raise AssertionError(f"no free port pair in 5 tries:\n{self.daemon.stderr()}")

    def client(self, name: str, *, authorize: bool = True) -> Path:
        """A client's config dir with its key pair and the remote "team";
        `authorize` lets its key in under `name`."""
        config = self.daemon.root / "clients" / name
        made = self.hdsp(config, "keys", "generate")
        assert made.returncode == 0, made.stderr
        if authorize:
            # (`--`: a Z85 key may begin with "-", as the CLI's hints write it)
            done = self.hdspd("keys", "authorize", name, "--", self.public_key(config))
            assert done.returncode == 0, done.stderr
        added = self.hdsp(
            config, "remote", "add", "team", self.address, f"--server-key={self.server_key}"
        )
        assert added.returncode == 0, added.stderr
        return config

    @staticmethod
    def public_key(config: Path) -> str:
        return zmq.auth.load_certificate(config / "keys" / "client.key")[0].decode()

    @staticmethod
    def secret_key(path: Path) -> str:
        secret = zmq.auth.load_certificate(path)[1]
        assert secret is not None
        return secret.decode()
