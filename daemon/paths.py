"""Where the daemon keeps its data (SQLite, settings) and its runtime files
(sockets, discovery file, lock). Flags win over `HDSP_DATA_DIR` /
`HDSP_RUNTIME_DIR`, which win over platformdirs' per-user defaults."""

from __future__ import annotations

import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

from hdsp.protocol import discovery_path, private_dir_problem

__all__ = [
    "Paths",
    "UnsafeRuntimeDir",
    "default_runtime_dir",
    "ensure_private_runtime_dir",
    "make_private_dir",
    "resolve_paths",
]

# Unix domain socket paths are limited to 107 bytes on Linux.
_MAX_SOCKET_PATH = 100


def default_runtime_dir() -> Path:
    import platformdirs  # here: not imported when the directories are given

    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to /tmp.
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir("hdsp"))


@dataclass(frozen=True)
class Paths:
    data_dir: Path
    runtime_dir: Path

    @property
    def database(self) -> Path:
        return self.data_dir / "hdsp.sqlite3"

    @property
    def settings_file(self) -> Path:
        return self.data_dir / "settings.json"

    @property
    def curve_dir(self) -> Path:
        """The CURVE keys of the TCP endpoint: the daemon's key pair
        (`server.key`, `server.key_secret`) and the authorised clients' keys
        (`authorized_keys`), every file 0600 in a 0700 directory."""
        return self.data_dir / "curve"

    @property
    def data_lock(self) -> Path:
        return self.data_dir / "hdspd.lock"

    @property
    def runtime_lock(self) -> Path:
        return self.runtime_dir / "hdspd.lock"

    @property
    def discovery_file(self) -> Path:
        return discovery_path(self.runtime_dir)

    @property
    def control_endpoint(self) -> str:
        return f"ipc://{self.runtime_dir / 'control'}"

    @property
    def events_endpoint(self) -> str:
        return f"ipc://{self.runtime_dir / 'events'}"

    def check(self) -> None:
        """Raise ValueError with advice when the socket paths would be too long."""
        longest = len(str(self.runtime_dir / "control"))
        if longest > _MAX_SOCKET_PATH:
            raise ValueError(
                f"The runtime dir {self.runtime_dir} is too long for a Unix socket path "
                f"({longest} > {_MAX_SOCKET_PATH} bytes); choose a shorter one with "
                "--runtime-dir or HDSP_RUNTIME_DIR."
            )


def _default_data_dir() -> Path:
    import platformdirs  # here: not imported when the directories are given

    return Path(platformdirs.user_data_dir("hdsp"))


def resolve_paths(data_dir: Path | None = None, runtime_dir: Path | None = None) -> Paths:
    env_data = os.environ.get("HDSP_DATA_DIR")
    env_runtime = os.environ.get("HDSP_RUNTIME_DIR")
    data = data_dir or (Path(env_data) if env_data else _default_data_dir())
    runtime = runtime_dir or (Path(env_runtime) if env_runtime else default_runtime_dir())
    return Paths(data_dir=data.expanduser().absolute(), runtime_dir=runtime.expanduser().absolute())


class UnsafeRuntimeDir(Exception):
    """The runtime dir belongs to someone else or others can write it; the
    message says which and what to do."""


def ensure_private_runtime_dir(path: Path) -> None:
    """Make `path` the daemon's private runtime dir: create it (and any missing
    parent, as with `/tmp/runtime-USER` when XDG_RUNTIME_DIR is unset) with mode
    0700; tighten an existing one of ours to 0700; refuse (UnsafeRuntimeDir) one
    that is a symlink, belongs to another user, or sits where another user could
    replace it. The client makes the same checks (`private_dir_problem`)."""
    missing: list[Path] = []
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # made meanwhile by someone: checked below like any existing one
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        fd = None  # not a directory, or a symlink: private_dir_problem says which
    if fd is not None:
        try:
            st = os.fstat(fd)
            if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
                os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
    problem = private_dir_problem(path)
    if problem is not None:
        raise UnsafeRuntimeDir(
            f"hdspd will not use the runtime dir {path}: {problem}. Another user could "
            "answer clients in hdspd's place or move its sockets away. Remove it, or "
            "choose a directory of your own with --runtime-dir, HDSP_RUNTIME_DIR or "
            "XDG_RUNTIME_DIR."
        )


def make_private_dir(path: Path) -> int | None:
    """Make `path` (and its parents) if missing, and leave it 0700: the data dir
    holds every prompt and reply, the owner's alone. An existing one of ours that
    others may enter is tightened; its old mode is returned (None: nothing to do).
    Raises ValueError, with advice, for a directory another user owns."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise ValueError(
            f"{path} belongs to another user (uid {st.st_uid}); hdspd keeps its data "
            "only in a directory of its own. Choose another --data-dir."
        )
    old = stat.S_IMODE(st.st_mode)
    if old & 0o077:
        os.chmod(path, old & 0o700 | 0o700)
        return old
    return None
