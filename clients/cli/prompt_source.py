"""Where `hdsp run` and `hdsp send` take the prompt from: the command line,
stdin (`-`), or a file (`--file PATH`), so that a long prompt needs no shell
quoting and a script can pipe one in.

Prompts have a size limit (:data:`~hdsp.protocol.MAX_PROMPT_BYTES`, 1 MiB),
which the daemon enforces for every client and explains with the model's context
size; this module reads at most :data:`READ_LIMIT` bytes, so that a prompt read
from a stream without end is refused here instead of filling memory.
"""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO

from hdsp.protocol import MAX_PROMPT_BYTES, ErrorCode

from ..errors import CommandFailed

__all__ = ["READ_LIMIT", "add_prompt_file_argument", "read_prompt"]

#: The most bytes read from stdin or a file: well past the limit, so that the
#: daemon's refusal (which names the model's context size) is what most see.
READ_LIMIT = 16 * MAX_PROMPT_BYTES


def add_prompt_file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file",
        dest="prompt_file",
        metavar="PATH",
        help="read the prompt from this file ('-': stdin); a prompt may be up to 1 MiB",
    )


def _read(stream: BinaryIO, name: str) -> str:
    data = stream.read(READ_LIMIT + 1)
    if len(data) > READ_LIMIT:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"The prompt in {name} is larger than {READ_LIMIT >> 20} MiB; hdsp takes prompts "
            f"of up to 1 MiB ({MAX_PROMPT_BYTES:,} bytes).",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"The prompt in {name} is not UTF-8 text (byte {exc.start}).",
        ) from None
    return text.removesuffix("\n")


def read_prompt(given: str | None, path: str | None, what: str = "prompt") -> str:
    """The prompt: `given` on the command line, or read from stdin (`given` or
    `path` is '-') or from the file `path`."""
    if given is not None and path is not None:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"Give the {what} once: as an argument, as - (stdin) or with --file PATH.",
        )
    if given is None and path is None:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST,
            f"No {what}: give it as an argument, as - (stdin) or with --file PATH.",
        )
    if given is not None and given != "-":
        return given
    if given == "-" or path == "-":
        if sys.stdin.isatty():
            print(f"hdsp: reading the {what} from the terminal; Ctrl-D ends it.", file=sys.stderr)
        return _read(sys.stdin.buffer, "stdin")
    assert path is not None
    try:
        with open(path, "rb") as f:
            return _read(f, path)
    except OSError as exc:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST, f"Cannot read the {what} from {path}: {exc.strerror}."
        ) from None
