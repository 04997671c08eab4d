"""The `hdsp acp` subcommand: an ACP agent on stdin/stdout for an editor to start."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from ..exit_codes import ExitCode

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["add_acp_parser", "print_jupyter_ai_persona"]

_HELP = """\
Speak the Agent Client Protocol (JSON-RPC on stdin/stdout) for an editor that
hosts agents: Jupyter AI, Zed, ... Each ACP session is a hdsp task in the
editor's working directory; it outlives the editor, any hdsp client can follow
and answer it, and a reload finds it again (session/load). Start hdspd first.

Jupyter AI 3: `hdsp acp --jupyter-ai-persona > DIR/.jupyter/personas/hdsp_persona.py`
(DIR: Jupyter's root directory, or a folder below it that holds the chats) adds
hdsp to the chats' personas (@hdsp); with --runtime-dir, the persona's adapter
talks to that hdspd. Zed: an `agent_servers` entry whose command is
`hdsp` with the argument `acp`.
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
    acp.add_argument(
        "--jupyter-ai-persona",
        action="store_true",
        help="print the Jupyter AI persona file that runs this hdsp's `hdsp acp`, "
        "for a .jupyter/personas/ directory (needs no hdspd)",
    )
    acp.set_defaults(handler=run_acp, client_name="hdsp acp", client_kind="acp")


def print_jupyter_ai_persona(runtime_dir: str | None) -> int:
    from .jupyter_ai_persona import persona_file

    command = [sys.executable, "-m", "hdsp.client", "acp"]
    if runtime_dir is not None:
        command += ["--runtime-dir", os.path.abspath(runtime_dir)]
    sys.stdout.write(persona_file(command))
    return ExitCode.OK
