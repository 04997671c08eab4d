"""Cutting TCP connections that ZeroMQ holds for the daemon.

libzmq has no call that closes one peer's connection. The daemon finds the
connection among its own file descriptors (a TCP socket whose local port is
one of its endpoints) and shuts it down; ZeroMQ sees the peer going away and
cleans up as for any peer that left (a session ends, subscriptions are freed).
The ipc:// counterpart, by the peer's pid, is in :mod:`.subscriptions`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import stat
from collections.abc import Collection

__all__ = ["shut_down_tcp"]

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _unmapped(address: _Address) -> _Address:
    """An IPv4 address seen through an IPv6 socket (::ffff:a.b.c.d) as itself."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def shut_down_tcp(port: int, *, peer: str | None = None, keep: Collection[int] = ()) -> int:
    """Shut down the accepted TCP connections on local `port` (from the address
    `peer` only, if given), except the descriptors in `keep`; returns how many."""
    wanted = None
    if peer is not None:
        try:
            wanted = _unmapped(ipaddress.ip_address(peer))
        except ValueError:
            return 0
    cut = 0
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError, ValueError):
            fd = int(name)
            if fd in keep or not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(fd))
            try:
                if sock.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                if sock.type != socket.SOCK_STREAM or sock.getsockname()[1] != port:
                    continue
                # (A listening socket has no peer: OSError, skipped.)
                address = _unmapped(ipaddress.ip_address(sock.getpeername()[0]))
                if wanted is None or address == wanted:
                    sock.shutdown(socket.SHUT_RDWR)
                    cut += 1
            finally:
                sock.close()  # closes our duplicate only
    return cut
