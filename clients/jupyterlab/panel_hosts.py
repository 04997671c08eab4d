"""The browser panel as a document host (route `panel`, hdsp.protocol.documents):
without real-time collaboration each JupyterLab window holds its own notebook
models, so the agent's edits are applied there, by the window's panel, and the
file is written by the window's own save.

The panel declares the notebooks its window holds with `HostDocuments` and
answers `documentEditRequested` (which reaches it on the events socket) with
`AnswerDocumentEdit`, both through `POST hdsp/command`. Before forwarding, this
extension checks what a page may say as a host:

- its `hostId` starts with `panel-` and its route is `panel` (a page never speaks
  for the server extension's own `rtc` host, nor answers that host's requests);
- its paths are notebook paths as JupyterLab shows them, below the server's root
  (no `..`, nothing outside the root once symlinks are resolved); they are made
  absolute, symlinks resolved, as the daemon's notebook tools name them. The
  reply gives the page that mapping (`paths`: Lab path → absolute path), so it
  knows which of its notebooks a request names, and the server's clock
  (`serverTime`, Unix seconds), so that it can judge a request's `expiresAt`
  whatever its own clock says.
"""

from __future__ import annotations

import os
from http import HTTPStatus

import msgspec

from hdsp.protocol import AnswerDocumentEdit, ErrorCode, HostDocuments

from .notebook_kernel import api_path
from .relay import CommandRefused

__all__ = ["PANEL_HOST_PREFIX", "checked_answer", "panel_declaration"]

#: What the host id of a panel starts with.
PANEL_HOST_PREFIX = "panel-"


def _refuse(message: str, status: HTTPStatus = HTTPStatus.FORBIDDEN) -> CommandRefused:
    return CommandRefused(status, ErrorCode.INVALID_REQUEST, message)


def panel_declaration(
    command: HostDocuments, root_dir: str
) -> tuple[HostDocuments, dict[str, str]]:
    """The declaration to forward (absolute paths) and the mapping of each path
    the page gave to the absolute one; CommandRefused for a declaration a page may
    not make."""
    if command.route != "panel" or not command.host_id.startswith(PANEL_HOST_PREFIX):
        raise _refuse(
            f"A page declares documents as a panel only: route 'panel' and a hostId "
            f"starting with {PANEL_HOST_PREFIX!r}."
        )
    root = os.path.realpath(root_dir)
    resolved: dict[str, str] = {}
    for given in command.paths:
        try:
            relative = api_path(given)
        except CommandRefused:
            raise _refuse(
                f"{given[:200]!r} is not a notebook path below the Jupyter server's root.",
                HTTPStatus.BAD_REQUEST,
            ) from None
        absolute = os.path.realpath(os.path.join(root, relative))
        if os.path.commonpath([root, absolute]) != root:
            raise _refuse(
                f"{given[:200]!r} leads outside the Jupyter server's root.", HTTPStatus.BAD_REQUEST
            )
        resolved[given] = absolute
    forwarded = msgspec.structs.replace(command, paths=sorted(set(resolved.values())))
    return forwarded, resolved


def checked_answer(command: AnswerDocumentEdit) -> AnswerDocumentEdit:
    """`command` if a page may send it (an answer of a panel host)."""
    if not command.data.host_id.startswith(PANEL_HOST_PREFIX):
        raise _refuse("A page answers only the requests addressed to its own panel.")
    return command
