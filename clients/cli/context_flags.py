"""`--notebook` and `--cell`: the prompt context a command line gives a message
(`hdsp run`, `hdsp send`, `hdsp chat`), as the panel gives the active notebook
and cell. The daemon reads the notebook's outline from the file, inside the
task's workspace only."""

from __future__ import annotations

import argparse
import os

from hdsp.protocol import ActiveCell, ErrorCode, PromptContext, shown_name

from ..errors import CommandFailed

__all__ = ["add_context_arguments", "prompt_context"]


def add_context_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--notebook",
        metavar="PATH",
        help="the notebook the message is about (inside the task's workspace): the agent "
        "gets its outline (cells, first lines, execution counts, outputs) with the message",
    )
    parser.add_argument(
        "--cell",
        metavar="INDEX",
        type=int,
        help="with --notebook: the cell the message is about, by index from 0",
    )


def prompt_context(args: argparse.Namespace) -> PromptContext | None:
    """The context --notebook and --cell give (the daemon reads the outline from
    the file, inside the workspace only); None without them."""
    notebook: str | None = getattr(args, "notebook", None)
    cell: int | None = getattr(args, "cell", None)
    if notebook is None:
        if cell is not None:
            raise CommandFailed(ErrorCode.INVALID_REQUEST, "--cell needs --notebook PATH.")
        return None
    if cell is not None and cell < 0:
        raise CommandFailed(ErrorCode.INVALID_REQUEST, "--cell is an index from 0.")
    # An absolute path: the daemon takes it relative to the task's workspace
    # (shown as hdsp.protocol.file_names says, as the daemon reads paths back).
    return PromptContext(
        notebook=shown_name(os.path.abspath(notebook)),
        cell=ActiveCell(index=cell) if cell is not None else None,
        outline_from_file=True,
    )
