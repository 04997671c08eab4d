"""Whether the store can write: the kinds of fault a backend sorts its errors
into (faults that pass, such as a full disk or a lost connection: retry; and
damage: write nothing more), and the one :class:`StorageMonitor` the store, the
journal and the daemon share.

The monitor changes state only on a fault or on the commit after one: the path
of a healthy commit never touches it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Any

import anyio

from hdsp.protocol import StorageHealth, StorageState

__all__ = ["Fault", "StorageMonitor"]


class Fault(enum.Enum):
    #: May pass by itself or with the user's help (space freed): retry.
    TRANSIENT = "transient"
    #: The database is damaged (or another daemon took it over): write nothing more.
    DAMAGE = "damage"


class StorageMonitor:
    def __init__(self, where: str, advice: Callable[[StorageState], str]) -> None:
        #: The database, for messages: a path or a URL.
        self.where = where
        self._advice = advice
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
            advice=self._advice(state),
            since=int(time.time() * 1000),
        )
        self._notify()

    def _notify(self) -> None:
        self.version += 1
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
