"""Error codes carried by a `Reply` that is not ok.

The wire never carries exception types, only these codes and a message a person
can act on. Daemon and client translate their own exceptions to and from them.
"""

from __future__ import annotations

import enum

__all__ = ["ErrorCode"]


class ErrorCode(enum.StrEnum):
    #: A command came before the `Connect` handshake.
    NOT_CONNECTED = "not_connected"
    #: The command's `clientId` is not the one this connection's `Ack` gave (the
    #: connection has said Connect, so its session is known); nothing was run.
    UNKNOWN_CLIENT = "unknown_client"
    #: The client speaks a protocol version this daemon cannot serve.
    UNSUPPORTED_VERSION = "unsupported_version"
    #: The frame is not JSON, not an object, or a field has the wrong type.
    INVALID_REQUEST = "invalid_request"
    #: The frame is larger than the daemon's limit (`maxMessageSize` in the Ack,
    #: also in the error's details); nothing of it was read, the session goes on.
    TOO_LARGE = "too_large"
    #: `commandName` names no command this daemon knows.
    UNKNOWN_COMMAND = "unknown_command"
    #: No task has that id.
    TASK_NOT_FOUND = "task_not_found"
    #: No kernel has that id (ListKernels lists them).
    KERNEL_NOT_FOUND = "kernel_not_found"
    #: No blob has that sha256 (GetBlob): never stored, or its record was
    #: written by an hdsp that kept images inline.
    BLOB_NOT_FOUND = "blob_not_found"
    #: The task is doing something that the command would disturb.
    TASK_BUSY = "task_busy"
    #: The command does not apply to the task in its current state.
    INVALID_STATE = "invalid_state"
    #: The ask was answered already (by another client, or it timed out).
    ALREADY_ANSWERED = "already_answered"
    #: The daemon has more work queued than it accepts; try again shortly.
    OVERLOADED = "overloaded"
    #: A replay cursor is older than the oldest event kept; take a snapshot.
    CURSOR_EXPIRED = "cursor_expired"
    #: The daemon is shutting down and takes no new work.
    SHUTTING_DOWN = "shutting_down"
    #: Something the command needs is not set up where the daemon runs (no keyring
    #: backend for secrets, say); the message says how to set it up.
    UNAVAILABLE = "unavailable"
    #: The daemon cannot write its database now (disk full, I/O error, or damage
    #: found): it serves reads and refuses what must write. The message says why
    #: and what to do; `details.state` is the StorageState.
    STORAGE_UNAVAILABLE = "storage_unavailable"
    #: A bug or an unexpected failure inside the daemon; its log has details.
    INTERNAL = "internal"
