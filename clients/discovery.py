"""Finding the daemon: its runtime dir and the discovery file it writes there.

Both are trusted only when they are ours: a runtime dir or discovery file that
another user owns or can write could send this client (and the secrets it
sends) to a daemon of theirs. The checks are `hdsp.protocol`'s, the same the
daemon makes before it uses a runtime dir."""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

import msgspec
import platformdirs

from hdsp.protocol import (
    Discovery,
    discovery_path,
    private_dir_problem,
    private_file_problem,
)

from .errors import DaemonNotRunning
from .private_files import UntrustedFile, read_checked

__all__ = ["find_daemon", "runtime_dir"]

_decoder = msgspec.json.Decoder(Discovery)


def runtime_dir(explicit: Path | str | None = None) -> Path:
    """The daemon's runtime dir: the argument, else HDSP_RUNTIME_DIR, else the
    per-user default (the same rule hdspd follows)."""
    if explicit is not None:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get("HDSP_RUNTIME_DIR")
    if env:
        return Path(env).expanduser().absolute()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir("hdsp"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _untrusted(problem: str) -> DaemonNotRunning:
    return DaemonNotRunning(
        f"hdsp will not use this runtime dir: {problem}. Someone else could be answering "
        "in hdspd's place, so nothing was sent. Remove it (or ask its owner to), or point "
        "hdsp and hdspd at a directory of your own with --runtime-dir, HDSP_RUNTIME_DIR or "
        "XDG_RUNTIME_DIR."
    )


def _read_discovery(path: Path) -> bytes:
    """The discovery file's bytes, if it is a regular file of ours that nobody
    else can write (checked on the open file, so it cannot be swapped between)."""
    try:
        return read_checked(path, private_file_problem)
    except UntrustedFile as exc:
        raise _untrusted(str(exc)) from None


def find_daemon(explicit_runtime_dir: Path | str | None = None) -> Discovery:
    directory = runtime_dir(explicit_runtime_dir)
    path = discovery_path(directory)
    hint = "Start it with `hdspd` (or `make run`, or `systemctl --user start hdspd`)."
    try:
        problem = private_dir_problem(directory)
    except FileNotFoundError:
        raise DaemonNotRunning(f"hdspd is not running (no {directory}). {hint}") from None
    except OSError as exc:
        raise DaemonNotRunning(f"Cannot check {directory}: {exc}. {hint}") from None
    if problem is not None:
        raise _untrusted(problem)
    try:
        raw = _read_discovery(path)
    except FileNotFoundError:
        raise DaemonNotRunning(f"hdspd is not running (no {path}). {hint}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _untrusted(f"{path} is a symbolic link") from None
        raise DaemonNotRunning(f"Cannot read {path}: {exc}. {hint}") from None
    try:
        info = _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise DaemonNotRunning(f"{path} is not a valid discovery file ({exc}). {hint}") from None
    if not _alive(info.pid):
        raise DaemonNotRunning(
            f"hdspd (pid {info.pid}) named in {path} is no longer running. {hint}"
        )
    return info
