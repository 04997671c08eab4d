"""The daemon's errors: one forest, and the one place they become wire errors.

Every error a command can meet descends from :class:`HdspError`, and each root
carries the wire :class:`~hdsp.protocol.ErrorCode` that a command meeting it answers
with (a subclass may narrow it). The server turns whatever escapes a command into
its error reply with :func:`wire_error`, and nowhere else: a domain error keeps its
code, message and details; anything else is a bug, answered ``internal`` while the
log gets the traceback (as httpx maps exceptions at its transport boundary).
Foreign errors (sqlite3, zmq, jupyter_client, keyring, the SDKs) are translated into
these where they are met, with ``raise ... from exc``. A command's refusal is
a named class below, never a code spelled where it is raised::

    HdspError                      code        where
    ├── CommandError               (its own)   errors.py: a command refused (raised as one below)
    │   ├── BadRequest             invalid_request  the command's fields do not make a request
    │   ├── WrongState             invalid_state    not in this state (no checkpoints kept, say)
    │   ├── NotServed              unavailable this daemon does not serve it (no MCP servers)
    │   ├── ShuttingDown           shutting_down
    │   ├── CursorExpired          cursor_expired   a replay from events pruned
    │   ├── BlobNotFound           blob_not_found
    │   ├── TaskNotFound           task_not_found   tasks/errors.py
    │   ├── TaskBusy               task_busy        tasks/errors.py: working, or its queue full
    │   ├── AskAnswered            already_answered  tasks/errors.py
    │   └── ReplayFailed           internal    tasks/errors.py: a restore's kernel replay failed
    ├── UnknownMode                invalid_request  modes/modes.py
    ├── UnknownAgent               invalid_request  agents/catalog.py
    ├── RewindRefused              invalid_request  tasks/rewind.py: the history cannot go back there
    ├── SettingsError              internal    config/settings_documents.py: the file cannot be read or written
    │   └── SettingsInvalid        invalid_request  details.errors: every bad field
    ├── SecretError                internal    config/secrets.py
    │   ├── InvalidSecret          invalid_request
    │   ├── SecretNotFound         invalid_request  nothing to remove
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
    ├── DispatcherFull             overloaded  server/dispatch.py: too many commands wait
    ├── FrameRefused               invalid_request  server/refusals.py: what the server
    ├── FrameTooLarge              too_large   answers a frame it cannot take as a
    ├── VersionUnsupported         unsupported_version  command (no command ran)
    ├── NotConnected               not_connected
    ├── UnknownClient              unknown_client
    └── FrameFailed                internal    a bug met on a frame; the log has it

Errors that never reach a reply, since they are handled where they are met::

    ProviderError                  llm/errors.py: a model request failed: the task
    ├── RateLimited                retries, then asks the user (api_req_failed)
    ├── Overloaded
    ├── ServerError
    ├── NetworkError
    ├── ContextWindowExceeded
    ├── AuthenticationFailed
    └── InvalidRequest
    ToolError                      tools/base.py: a tool call failed: its result
    ├── OutsideWorkspaceError      tells the model (tools/workspace.py)
    ├── IgnoredPathError
    └── PathNotFoundError
    HostUnavailable                tools/notebook_hosts.py: the notebook's frontend
                                   did not answer: the tool says so
    HostGone                       tools/live_notebook.py: the frontend went: the
                                   tool writes the file instead
    ChangedOnDisk                  tools/notebook_files.py: a notebook changed under
                                   a write: the tool says so, nothing written
    PrivatePathBound               sandbox/layout.py: a sandbox would bind a
                                   private path: the call is refused
    TakenOver                      store/postgres.py: another hdspd writes to the
                                   database: this one stops writing
    SandboxUnavailable             sandbox/sandbox.py   hdspd cannot start (or
    LockHeld                       lock.py              install): it exits with
    UnsafeRuntimeDir               paths.py             the message
    CurveError                     config/curve_keys.py
    TcpBindFailed                  server/curve.py
    DaemonError                    app.py
    ServiceInstallError            systemd_unit.py

Every public error class of the daemon is drawn here, under its parent: a test
walks the real classes and checks the drawing against them.

A frame the protocol's codec cannot decode raises its
:class:`~hdsp.protocol.FrameError`, which carries its code and the path of the
bad field: :func:`wire_error` translates it too.
"""

from __future__ import annotations

from typing import Any, Final, overload

from hdsp.protocol import ErrorCode, ErrorInfo, FrameError

__all__ = [
    "INTERNAL_MESSAGE",
    "BadRequest",
    "BlobNotFound",
    "CommandError",
    "CursorExpired",
    "HdspError",
    "NotServed",
    "ShuttingDown",
    "WrongState",
    "wire_error",
]

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
    """A command refused. The daemon raises one of the subclasses, whose name says
    why and whose class fixes the code; ``CommandError(code, message)``, with the
    code given, is for callers outside the daemon (a test, say)."""

    @overload
    def __init__(self, message: str, /, *, details: dict[str, Any] | None = None) -> None: ...
    @overload
    def __init__(
        self, code: ErrorCode, message: str, /, details: dict[str, Any] | None = None
    ) -> None: ...
    def __init__(
        self,
        first: str,
        message: str | None = None,
        /,
        details: dict[str, Any] | None = None,
    ) -> None:
        if message is None:
            super().__init__(first, details=details)
        else:
            super().__init__(message, details=details)
            self.code = ErrorCode(first)


class BadRequest(CommandError):
    """The command's fields do not make a request that can be served."""

    code = ErrorCode.INVALID_REQUEST


class WrongState(CommandError):
    """The command does not apply to what it names in its current state."""

    code = ErrorCode.INVALID_STATE


class NotServed(CommandError):
    """This daemon does not serve what the command needs (it runs no MCP servers)."""

    code = ErrorCode.UNAVAILABLE


class ShuttingDown(CommandError):
    """The daemon is shutting down and takes no new work."""

    code = ErrorCode.SHUTTING_DOWN


class CursorExpired(CommandError):
    """A replay asked for events older than the oldest kept."""

    code = ErrorCode.CURSOR_EXPIRED


class BlobNotFound(CommandError):
    """No blob has the sha256 asked for."""

    code = ErrorCode.BLOB_NOT_FOUND


def wire_error(exc: Exception) -> ErrorInfo:
    """The error reply's body for `exc`: its own code, message and details if it is
    one of the daemon's errors (or the codec's FrameError, with its path);
    ``internal`` with :data:`INTERNAL_MESSAGE` if not (a bug: the caller logs it)."""
    if isinstance(exc, HdspError):
        return ErrorInfo(code=exc.code, message=exc.message, details=exc.details)
    if isinstance(exc, FrameError):  # the protocol's: a frame that is no message
        return ErrorInfo(code=exc.code, message=exc.message, path=exc.path)
    return ErrorInfo(code=ErrorCode.INTERNAL, message=INTERNAL_MESSAGE)
