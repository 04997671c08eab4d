"""Whether the store can write: SQLite's errors sorted into faults that pass
(disk full, I/O error: retry) and damage (a corrupt page, not a database: write
nothing more), and the one :class:`StorageMonitor` the store, the journal and the
daemon share.

The monitor changes state only on a fault or on the commit after one: the path
of a healthy commit never touches it.
"""

from __future__ import annotations

import enum
import sqlite3
import time
from typing import Any

import anyio

from hdsp.protocol import StorageHealth, StorageState

__all__ = ["Fault", "StorageMonitor", "classify"]

#: SQLite's primary result codes (https://sqlite.org/rescode.html).
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_TRANSIENT = {
    3,  # PERM
    5,  # BUSY
    6,  # LOCKED
    7,  # NOMEM
    8,  # READONLY
    10,  # IOERR
    13,  # FULL
    14,  # CANTOPEN
    15,  # PROTOCOL
}


class Fault(enum.Enum):
    #: May pass by itself or with the user's help (space freed): retry.
    TRANSIENT = "transient"
    #: The file is damaged: write nothing more.
    DAMAGE = "damage"


def classify(exc: sqlite3.Error) -> Fault | None:
    """What kind of storage fault `exc` is; None: none (a bug, such as a
    constraint a statement broke)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    if code & 0xFF in _TRANSIENT:
        return Fault.TRANSIENT
    if code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return Fault.DAMAGE
    return None


def _advice(state: StorageState, path: str) -> str:
    if state is StorageState.FAILING:
        return (
            f"Free space on the disk of {path} (or fix the I/O error). hdspd keeps what it "
            "could not write, retries, and takes new work again by itself; running tasks "
            "wait meanwhile."
        )
    return (
        f"The database {path} is damaged. Stop hdspd, run `hdspd check` to see the damage, "
        f"and restore the database from a backup (or repair it: `sqlite3 {path} .recover`)."
    )


class StorageMonitor:
    def __init__(self, path: str) -> None:
        self.path = path
        self._health = StorageHealth()
        self._changed = anyio.Event()
        #: Counts changes, so that a watcher misses none (see wait_changed).
        self.version = 0

    @property
    def state(self) -> StorageState:
        return self._health.state

    @property
    def writable(self) -> bool:
        return self._health.state is StorageState.OK

    def health(self) -> StorageHealth:
        return self._health

    def message(self) -> str:
        """Why new work is refused, for an error reply."""
        h = self._health
        what = "cannot write its database" if h.state is StorageState.FAILING else "is read-only"
        return f"hdspd {what} ({h.reason}). {h.advice}"

    def details(self) -> dict[str, Any]:
        """The facts an error reply of ``storage_unavailable`` carries: the state."""
        return {"state": str(self._health.state)}

    async def wait_changed(self, seen: int) -> int:
        """Wait until the state has changed since version `seen`; returns the
        version now (`health()` has the state)."""
        while self.version == seen:
            await self._changed.wait()
        return self.version

    def failing(self, exc: BaseException) -> None:
        """A commit failed with a fault that may pass."""
        if self._health.state is not StorageState.OK:
            return  # still failing (or worse): the first reason stands
        self._set(StorageState.FAILING, str(exc))

    def damaged(self, exc: BaseException) -> None:
        """A read or a commit met damage: nothing more is written."""
        if self._health.state is StorageState.READ_ONLY:
            return
        self._set(StorageState.READ_ONLY, str(exc))

    def recovered(self) -> None:
        """A commit went through after failing ones."""
        if self._health.state is StorageState.FAILING:
            self._health = StorageHealth()
            self._notify()

    def _set(self, state: StorageState, reason: str) -> None:
        self._health = StorageHealth(
            state=state,
            reason=reason,
            advice=_advice(state, self.path),
            since=int(time.time() * 1000),
        )
        self._notify()

    def _notify(self) -> None:
        self.version += 1
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
