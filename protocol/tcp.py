"""The daemon's TCP endpoints, for a team daemon: always under ZeroMQ CURVE.

One address, `tcp://HOST:PORT`, names both sockets: `control` listens on PORT and
`events` on PORT + 1. The daemon binds them when its `tcp.listen` setting names
such an address; a client (`hdsp remote add NAME tcp://HOST:PORT`) connects to
the same two. A key is 40 characters of Z85 (32 bytes), as ZeroMQ prints them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Z85_KEY_PATTERN", "TcpEndpoints", "check_curve_key", "tcp_endpoints"]

#: A CURVE key as ZeroMQ writes it: 40 characters of Z85 (ZeroMQ RFC 32).
Z85_KEY_PATTERN = r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$"

_KEY = re.compile(Z85_KEY_PATTERN)
#: Z85's digits in order of value (ZeroMQ RFC 32).
_Z85_DIGITS = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)

_ADDRESS = re.compile(r"^tcp://(?P<host>\[[0-9a-fA-F:.]+\]|[^\s/:\[\]]+):(?P<port>[0-9]{1,5})$")


def check_curve_key(text: str) -> str:
    """`text`, stripped, if it is a CURVE key: 40 characters of Z85 whose every
    5-character group stands for at most 2**32 - 1. Raises ValueError saying which
    it is not (the caller adds where such a key comes from)."""
    key = text.strip()
    if not _KEY.match(key):
        raise ValueError(f"{key[:60]!r} is not a CURVE public key: 40 characters of Z85")
    for start in range(0, len(key), 5):
        value = 0
        for digit in key[start : start + 5]:
            value = value * 85 + _Z85_DIGITS.index(digit)
        if value > 0xFFFFFFFF:
            raise ValueError(f"{key!r} is not valid Z85")
    return key


class TcpEndpoints(NamedTuple):
    """The two sockets one `tcp://HOST:PORT` address names."""

    control: str
    events: str


def tcp_endpoints(address: str) -> TcpEndpoints:
    """The (control, events) endpoints of `tcp://HOST:PORT`: PORT and PORT + 1.
    Raises ValueError saying what is wrong with `address`."""
    match = _ADDRESS.match(address)
    if match is None:
        raise ValueError(
            f"{address[:200]!r} is not a TCP address: write tcp://HOST:PORT (such as "
            "tcp://0.0.0.0:7737 or tcp://[::1]:7737)"
        )
    port = int(match["port"])
    if not 1 <= port <= 65534:
        raise ValueError(
            f"port {port} is out of range: 1 to 65534 (the events socket takes port + 1)"
        )
    host = match["host"]
    return TcpEndpoints(f"tcp://{host}:{port}", f"tcp://{host}:{port + 1}")
