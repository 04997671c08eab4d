"""Errors of the store.

StoreError
├── StoreCorrupt      the database file is damaged or not a database
├── StoreTooNew       written by a newer hdsp; this one cannot read it
├── DataDirLocked     another hdspd holds the data dir
└── StorageUnavailable  at run time: the database cannot be written now (disk
                        full, I/O error) or is damaged; the daemon goes on
"""

from __future__ import annotations

__all__ = [
    "DataDirLocked",
    "StorageUnavailable",
    "StoreCorrupt",
    "StoreError",
    "StoreTooNew",
]


class StoreError(Exception):
    """Base of the store's errors; the message says what to do."""


class StoreCorrupt(StoreError):
    pass


class StoreTooNew(StoreError):
    pass


class DataDirLocked(StoreError):
    pass


class StorageUnavailable(StoreError):
    """Raised where a caller needed the database and the store could not serve it
    (see :class:`~.health.StorageMonitor` for the daemon's state)."""
