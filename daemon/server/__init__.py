"""The ZeroMQ edge of the daemon: sockets, client sessions and dispatch."""

from __future__ import annotations

from .dispatch import Dispatcher, Overloaded
from .handlers import Handlers
from .server import CAPABILITIES, Server
from .sessions import Session, Sessions

__all__ = ["CAPABILITIES", "Dispatcher", "Handlers", "Overloaded", "Server", "Session", "Sessions"]
