"""Which commands the browser may send through the server extension, and how their
outcomes become HTTP.

The browser sends a protocol command exactly as `TaskCommand.data` carries it. Only
commands on tasks and asks, reads of kernels (their variables too: a silent,
read-only inspection) and profiles, a task's checkpoints (list, diff, restore:
a replay of the kernel is asked for in the task, as any tool), the daemon's
status, and a panel's declarations and answers as a document host (panel_hosts)
go through: a page in the browser never sets secrets, imports or exports
settings, changes profiles, runs code in a kernel of its choosing, or shuts the
daemon down (the CLI does those).
"""

from __future__ import annotations

import os
from http import HTTPStatus
from typing import Any

import msgspec

from hdsp.protocol import (
    AnswerDocumentEdit,
    CancelTask,
    CloseTask,
    Command,
    CondenseTask,
    DeleteMessage,
    DeleteQueuedMessage,
    DiffCheckpoints,
    EditMessage,
    ErrorCode,
    ForkTask,
    GetStatus,
    GetTask,
    GetTaskPage,
    HostDocuments,
    ListCheckpoints,
    ListKernels,
    ListTasks,
    ListVariables,
    Ping,
    Replay,
    RespondToAsk,
    RestoreCheckpoint,
    ResumeTask,
    RewindTask,
    SendMessage,
    StartNewTask,
    UpdateTodoList,
    command_name,
)
from hdsp.protocol.settings import GetModels, ListProfiles

__all__ = [
    "FORWARDED",
    "CommandRefused",
    "decode_command",
    "decode_request",
    "error_body",
    "http_status",
    "is_forwarded",
    "with_workspace",
]

#: The commands the server extension forwards to hdspd.
FORWARDED: tuple[type[Any], ...] = (
    StartNewTask,
    SendMessage,
    RespondToAsk,
    DeleteQueuedMessage,
    CancelTask,
    CloseTask,
    ResumeTask,
    RewindTask,
    EditMessage,
    DeleteMessage,
    ForkTask,
    CondenseTask,
    # The todo list the panel shows, edited by the user (issue 21).
    UpdateTodoList,
    ListTasks,
    GetTask,
    GetTaskPage,
    Replay,
    ListKernels,
    ListVariables,
    ListProfiles,
    GetModels,
    GetStatus,
    Ping,
    ListCheckpoints,
    DiffCheckpoints,
    RestoreCheckpoint,
    # The panel as a document host (panel_hosts checks what a page may declare).
    HostDocuments,
    AnswerDocumentEdit,
)


class CommandRefused(Exception):
    """A request the extension does not forward; `status` is its HTTP status."""

    def __init__(self, status: HTTPStatus, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class _CommandRequest(msgspec.Struct, frozen=True, rename="camel"):
    command: Command
    #: nbctx: the Jupyter kernel id of the notebook the prompt's context names,
    #: as the page knows it (its session may not follow a rename yet).
    notebook_kernel_id: str | None = None


_decoder = msgspec.json.Decoder(_CommandRequest)


def decode_command(body: bytes) -> Command:
    """The command of a `POST hdsp/command` body; CommandRefused if it is not one,
    or is one the extension does not forward."""
    return decode_request(body)[0]


def decode_request(body: bytes) -> tuple[Command, str | None]:
    """The command of a `POST hdsp/command` body and the notebook's Jupyter kernel
    id the page sent with it (`notebookKernelId`), if any; CommandRefused as
    `decode_command`."""
    try:
        request = _decoder.decode(body)
        command = request.command
    except msgspec.ValidationError as exc:
        code = ErrorCode.INVALID_REQUEST
        if "commandName" in str(exc) and str(exc).startswith("Invalid value"):
            code = ErrorCode.UNKNOWN_COMMAND
        raise CommandRefused(
            HTTPStatus.BAD_REQUEST,
            code,
            f'Invalid request: {exc}. Send {{"command": <a protocol command>}}.',
        ) from exc
    except msgspec.DecodeError as exc:
        raise CommandRefused(
            HTTPStatus.BAD_REQUEST,
            ErrorCode.INVALID_REQUEST,
            f'The body is not JSON ({exc}). Send {{"command": <a protocol command>}}.',
        ) from exc
    if not is_forwarded(command):
        raise CommandRefused(
            HTTPStatus.FORBIDDEN,
            ErrorCode.INVALID_REQUEST,
            f"hdsp's JupyterLab extension does not forward {command_name(command)}; "
            "use the `hdsp` command line for it.",
        )
    return command, request.notebook_kernel_id


def is_forwarded(command: Command) -> bool:
    return isinstance(command, FORWARDED)


def with_workspace(command: Command, root_dir: str) -> Command:
    """A StartNewTask that names no workspace (or a relative one) runs in the Jupyter
    server's root directory (or below it), as a file opened in JupyterLab would.
    A RestoreCheckpoint never holds the request while a person decides on its
    kernel replay: its reply comes once the ask is posted (`waitForReplay` false),
    and the outcome in the task's history."""
    if isinstance(command, RestoreCheckpoint) and command.data.wait_for_replay:
        restore = msgspec.structs.replace(command.data, wait_for_replay=False)
        replaced_restore: RestoreCheckpoint = msgspec.structs.replace(command, data=restore)
        return replaced_restore
    if not isinstance(command, StartNewTask):
        return command
    config = command.data.configuration
    workspace = os.path.join(root_dir, config.workspace or "")
    workspace = os.path.normpath(os.path.abspath(workspace))
    if workspace == config.workspace:
        return command
    config = msgspec.structs.replace(config, workspace=workspace)
    data = msgspec.structs.replace(command.data, configuration=config)
    replaced: StartNewTask = msgspec.structs.replace(command, data=data)
    return replaced


_STATUS: dict[ErrorCode, HTTPStatus] = {
    ErrorCode.INVALID_REQUEST: HTTPStatus.BAD_REQUEST,
    ErrorCode.UNKNOWN_COMMAND: HTTPStatus.BAD_REQUEST,
    ErrorCode.TOO_LARGE: HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    ErrorCode.TASK_NOT_FOUND: HTTPStatus.NOT_FOUND,
    ErrorCode.KERNEL_NOT_FOUND: HTTPStatus.NOT_FOUND,
    ErrorCode.BLOB_NOT_FOUND: HTTPStatus.NOT_FOUND,
    ErrorCode.TASK_BUSY: HTTPStatus.CONFLICT,
    ErrorCode.INVALID_STATE: HTTPStatus.CONFLICT,
    ErrorCode.ALREADY_ANSWERED: HTTPStatus.CONFLICT,
    ErrorCode.CURSOR_EXPIRED: HTTPStatus.GONE,
    ErrorCode.OVERLOADED: HTTPStatus.SERVICE_UNAVAILABLE,
    ErrorCode.SHUTTING_DOWN: HTTPStatus.SERVICE_UNAVAILABLE,
    ErrorCode.UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
    ErrorCode.STORAGE_UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
}


def http_status(code: ErrorCode) -> HTTPStatus:
    """The HTTP status of a daemon's error code (502 for what the daemon should
    never say to this extension, 500 for its internal errors)."""
    if code == ErrorCode.INTERNAL:
        return HTTPStatus.INTERNAL_SERVER_ERROR
    return _STATUS.get(code, HTTPStatus.BAD_GATEWAY)


def error_body(code: ErrorCode, message: str) -> bytes:
    return msgspec.json.encode({"error": {"code": code.value, "message": message}})
