"""Errors of the store.

StoreError
├── StoreCorrupt      the database file is damaged or not a database
├── StoreTooNew       written by a newer hdsp; this one cannot read it
└── DataDirLocked     another hdspd holds the data dir
"""

from __future__ import annotations

__all__ = ["DataDirLocked", "StoreCorrupt", "StoreError", "StoreTooNew"]


class StoreError(Exception):
    """Base of the store's errors; the message says what to do."""


class StoreCorrupt(StoreError):
    pass


class StoreTooNew(StoreError):
    pass


class DataDirLocked(StoreError):
    pass
