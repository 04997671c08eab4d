"""Shell completion for `hdsp` (bash, zsh, fish), by argcomplete.

`hdsp completion bash` prints the script a shell evaluates
(`eval "$(hdsp completion bash)"`, `hdsp completion fish | source`); the shell then
runs `hdsp` itself with argcomplete's environment, and :func:`autocomplete`
answers from the parser: subcommands, options, and task ids (which ask the
daemon, with a short deadline, see :mod:`.task_ids`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["SHELLS", "add_completion_parser", "autocomplete", "print_completion"]

SHELLS = ("bash", "zsh", "fish")


def autocomplete(parser: argparse.ArgumentParser) -> None:
    """When a shell asks for completions, print them and exit; else nothing.
    (argcomplete is imported only then: other commands don't pay for it.)"""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


def print_completion(shell: str) -> int:
    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode(["hdsp"], shell=shell))
    return 0


def add_completion_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    completion = sub.add_parser(
        "completion",
        parents=[common],
        help="print the shell code for tab completion (bash, zsh, fish)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='examples:\n  eval "$(hdsp completion bash)"    # in ~/.bashrc\n'
        '  eval "$(hdsp completion zsh)"     # in ~/.zshrc\n'
        "  hdsp completion fish > ~/.config/fish/completions/hdsp.fish",
    )
    completion.add_argument("shell", choices=SHELLS)
