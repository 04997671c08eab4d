"""hdsp's parser: the global flags and one row per command (or group of commands),
each made by the `add_*_parser` of the module that holds the command's handler.

Only the parser of the subcommand that runs is made (:class:`_Subcommands`): the
others are stand-ins, so that a short command such as `hdsp tasks` builds one
parser, not seventy.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from hdsp.protocol import __version__

from ..acp.command import add_acp_parser
from ..exit_codes import exit_code_table
from ..mcp_server.command import add_mcp_serve_parser
from .agents_command import add_agent_parsers
from .asks_command import add_asks_parser
from .chat import add_chat_parser
from .checkpoints_command import add_checkpoints_parsers
from .completion import add_completion_parser
from .daemon_command import add_daemon_parser
from .kernels_command import add_kernels_parser
from .mcp_command import add_mcp_parser
from .modes_command import add_modes_parsers
from .remote_command import add_remote_parsers
from .run_command import add_answer_parser, add_attach_parser, add_run_parser, add_send_parser
from .settings_command import add_config_parser, add_profile_parser, add_secret_parser
from .task_command import add_history_parsers, add_lifecycle_parsers
from .tasks_command import add_events_parser, add_show_parser, add_tasks_parser
from .vars_command import add_vars_parser

__all__ = ["build_parser", "command_of"]

_EXAMPLES = """\
examples:
  hdsp run "Load sales.csv and tell me which region grew fastest"
  hdsp run --detach --auto-approve read,execute "Profile data.csv"
  hdsp chat                       a conversation on a new task (hdsp chat 3f2a: an old one)
  hdsp tasks                      newest first; ids may be shortened to a unique prefix
  hdsp show 3f2a --full           a task's whole history, long outputs unfolded
  hdsp asks                       every ask that waits for an answer
  hdsp answer 3f2a --yes          approve what 3f2a waits for
  hdsp answer 3f2a --no "use the parquet file instead"
  hdsp events --follow            live events as NDJSON (--since SEQ replays first)
  hdsp kernels restart 9c1e       restart a kernel (its variables are gone)
  hdsp vars 3f2a                  the variables in 3f2a's kernel (frames: shape, columns)
  eval "$(hdsp completion bash)"  tab completion, task ids included (zsh, fish too)
  hdsp --remote work tasks        a team daemon over TCP (hdsp keys; hdsp remote add)
"""


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser that takes options between its positionals, so that
    `hdsp answer 3f2a --no "why"` reads as `hdsp answer --no 3f2a "why"` does
    (argparse alone binds every positional before the first option)."""

    _intermixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        nested = any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        if nested or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


class _Unbuilt:
    """Stands in for the parser of a subcommand that is not run (see `_Subcommands`):
    takes whatever the code that builds a parser calls on it, and builds nothing."""

    def __getattr__(self, name: str) -> Any:
        return self._anything

    def _anything(self, *args: Any, **kwargs: Any) -> _Unbuilt:
        return _Unbuilt()


class _Subcommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """hdsp's subcommands. With `only` set, the parser of that subcommand alone is
    made: the others' names stay valid choices (an error lists them all) but
    their parsers are stand-ins. Making every parser, 70 of them, was a tenth of
    the CPU of a short command such as `hdsp tasks`."""

    only: str | None = None

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if self.only is None or name == self.only:
            return super().add_parser(name, **kwargs)
        self._name_parser_map[name] = _Unbuilt()
        return _Unbuilt()


def command_of(argv: list[str]) -> str | None:
    """The subcommand `argv` runs, read past the global flags; None when that is
    not plain (help, --version, an abbreviated flag) or a shell completes: then
    every parser is made."""
    if "_ARGCOMPLETE" in os.environ:
        return None
    args = iter(argv)
    for arg in args:
        if arg == "--json" or arg.startswith(("--runtime-dir=", "--remote=")):
            continue
        if arg in ("--runtime-dir", "--remote"):
            next(args, None)
            continue
        return None if arg.startswith("-") else arg
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """hdsp's parser; with `only`, made for that subcommand alone (`_Subcommands`)."""

    # The global flags work before and after the subcommand. The subcommands'
    # copies default to SUPPRESS so they don't overwrite a value given before.
    def flags(suppress: bool) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(add_help=False)
        extra: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
        parser.add_argument("--json", action="store_true", help="print NDJSON for scripts", **extra)
        parser.add_argument(
            "--runtime-dir", help="the daemon's runtime dir (env HDSP_RUNTIME_DIR)", **extra
        )
        parser.add_argument(
            "--remote",
            metavar="NAME",
            help="a remote daemon over TCP (`hdsp remote add`; env HDSP_REMOTE)",
            **extra,
        )
        return parser

    common = flags(suppress=True)
    p = argparse.ArgumentParser(
        prog="hdsp",
        description="Talk to hdspd, the hdsp agent daemon.",
        parents=[flags(False)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EXAMPLES + "\n" + exit_code_table(),
    )
    p.add_argument("--version", action="version", version=f"hdsp {__version__}")
    # (Any: the subcommands' parents are plain ArgumentParsers.)
    sub: Any = p.add_subparsers(
        action=_Subcommands,
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=_SubcommandParser,
    )
    sub.only = only

    # One row per command, in the order `hdsp --help` lists them.
    add_run_parser(sub, common)
    add_attach_parser(sub, common)
    add_answer_parser(sub, common)
    add_tasks_parser(sub, common)
    add_show_parser(sub, common)
    add_send_parser(sub, common)
    add_lifecycle_parsers(sub, common)  # cancel, resume, condense, close
    add_history_parsers(sub, common)  # rewind, edit, delete, fork
    add_events_parser(sub, common)
    add_daemon_parser(sub, common)
    add_config_parser(sub, common)
    add_profile_parser(sub, common)
    add_secret_parser(sub, common)
    add_asks_parser(sub, common)
    add_kernels_parser(sub, common)
    add_checkpoints_parsers(sub, common)
    add_modes_parsers(sub, common)
    add_agent_parsers(sub, common)
    add_vars_parser(sub, common)
    # `hdsp mcp list|tools|restart|trust` (clients/cli/mcp_command.py) and `hdsp mcp
    # serve` (clients/mcp_server/command.py), one group.
    add_mcp_serve_parser(add_mcp_parser(sub, common), common)
    add_chat_parser(sub, common)
    add_remote_parsers(sub, common)
    add_completion_parser(sub, common)
    add_acp_parser(sub, common)
    return p
