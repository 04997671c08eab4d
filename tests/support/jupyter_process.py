"""Running a real Jupyter server (or JupyterLab) with hdsp's extension for tests.

Jupyter's configuration, data and runtime dirs live under the test's root, so the
developer's own Jupyter is never read or changed. The server picks a free port and
writes it to its `jpserver-PID.json` in the runtime dir: the test
waits for that file, then reads the URL and token from it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.daemon_process import DaemonProcess
from tests.support.server_process import ServerProcess

__all__ = ["JupyterProcess"]

EXTENSION = "hdsp.client.jupyterlab"
#: jupyter-collaboration's JupyterLab extensions.
COLLABORATION_LABEXTENSIONS = ("@jupyter/collaboration-extension", "@jupyter/docprovider-extension")


class JupyterProcess(ServerProcess):
    def __init__(
        self,
        root: Path,
        *,
        hdsp_runtime_dir: Path,
        root_dir: Path,
        app: str = "server",
        config: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        rtc: bool = False,
        collaboration: bool = True,
        python: str | Path = sys.executable,
        hdsp_extension: bool = True,
    ) -> None:
        super().__init__(f"jupyter {app}", root / f"jupyter-{app}.stderr")
        self.root = root
        #: The interpreter that runs Jupyter (another venv's, for Jupyter AI).
        self.python = python
        #: Load hdsp's server extension (False for a Jupyter without hdsp in it).
        self.hdsp_extension = hdsp_extension
        self.hdsp_runtime_dir = hdsp_runtime_dir
        self.root_dir = root_dir
        self.app = app
        self.config_dir = root / "jupyter-config"
        self.runtime_dir = root / "jupyter-runtime"
        self.token = os.urandom(16).hex()
        self.extra_config = dict(config or {})
        self.extra_env = dict(env or {})
        self.args = list(args)
        #: Real-time collaboration (jupyter-collaboration, a dev dependency) on: off
        #: by default (`disable_rtc`, its own switch), so that a test gets the
        #: JupyterLab it asks for.
        self.rtc = rtc
        #: jupyter-collaboration there at all: False runs the server as if it were
        #: not installed (its server extension not loaded, its JupyterLab
        #: extensions disabled), which `disable_rtc` alone does not quite do.
        self.collaboration = collaboration
        self.info: dict[str, Any] = {}

    @classmethod
    def beside(cls, daemon: DaemonProcess, root_dir: Path, **options: Any) -> JupyterProcess:
        """A server (`options` as for the class) that finds `daemon`, its own
        files under the daemon's root, serving `root_dir`."""
        return cls(daemon.root, hdsp_runtime_dir=daemon.runtime_dir, root_dir=root_dir, **options)

    @property
    def url(self) -> str:
        """The server's base URL, ending in a slash."""
        return str(self.info["url"])

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http")

    def start(self, timeout: float = 60.0) -> None:
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.runtime_dir.mkdir(parents=True, exist_ok=True)
        # The extension is named here too, so these tests do not depend on how the
        # package was installed (the wheel test checks the installed enable file).
        server: dict[str, Any] = (
            {"jpserver_extensions": {EXTENSION: True}} if self.hdsp_extension else {}
        )
        config: dict[str, Any] = {"ServerApp": server}
        if not self.collaboration:
            server["jpserver_extensions"]["jupyter_server_ydoc"] = False
            (self.config_dir / "labconfig").mkdir(exist_ok=True)
            (self.config_dir / "labconfig" / "page_config.json").write_text(
                json.dumps({"disabledExtensions": dict.fromkeys(COLLABORATION_LABEXTENSIONS, True)})
            )
        elif not self.rtc:
            config["YDocExtension"] = {"disable_rtc": True}
        for section, values in self.extra_config.items():
            config.setdefault(section, {}).update(values)
        for name in ("jupyter_server_config.json", "jupyter_lab_config.json"):
            (self.config_dir / name).write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HDSP_", "JUPYTER_"))}
        env.update(
            JUPYTER_CONFIG_DIR=str(self.config_dir),
            JUPYTER_RUNTIME_DIR=str(self.runtime_dir),
            JUPYTER_DATA_DIR=str(self.root / "jupyter-data"),
            JUPYTER_PLATFORM_DIRS="1",
            HDSP_RUNTIME_DIR=str(self.hdsp_runtime_dir),
            PYTHON_KEYRING_BACKEND="keyrings.alt.file.PlaintextKeyring",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        module = "jupyterlab" if self.app == "lab" else "jupyter_server"
        proc = self._spawn(
            [
                str(self.python),
                "-m",
                module,
                "--no-browser",
                "--ip=127.0.0.1",
                "--port=0",
                "--port-retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root_dir}",
                # (CI runs as root; Jupyter refuses that unless told.)
                *(["--allow-root"] if os.geteuid() == 0 else []),
                *self.args,
            ],
            env=env,
            cwd=self.root_dir,
        )
        info_file = self.runtime_dir / f"jpserver-{proc.pid}.json"
        deadline = time.monotonic() + timeout
        # Jupyter creates the file, then writes it: wait until it holds its JSON.
        while not _written(info_file):
            if proc.poll() is not None:
                raise AssertionError(f"{self.name} exited ({proc.returncode}):\n{self.stderr()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not start:\n{self.stderr()}")
            time.sleep(0.05)  # the server writes the file as it starts
        self.info = json.loads(info_file.read_text())
        # The file is written just before the server binds its port (on its loop's
        # first turn): wait until the port takes a connection.
        while True:
            try:
                socket.create_connection((self.info["hostname"], self.info["port"]), 5).close()
                return
            except ConnectionRefusedError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{self.name} does not listen:\n{self.stderr()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited in 30 s."""
        self.terminate()


def _written(info_file: Path) -> bool:
    """Whether Jupyter's server info file is there and whole (it is created
    empty, then written)."""
    try:
        json.loads(info_file.read_text())
    except (FileNotFoundError, ValueError):
        return False
    return True
