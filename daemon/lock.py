"""An exclusive lock on a directory, held for the life of the process (flock: the
kernel releases it when the process dies, so a crash never leaves it stale)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["DirectoryLock", "LockHeld"]


class LockHeld(Exception):
    def __init__(self, path: Path, holder_pid: int | None) -> None:
        self.path = path
        self.holder_pid = holder_pid
        who = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(f"{path} is locked by {who}")


class DirectoryLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise LockHeld(self.path, int(holder) if holder.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DirectoryLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
