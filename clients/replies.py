"""A command's reply as its caller reads it: the result, decoded into the type
the command's row names, or the daemon's refusal raised as `CommandFailed`.
The `Client` and the one-shot request (:mod:`.oneshot`) both read replies here."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from hdsp.protocol import CommandBase, Reply, command_name, command_spec

from .errors import CommandFailed, ProtocolError

__all__ = ["result_of"]

#: The result type of a command.
R = TypeVar("R")


def result_of(reply: Reply, command: CommandBase[R]) -> R:
    """The result `reply` carries for `command`. CommandFailed when the daemon
    refused the command; ProtocolError when the reply cannot be read."""
    if not reply.ok:
        if reply.error is None:
            raise ProtocolError("The daemon sent an error reply without an error.")
        raise CommandFailed.from_info(reply.error)
    spec = command_spec(command)
    try:
        if isinstance(reply.result, msgspec.Raw):  # decoded once, into its type
            result: R = msgspec.json.decode(reply.result, type=spec.result)
        else:
            result = msgspec.convert(reply.result, spec.result, from_attributes=False)
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"Unreadable result of {command_name(command)}: {exc}") from exc
    return result
