"""The daemon's errors: one forest, and the one place they become wire errors.

Every error a command can meet descends from :class:`HdspError`, and each root
carries the wire :class:`~hdsp.protocol.ErrorCode` that a command meeting it answers
with (a subclass may narrow it). The server turns whatever escapes a command into
its error reply with :func:`wire_error`, and nowhere else: a domain error keeps its
code, message and details; anything else is a bug, answered ``internal`` while the
log gets the traceback (as httpx maps exceptions at its transport boundary).
Foreign errors (sqlite3, zmq, jupyter_client, keyring, the SDKs) are translated into
these where they are met, with ``raise ... from exc``::

    HdspError                      code        where
    ├── CommandError               (its own)   errors.py: a command refused, with a code
    ├── SettingsError              internal    config/settings.py: the file cannot be read or written
    │   └── SettingsInvalid        invalid_request  details.errors: every bad field
    ├── SecretError                internal    config/secrets.py
    │   ├── InvalidSecret          invalid_request
    │   ├── SecretStoreUnavailable unavailable no keyring backend
    │   └── SecretStoreFailed      unavailable the keyring failed
    ├── ProfileNotFound            invalid_request  config/profiles.py
    ├── StoreError                 storage_unavailable  store/errors.py
    │   ├── StoreCorrupt           (at start-up: hdspd exits with the message)
    │   ├── StoreTooNew            (at start-up)
    │   └── StorageUnavailable     at run time; details.state: the StorageState
    ├── KernelError                internal    kernels/errors.py
    │   ├── KernelNotFound         kernel_not_found
    │   ├── KernelStartFailed      invalid_request
    │   ├── KernelDead             invalid_state
    │   ├── KernelNotOwned         invalid_state
    │   ├── KernelBusy             invalid_state
    │   ├── KernelOverloaded       overloaded
    │   └── KernelServerUnreachable unavailable  kernels/gateway.py: a Jupyter server
    ├── GitFailed                  internal    checkpoints/shadow.py: a shadow git command failed
    ├── WorkspaceRefused           invalid_request  checkpoints/shadow.py: no checkpoints there
    └── DispatcherFull             overloaded  server/dispatch.py: too many commands wait

Errors that never reach a reply, since they are handled where they are met:

    ProviderError (llm/errors.py)  a model request failed: the task retries, then
                                   asks the user (api_req_failed)
    ToolError (tools/base.py)      a tool call failed: its result tells the model
    SandboxUnavailable, LockHeld, UnsafeRuntimeDir, DaemonError (app.py),
    ServiceInstallError            hdspd cannot start (or install): it exits with
                                   the message

The server's own refusals of a frame (not JSON, too large, no handshake) are
answered by the server itself with the code that says so.
"""

from __future__ import annotations

from typing import Any, Final

from hdsp.protocol import ErrorCode, ErrorInfo

__all__ = ["INTERNAL_MESSAGE", "CommandError", "HdspError", "wire_error"]

#: What a client is told of a bug; the daemon's log has the traceback.
INTERNAL_MESSAGE: Final = "The daemon failed on this command; its log has the details."


class HdspError(Exception):
    """The root of the daemon's errors: a message a person can act on, the wire
    code a command that meets it answers with, and facts that go with the code."""

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class CommandError(HdspError):
    """A command refused, with the code that says why."""

    def __init__(self, code: ErrorCode, message: str, details: dict[str, Any] | None = None):
        super().__init__(message, details=details)
        self.code = code


def wire_error(exc: Exception) -> ErrorInfo:
    """The error reply's body for `exc`: its own code, message and details if it is
    one of the daemon's errors; ``internal`` with :data:`INTERNAL_MESSAGE` if not
    (a bug: the caller logs it)."""
    if isinstance(exc, HdspError):
        return ErrorInfo(code=exc.code, message=exc.message, details=exc.details)
    return ErrorInfo(code=ErrorCode.INTERNAL, message=INTERNAL_MESSAGE)
