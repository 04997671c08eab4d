"""The ZeroMQ edge of the daemon: sockets, client sessions and dispatch."""

from __future__ import annotations

from .dispatch import Dispatcher, DispatcherFull
from .refusals import (
    FrameFailed,
    FrameRefused,
    FrameTooLarge,
    NotConnected,
    UnknownClient,
    VersionUnsupported,
)
from .server import CAPABILITIES, HEARTBEAT_IVL_MS, Server
from .sessions import Session, Sessions

__all__ = [
    "CAPABILITIES",
    "HEARTBEAT_IVL_MS",
    "Dispatcher",
    "DispatcherFull",
    "FrameFailed",
    "FrameRefused",
    "FrameTooLarge",
    "NotConnected",
    "Server",
    "Session",
    "Sessions",
    "UnknownClient",
    "VersionUnsupported",
]
