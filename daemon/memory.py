"""Giving freed memory back to the system.

CPython frees an object as soon as its last reference goes, but the memory stays
with the process: cycles wait for the collector's next full pass, and glibc
keeps freed heap for later mallocs instead of returning it. A daemon that
loaded thousands of tasks, then unloaded them, would keep their peak for ever.
`give_back()` collects the cycles, then has glibc return its free heap pages
(`malloc_trim`, on a worker thread: ctypes releases the GIL for it).

A turn that passed a big payload through the daemon (a 30 MB plot: 40 MB of
base64 in the kernel's message, the decoded picture while it is fitted) has
freed it all by its end, and the process kept the peak: measured, 155 MB before
one such turn, 200 MB after it and 290 MB after the next, with none of it still
referenced. :class:`SpikeReturn` gives such a spike back when the turn ends: it
reads the resident size, and gives back when it grew by more than a threshold
(then: 164 to 174 MB, and 171 to 196 MB after the second).

glibc's `malloc_trim` is looked up the first time it is needed (or by the
daemon's warm-up, :func:`malloc_trim`): finding libc runs `ldconfig -p`, a
process, which no start-up should wait for.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Callable

import anyio.to_thread

__all__ = ["SpikeReturn", "give_back", "malloc_trim", "memory_short", "resident_bytes"]

#: Memory is short when less than this is available (bytes), or less than
#: `_SHORT_SHARE` of the total: then nothing is started ahead of need (spare kernels).
_SHORT_BYTES = 1 << 30
_SHORT_SHARE = 0.10


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


def resident_bytes() -> int | None:
    """This process's resident set size (None where /proc does not tell)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class SpikeReturn:
    """Gives a spike of memory back once the work that made it is over: call
    `settle()` when such work ends (a task's turn). It gives back (see
    `give_back`) when the resident size grew by more than `threshold` bytes
    since its lowest point since the last give-back, one give-back at a time."""

    def __init__(self, threshold: int = 16 * 1024 * 1024) -> None:
        self.threshold = threshold
        self._floor = resident_bytes()
        self._giving = False
        #: How many times it gave back (for tests and statistics).
        self.given_back = 0

    async def settle(self) -> None:
        resident = resident_bytes()
        if resident is None or self._giving:
            return
        if self._floor is None or resident < self._floor:
            self._floor = resident
        if resident - self._floor <= self.threshold:
            return
        self._giving = True
        try:
            await give_back()
        finally:
            self._giving = False
        self.given_back += 1
        self._floor = resident_bytes()


def memory_short(meminfo: str = "/proc/meminfo") -> bool:
    """Whether the system is short of memory (MemAvailable below 1 GiB or 10 % of
    MemTotal); False when that cannot be read (not Linux)."""
    try:
        with open(meminfo, encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        total = int(fields["MemTotal"].split()[0]) * 1024
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError, IndexError):
        return False
    return available < _SHORT_BYTES or available < total * _SHORT_SHARE
