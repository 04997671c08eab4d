"""`hdsp`: the command-line frontend of hdspd.

:mod:`.parser` builds the parser, one row per command; each command's handler
lives in the module that adds its row (`*_command`, :mod:`.chat`, ...) and is run
here, connected to the daemon, with the parsed arguments and a :class:`Console`.
Heavy imports (asyncio, the async client, the live view) stay inside the handlers
that need them, so that `hdsp --help` and `hdsp tasks` start fast.

Exit codes: see :mod:`hdsp.client.exit_codes` (`hdsp --help` prints the table).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

from ..acp.command import print_jupyter_ai_persona
from ..errors import ClientError, CommandFailed, RemoteConfigError
from ..escape import escape_controls
from ..exit_codes import ExitCode
from .completion import autocomplete, print_completion
from .parser import build_parser, command_of
from .remote_command import LOCAL_COMMANDS, run_local_command
from .settings_command import read_secret_value
from .tasks_command import tasks_once

__all__ = ["main"]


class _Cli:
    """The :class:`~.console.Console` every handler writes through."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def out(self, text: str) -> None:
        """A line for a person: control characters in it are shown escaped."""
        self.out_raw(escape_controls(text))

    def out_raw(self, text: str) -> None:
        """A line as it is (JSON, whose encoder escapes what it must)."""
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def tasks_once(self) -> int:
        """`hdsp tasks` from the local daemon, without an event loop."""
        try:
            return tasks_once(self)
        except ClientError as exc:
            return self._failed(exc)

    async def main(self) -> int:
        try:
            return await self._connected()
        except BaseExceptionGroup as group:
            # A task group's wrapping of one error of ours: that error, not a traceback.
            errors = group.subgroup(ClientError)
            if errors is None or errors.exceptions != group.exceptions:
                raise
            return self._failed(_first_leaf(errors))
        except ClientError as exc:
            return self._failed(exc)

    async def _connected(self) -> int:
        handler = functools.partial(self.args.handler, self)
        name = getattr(self.args, "client_name", "hdsp")
        kind = getattr(self.args, "client_kind", "cli")
        from ..client import connect  # asyncio and the async client: not for --help

        async with connect(
            self.args.runtime_dir, remote=self.args.remote, name=name, kind=kind
        ) as client:
            code: int = await handler(client)
            return code

    @staticmethod
    def _failed(error: ClientError) -> int:
        """Say what failed; the exit code: a refusal (a remote that cannot be
        used, a command the daemon refused) is bad usage, the rest is a daemon
        that cannot be reached."""
        message = error.message if isinstance(error, CommandFailed) else str(error)
        print(f"hdsp: {escape_controls(message)}", file=sys.stderr)
        if isinstance(error, RemoteConfigError | CommandFailed):
            return ExitCode.USAGE
        return ExitCode.UNREACHABLE


def _first_leaf(group: BaseExceptionGroup[ClientError]) -> ClientError:
    error: ClientError | BaseExceptionGroup[ClientError] = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(command_of(sys.argv[1:] if argv is None else argv))
    autocomplete(parser)  # answers the shell and exits, when a shell asks
    args = parser.parse_args(argv)
    if args.command == "completion":
        return print_completion(args.shell)
    if args.command in LOCAL_COMMANDS:
        return run_local_command(args)
    if args.command == "secret" and args.action == "set":
        # Read before connecting, and never from argv (where `ps` and shell
        # history would show it).
        code = read_secret_value(args)
        if code is not None:
            return code
    if args.command == "acp" and args.jupyter_ai_persona:
        return print_jupyter_ai_persona(args.runtime_dir)  # (a file to write: no daemon needed)
    if args.command == "mcp" and args.action == "serve":
        from ..mcp_server.server import run_mcp_serve  # the mcp SDK loads only for this command

        return run_mcp_serve(args)
    if args.command == "tasks" and not 1 <= args.limit <= 1000:
        print("hdsp: --limit must be between 1 and 1000", file=sys.stderr)
        return ExitCode.USAGE
    try:
        if args.command == "tasks":
            from ..oneshot import local_daemon  # (pyzmq; not for --help)

            if local_daemon(args.runtime_dir, args.remote):
                return _Cli(args).tasks_once()  # one question: no asyncio, no async client
        import anyio

        return anyio.run(_Cli(args).main, backend="asyncio")
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`hdsp events | head`): not an error of ours. Point
        # stdout at /dev/null so that the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
