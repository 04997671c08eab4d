"""Finding the daemon: its runtime dir and the discovery file it writes there."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import msgspec
import platformdirs

from hdsp.protocol import Discovery, discovery_path

from .errors import DaemonNotRunning

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


def find_daemon(explicit_runtime_dir: Path | str | None = None) -> Discovery:
    directory = runtime_dir(explicit_runtime_dir)
    path = discovery_path(directory)
    hint = "Start it with `hdspd` (or `make run`, or `systemctl --user start hdspd`)."
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DaemonNotRunning(f"hdspd is not running (no {path}). {hint}") from None
    except OSError as exc:
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
