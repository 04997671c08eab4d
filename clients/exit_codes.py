"""The exit codes of `hdsp`, in one place (the README's table lists them)."""

from __future__ import annotations

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE", "EXIT_WAITING"]

#: The command did what it was asked; a task it followed completed.
EXIT_OK = 0
#: A task it followed failed or was aborted, or the person detached from it.
EXIT_FAILED = 1
#: Bad usage, or a command the daemon refused.
EXIT_USAGE = 2
#: The daemon is unreachable (not running, or gone for good).
EXIT_UNREACHABLE = 3
#: The task waits for an answer (an approval, a question) that no one here can
#: give: `hdsp run` off a terminal or with --json, or input ended at the prompt.
#: `hdsp answer TASK --yes|--no` or `hdsp attach TASK` on a terminal go on.
EXIT_WAITING = 4
