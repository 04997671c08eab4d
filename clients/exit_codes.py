"""The exit codes of `hdsp`, in one table: the CLI returns them, `hdsp --help`
prints the table, and the tests check both against it."""

from __future__ import annotations

import enum

__all__ = ["ExitCode", "exit_code_table"]


class ExitCode(enum.IntEnum):
    #: The command did what it was asked; a task it followed completed.
    OK = 0
    #: A task it followed failed or was aborted; an import left parts out.
    FAILED = 1
    #: Bad usage, or the daemon refused the command (unknown task, bad value, ...).
    USAGE = 2
    #: The daemon is not running or cannot be reached.
    UNREACHABLE = 3
    #: The task waits for an answer (an approval or a question) that nobody here
    #: can give: not a terminal, or --json (`hdsp answer` gives it).
    WAITING = 4
    #: Interrupted (Ctrl-C) before the command finished.
    INTERRUPTED = 130


_MEANING = {
    ExitCode.OK: "success (a task followed to its end completed)",
    ExitCode.FAILED: "the task failed or was aborted (or `config import` left parts out)",
    ExitCode.USAGE: "bad usage, or the daemon refused the command",
    ExitCode.UNREACHABLE: "the daemon is unreachable",
    ExitCode.WAITING: "the task waits for an answer nobody here can give (see `hdsp answer`)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_code_table() -> str:
    """The table as `--help` shows it."""
    return "exit codes:\n" + "\n".join(f"  {int(code):<4}{_MEANING[code]}" for code in ExitCode)
