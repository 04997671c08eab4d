"""`hdsp mcp serve`'s arguments. The server itself (:mod:`.server`, with
the mcp SDK) loads only when the command runs, so that other commands start fast."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_mcp_serve_parser"]


def add_mcp_serve_parser(actions: Any, common: argparse.ArgumentParser) -> None:
    """`serve` in the `hdsp mcp` group (`actions`: the group's subparsers)."""
    serve = actions.add_parser(
        "serve",
        parents=[common],
        help="serve hdsp's kernels, notebooks and tasks to an MCP host (stdio)",
        description=(
            "Serve hdsp to an MCP host over stdin/stdout: list and start kernels, run code "
            "(output as progress, interrupted on cancel), read and edit notebook cells, list "
            "variables, start and follow tasks. Runs, writes and edits wait for approval in "
            "any hdsp client, or in the host when it can ask (elicitation)."
        ),
    )
    serve.add_argument(
        "--workspace",
        metavar="DIR",
        help="the directory the host works in (default: the current directory)",
    )
    serve.add_argument(
        "--no-elicitation",
        action="store_true",
        help="never put hdsp's asks to the host, even when it offers elicitation (for a "
        "host that may let its model answer them): answer them in hdsp's clients only",
    )
