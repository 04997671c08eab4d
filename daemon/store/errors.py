"""Errors of the store (a root of the forest in :mod:`hdsp.daemon.errors`); a
command that meets one answers ``storage_unavailable``.

StoreError
├── StoreCorrupt      the database file is damaged or not a database
├── StoreTooNew       written by a newer hdsp; this one cannot read it
└── StorageUnavailable  at run time: the database cannot be written now (disk
                        full, I/O error) or is damaged; the daemon goes on
"""

from __future__ import annotations

from hdsp.daemon.errors import HdspError
from hdsp.protocol import ErrorCode

__all__ = [
    "StorageUnavailable",
    "StoreCorrupt",
    "StoreError",
    "StoreTooNew",
]


class StoreError(HdspError):
    """Base of the store's errors; the message says what to do."""

    code = ErrorCode.STORAGE_UNAVAILABLE


class StoreCorrupt(StoreError):
    pass


class StoreTooNew(StoreError):
    pass


class StorageUnavailable(StoreError):
    """Raised where a caller needed the database and the store could not serve it
    (see :class:`~.health.StorageMonitor` for the daemon's state)."""
