"""How the daemon's storage is doing: the `storage` of GetStatus and the payload
of the daemon-wide `storageChanged` event."""

from __future__ import annotations

import enum
from typing import Annotated

from msgspec import Meta

from ._base import WireStruct

__all__ = ["StorageHealth", "StorageState"]


class StorageState(enum.StrEnum):
    #: Commits go through.
    OK = "ok"
    #: Commits fail for a reason that may pass (disk full, I/O error). The daemon
    #: keeps what it could not write, retries with backoff, serves reads, and
    #: refuses new work until a commit goes through again.
    FAILING = "failing"
    #: The database is damaged. The daemon writes nothing more, serves what it can
    #: read, and refuses new work until it is restarted on a sound database.
    READ_ONLY = "readOnly"


class StorageHealth(WireStruct, frozen=True):
    state: StorageState = StorageState.OK
    reason: Annotated[
        str | None,
        Meta(description='What failed, in SQLite\'s words (e.g. "database or disk is full").'),
    ] = None
    advice: Annotated[str | None, Meta(description="What a person can do about it.")] = None
    since: Annotated[
        int | None,
        Meta(description="Since when (milliseconds since the epoch); None while ok."),
    ] = None
