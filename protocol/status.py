"""Commands about the daemon itself (Ping, GetStatus, Shutdown) and what they
reply with: its clock, its status, how it confines code and where it listens.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from ._base import CommandBase, WireStruct
from .storage import StorageHealth

__all__ = [
    "GetStatus",
    "Ping",
    "Pong",
    "SandboxStatus",
    "Shutdown",
    "StatusResult",
    "TcpStatus",
]


class Ping(CommandBase["Pong"], tag="Ping", frozen=True):
    pass


class GetStatus(CommandBase["StatusResult"], tag="GetStatus", frozen=True):
    pass


class Shutdown(CommandBase[None], tag="Shutdown", frozen=True):
    pass


class Pong(WireStruct, frozen=True):
    server_time: Annotated[
        int, Meta(description="The daemon's clock, in milliseconds since the epoch.")
    ]


class SandboxStatus(WireStruct, frozen=True):
    """How shell commands and kernels are confined (`sandbox.*` settings)."""

    mode: Annotated[str, Meta(description='"workspace-write", "read-only" or "off".')]
    network: Annotated[
        bool,
        Meta(description="Whether sandboxed code may use the network."),
    ] = False
    mechanism: Annotated[
        str,
        Meta(
            description=(
                '"bwrap" (bubblewrap: namespaces and a mount layout), "none" (mode off) or '
                '"unavailable" (then commands and kernels are refused, see `problem`).'
            )
        ),
    ] = "unavailable"
    problem: Annotated[
        str | None,
        Meta(description="Why the sandbox cannot run, and how to fix it; None when it can."),
    ] = None


class TcpStatus(WireStruct, frozen=True):
    """The daemon's TCP endpoints (the `tcp.listen` setting), always under CURVE."""

    control: Annotated[str, Meta(description="The control socket's TCP endpoint.")]
    events: Annotated[str, Meta(description="The events socket's TCP endpoint (port + 1).")]
    server_public_key: Annotated[
        str, Meta(description="The daemon's public CURVE key (z85): a remote's --server-key.")
    ]
    authorized_clients: Annotated[
        int, Meta(description="How many client keys the authorised keys file lets in now.")
    ]


class StatusResult(WireStruct, frozen=True):
    server_version: str
    protocol_version: int
    pid: int
    uptime_seconds: float
    head_seq: int
    clients: int
    tasks_total: int
    tasks_running: int
    data_dir: str
    runtime_dir: str
    sandbox: Annotated[
        SandboxStatus | None,
        Meta(description="None from a daemon older than the sandbox."),
    ] = None
    plaintext_keyring: Annotated[
        str | None,
        Meta(
            description=(
                "The file where the daemon's keyring keeps secrets unencrypted, when its "
                "backend is a plain-text file; absent otherwise."
            )
        ),
    ] = None
    storage: Annotated[
        StorageHealth | None,
        Meta(description="Whether the daemon can write its database now (see StorageState)."),
    ] = None
    tcp: Annotated[
        TcpStatus | None,
        Meta(description="The TCP endpoints under CURVE, when the daemon listens on TCP."),
    ] = None
