"""Tell systemd how hdspd is doing, through the ``sd_notify`` datagram protocol.

The unit is ``Type=notify``: ``systemctl --user start hdspd`` returns once hdspd
says ``READY=1``, that is once its sockets are bound and clients can connect, not
merely once the process exists. ``STOPPING=1`` tells systemd that a shutdown is
under way (so a slow one is not mistaken for a hang), and ``STATUS=`` shows up in
``systemctl --user status hdspd``.

The protocol is one datagram of ``KEY=value`` lines to the AF_UNIX socket named by
``$NOTIFY_SOCKET`` (a path, or an abstract name written with a leading ``@``).
Outside systemd the variable is absent and every function here does nothing.
Nothing here raises: failing to notify must never take the daemon down, so a
failure is logged as a warning and reported by the return value.

Implemented here rather than through a library because it is a dozen lines and the
``systemd`` Python bindings need libsystemd headers to build.
"""

from __future__ import annotations

import os
import socket

from .logs import get_logger

__all__ = ["notify", "notify_ready", "notify_status", "notify_stopping"]

_log = get_logger(__name__)


def _address(raw: str) -> str | None:
    if raw.startswith("@"):
        # An abstract socket: no file, the name starts with a NUL byte.
        return "\0" + raw[1:]
    if raw.startswith("/"):
        return raw
    return None


def notify(message: str) -> bool:
    """Send ``message`` (``KEY=value`` lines) to ``$NOTIFY_SOCKET``.

    Returns True when the datagram was sent, False when there is nowhere to send it
    (not started by systemd) or sending failed (logged as a warning).
    """
    raw = os.environ.get("NOTIFY_SOCKET")
    if not raw:
        return False
    address = _address(raw)
    if address is None:
        # systemd can also hand out vsock: addresses (inside VMs); hdspd does not
        # run there, so say so rather than guess.
        _log.warning(
            "NOTIFY_SOCKET is neither a path nor an abstract socket; systemd was not told",
            notify_socket=raw,
            message=message,
        )
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            # Called from the event loop: never block on a full receive queue.
            sock.setblocking(False)
            sock.connect(address)
            sock.send(message.encode("utf-8"))
    except OSError as exc:
        _log.warning(
            "could not notify systemd; if the unit is Type=notify, systemctl may wait "
            "for hdspd until its start timeout",
            notify_socket=raw,
            message=message,
            error=str(exc),
        )
        return False
    _log.debug("notified systemd", message=message)
    return True


def notify_ready() -> bool:
    """Tell systemd that hdspd is serving: call once the sockets are bound."""
    return notify("READY=1")


def notify_stopping() -> bool:
    """Tell systemd that hdspd has begun its graceful shutdown."""
    return notify("STOPPING=1")


def notify_status(text: str) -> bool:
    """Set the one-line status shown by ``systemctl --user status hdspd``."""
    # Each line of a notification is one assignment; a newline would start another.
    one_line = " ".join(text.splitlines())
    return notify(f"STATUS={one_line}")
