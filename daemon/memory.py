"""Giving freed memory back to the system.

CPython frees an object as soon as its last reference goes, but the memory stays
with the process: cycles wait for the collector's next full pass, and glibc
keeps freed heap for later mallocs instead of returning it. A daemon that
loaded thousands of tasks, then unloaded them, would keep their peak for ever.
`give_back()` collects the cycles, then has glibc return its free heap pages
(`malloc_trim`, on a worker thread: ctypes releases the GIL for it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable

import anyio.to_thread

__all__ = ["give_back"]


def _load_malloc_trim() -> Callable[[int], int] | None:
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


_malloc_trim = _load_malloc_trim()


async def give_back() -> None:
    """Collect cyclic garbage, then return free heap to the system."""
    gc.collect()
    if _malloc_trim is not None:
        await anyio.to_thread.run_sync(_malloc_trim, 0)
