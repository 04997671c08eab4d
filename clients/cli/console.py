"""What a subcommand of `hdsp` writes through, and how it is registered.

Subcommands that live in modules of their own (`hdsp asks`, `hdsp kernels`,
`hdsp chat`, ...) get the parsed arguments and a :class:`Console` (the CLI) and
return an exit code; they register by `set_defaults(handler=...)`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Protocol, TextIO

from hdsp.protocol import encode

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["Console", "Handler", "print_result", "use_color"]


class Console(Protocol):
    args: argparse.Namespace

    def out(self, text: str) -> None:
        """A line for a person: control characters in it are shown escaped."""

    def out_raw(self, text: str) -> None:
        """A line as it is (JSON)."""


Handler = Callable[["Console", "Client"], Awaitable[int]]


def print_result(cli: Console, value: object, lines: Iterable[str]) -> None:
    """What a command prints of its result: `value` as one line of JSON under
    --json, else `lines` for a person."""
    if cli.args.json:
        cli.out_raw(encode(value).decode())
    else:
        for line in lines:
            cli.out(line)


def use_color(stream: TextIO) -> bool:
    """Whether to colour what goes to `stream`: a terminal, unless NO_COLOR is set
    to something (no-color.org: an empty NO_COLOR does not count)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")
