"""The one base every wire struct derives from."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

__all__ = ["CLIENT_ORIGIN", "SERVER_ORIGIN", "CommandBase", "WireStruct"]

#: The result type of a command.
R = TypeVar("R")


class WireStruct(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    omit_defaults=True,
):
    """Immutable, camelCase on the wire, optional fields left out when unset.

    New fields always get a default so that older peers keep decoding.
    """


class CommandBase(WireStruct, Generic[R], tag_field="commandName", frozen=True):
    """The base of every command: tagged by `commandName`, and typed by the result
    its reply carries (`GetTask(CommandBase[TaskSnapshot])`), so that a client's
    `request(GetTask(...))` is known to return a TaskSnapshot. The parameter is for
    type checkers only: it puts nothing on the wire. It lives here, not in
    commands.py, so that modules of commands (kernels.py) can be imported by
    commands.py without a cycle."""


# `origin` is always on the wire (Roo requires it), so its default comes from a
# factory: `omit_defaults` leaves out plain defaults but not factory-made ones.
CLIENT_ORIGIN: Any = msgspec.field(default_factory=lambda: "client")
SERVER_ORIGIN: Any = msgspec.field(default_factory=lambda: "server")
