"""Durable state (tasks, UI and API histories, the event log) in SQLite or
PostgreSQL, and the journal through which every change is written before it is
published."""

from __future__ import annotations

from .database import STARTUP_CHECK_SECONDS, Database, TaskRow, Write
from .errors import StorageUnavailable, StoreCorrupt, StoreError, StoreTooNew
from .health import StorageMonitor
from .integrity import IntegrityReport, integrity_check
from .journal import Journal, Publisher
from .sqlite import SqliteDatabase
from .store import INLINE_BYTES, Store, is_postgres_url, open_database
from .writes import (
    append_api_message,
    delete_api_messages_from,
    delete_ui_message,
    delete_ui_messages_from,
    insert_task,
    save_queued,
    save_turn,
    save_ui_message,
    update_task,
)

__all__ = [
    "INLINE_BYTES",
    "STARTUP_CHECK_SECONDS",
    "Database",
    "IntegrityReport",
    "Journal",
    "Publisher",
    "SqliteDatabase",
    "StorageMonitor",
    "StorageUnavailable",
    "Store",
    "StoreCorrupt",
    "StoreError",
    "StoreTooNew",
    "TaskRow",
    "Write",
    "append_api_message",
    "delete_api_messages_from",
    "delete_ui_message",
    "delete_ui_messages_from",
    "insert_task",
    "integrity_check",
    "is_postgres_url",
    "open_database",
    "save_queued",
    "save_turn",
    "save_ui_message",
    "update_task",
]
