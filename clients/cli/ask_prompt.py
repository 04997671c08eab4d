"""Reading an answer to an ask from the terminal, in a way that can be called off.

`input()` in a worker thread cannot be stopped: when the ask was answered by
another client, the task was cancelled or the daemon went away, the CLI would
wait for Enter before it could say so. :func:`read_line` waits for the line on
the event loop instead, so that cancelling its scope ends it at once; what the
person had typed but not entered is discarded (it answered an ask that is
gone), and the line is ended so that what comes next starts on its own line.
:func:`typed_answer` reads the line as the answer it gives.
"""

from __future__ import annotations

import os
import sys
import termios

__all__ = ["read_line", "typed_answer"]


def typed_answer(line: str, *, followup: bool = False) -> tuple[str, str | None]:
    """The answer (askResponse, text) that `line`, typed at an ask's prompt,
    gives: y or yes approves, n or no denies, `n WHY` denies saying why, and any
    other line answers in words. To a `followup` question only a bare y/yes/n/no
    is a verdict: any other line is the answer."""
    lowered = line.lower()
    if followup and lowered not in ("y", "yes", "n", "no"):
        return "messageResponse", line
    if lowered in ("y", "yes"):
        return "yesButtonClicked", None
    if lowered in ("n", "no"):
        return "noButtonClicked", None
    if lowered.startswith(("n ", "no ")):
        return "noButtonClicked", line.split(" ", 1)[1]
    return "messageResponse", line


async def read_line(prompt: str) -> str:
    """Write `prompt` and return the next line typed on stdin (a terminal in its
    usual line mode), without its newline. EOFError on end of input (Ctrl-D)."""
    import anyio  # (the commands that ask; not every CLI start)

    sys.stdout.write(prompt)
    sys.stdout.flush()
    fd = sys.stdin.fileno()
    data = b""
    try:
        while b"\n" not in data:
            await anyio.wait_readable(fd)
            chunk = os.read(fd, 4096)
            if not chunk:
                if data:
                    break
                raise EOFError
            data += chunk
    except anyio.get_cancelled_exc_class():
        try:
            termios.tcflush(fd, termios.TCIFLUSH)
        except termios.error:
            pass
        sys.stdout.write("\n")
        sys.stdout.flush()
        raise
    return data.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")
