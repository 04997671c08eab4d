"""The `hdsp acp` subcommand: an ACP agent on stdin/stdout for an editor to start."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ..client import Client
from ..exit_codes import ExitCode

__all__ = ["add_acp_parser"]

_HELP = """\
Speak the Agent Client Protocol (JSON-RPC on stdin/stdout) for an editor that
hosts agents: Jupyter AI, Zed, ... Each ACP session is a hdsp task in the
editor's working directory; it outlives the editor, any hdsp client can follow
and answer it, and a reload finds it again (session/load). Start hdspd first.
"""


async def run_acp(cli: Any, client: Client) -> int:
    from .agent import serve

    # stdout carries the protocol: everything else goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    await serve(client)
    return ExitCode.OK


def add_acp_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    acp = sub.add_parser(
        "acp",
        parents=[common],
        help="be an Agent Client Protocol agent on stdio (for Jupyter AI, Zed, ...)",
        description=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    acp.set_defaults(handler=run_acp, client_name="hdsp acp", client_kind="acp")
