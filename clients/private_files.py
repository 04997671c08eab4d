"""The client's own files, read only when they are what they should be and
written whole: the discovery file it trusts, its keys and remotes, its ACP
session records."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["UntrustedFile", "read_checked", "write_whole"]


class UntrustedFile(Exception):
    """The file is not one this client may trust; the message says why."""


def read_checked(path: Path, problem_of: Callable[[os.stat_result, Path], str | None]) -> bytes:
    """The bytes of `path`, when `problem_of` finds nothing wrong with the open
    file (checked on it, so it cannot be swapped in between; never through a
    symlink). FileNotFoundError if it is missing; UntrustedFile if it is not
    to be trusted."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        problem = problem_of(os.fstat(fd), path)
        if problem is not None:
            raise UntrustedFile(problem)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_whole(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, atomically (a reader sees the old file or the
    new one), mode 0600 from the first byte."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
