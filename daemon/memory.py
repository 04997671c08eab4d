"""Giving freed memory back to the system.

CPython frees an object as soon as its last reference goes, but the memory stays
with the process: cycles wait for the collector's next full pass, and glibc
keeps freed heap for later mallocs instead of returning it. A daemon that
loaded thousands of tasks, then unloaded them, would keep their peak for ever.
`give_back()` collects the cycles, then has glibc return its free heap pages
(`malloc_trim`, on a worker thread: ctypes releases the GIL for it).

glibc's `malloc_trim` is looked up the first time it is needed (or by the
daemon's warm-up, :func:`malloc_trim`): finding libc runs `ldconfig -p`, a
process, which no start-up should wait for.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable

import anyio.to_thread

__all__ = ["give_back", "malloc_trim"]


@functools.cache
def malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim` (None on another libc); blocking the first time."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def _trim_heap() -> None:
    trim = malloc_trim()
    if trim is not None:
        trim(0)


async def give_back() -> None:
    """Collect cyclic garbage, then return free heap to the system."""
    gc.collect()
    await anyio.to_thread.run_sync(_trim_heap)
