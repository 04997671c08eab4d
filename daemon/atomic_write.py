"""Replacing a file so that a crash leaves the old file or the new one, never a mix
or nothing: the settings file, the discovery file, the systemd unit.

A temporary file in the same directory (so the rename cannot cross file systems),
given its mode before any byte is written, synced, renamed over the target, and
then the directory synced so that the rename itself lasts. (The file tools write
inside a workspace through directory descriptors instead, see
:mod:`hdsp.daemon.tools.workspace`.)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["fsync_directory", "write_atomically"]


def fsync_directory(directory: Path) -> None:
    """Make the entries of `directory` (a rename into it, say) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace `path` with `data`, atomically and durably; the file gets `mode`
    (private unless said otherwise)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)
