"""execute_command: run a shell command in the workspace, streaming its output.

The command runs as `/bin/sh -c` in a session (and so a process group) of its own,
which is what lets hdsp stop *everything* it started: a timeout, the end of the
command, or the task's cancellation signals the whole group (SIGTERM, then SIGKILL
after a grace period) and waits until every member is gone, so no orphan keeps
running, writing files or holding the output pipe after the tool returns.

Output reaches clients live: one partial `command_output` say, updated at most
every `update_interval` seconds (a command printing a million lines must not
become a million events), and finalised when the command ends. The model gets the
exit status and the output with ANSI codes and progress-bar redraws removed, its
middle cut when it is huge (the head says what ran, the tail how it ended).

In the sandbox (:mod:`hdsp.daemon.sandbox`, handed in by the daemon), the group's
leader is bwrap: the shell runs as a child of the init of a PID namespace of its
own, so when the shell exits, or the group is signalled (bwrap dies of SIGTERM),
that init dies and the kernel kills every process in the namespace, those that
left the group with `setsid` too. Background processes therefore end with the
shell there, without the drain period below. The result's first line says what
the sandbox allowed, so a model that sees "Permission denied" knows why.

Waiting for processes that are not our children uses pidfds (Linux >= 5.3):
waiting on an event, not polling. Where they are missing, the leader is waited
for and the group is killed after the grace period.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.abc
import anyio.to_thread

from hdsp.daemon.bounded_text import BoundedText
from hdsp.daemon.config.secrets import ENV_FALLBACKS
from hdsp.daemon.sandbox import Sandbox, SandboxUnavailable
from hdsp.protocol import ClineMessage, Say

from .base import Tool, ToolCategory, ToolContext, ToolError, ToolResult
from .workspace import Workspace

__all__ = ["ExecuteCommand", "stop_process_group"]

#: The daemon's own model keys; a command must not be able to print them.
SECRET_ENV = frozenset(var for env_vars in ENV_FALLBACKS.values() for var in env_vars)

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _cut_marker(count: int) -> str:
    return f"[... {count:,} characters cut ...]"


def clean_for_model(text: str) -> str:
    """Terminal output as a model should read it: no ANSI codes, and of a line
    redrawn with carriage returns (a progress bar) only its last state."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    if "\r" not in text:
        return text
    lines = []
    for line in text.split("\n"):
        if "\r" in line:
            parts = [p for p in line.split("\r") if p]
            line = parts[-1] if parts else ""
        lines.append(line)
    return "\n".join(lines)


# ---- process groups -------------------------------------------------------------------


def _group_members(pgid: int) -> list[int] | None:
    """Live (not zombie) processes of group `pgid`, from /proc; None without /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    members = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone already
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid:
            members.append(int(name))
    return members


async def _wait_gone(pids: list[int]) -> None:
    """Return once every one of `pids` has exited (pidfds: no polling)."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except (ProcessLookupError, AttributeError, OSError):
            continue  # gone already (or no pidfds here: the caller's deadline rules)
        try:
            await anyio.wait_readable(fd)
        finally:
            os.close(fd)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def stop_process_group(process: anyio.abc.Process, *, grace: float) -> None:
    """Stop every process in `process`'s group (it leads a session of its own):
    SIGTERM, up to `grace` seconds to exit, then SIGKILL; returns once they are
    gone (or after a last short deadline). Call it shielded when cancelled."""
    pgid = process.pid
    members = _group_members(pgid)
    if members is not None:
        others = [pid for pid in members if pid != pgid]
        leader_alive = process.returncode is None
        if not others and not leader_alive:
            return
    _signal_group(pgid, signal.SIGTERM)
    with anyio.move_on_after(grace):
        await process.wait()
        if members is not None:
            await _wait_gone(_group_members(pgid) or [])
    _signal_group(pgid, signal.SIGKILL)
    with anyio.move_on_after(5):
        await process.wait()
        await _wait_gone(_group_members(pgid) or [])


# ---- the tool ------------------------------------------------------------------------


@dataclass
class _Run:
    """What one running command has produced so far."""

    message: ClineMessage
    for_model: BoundedText
    for_clients: BoundedText
    changed: anyio.Event = field(default_factory=anyio.Event)
    output_closed: anyio.Event = field(default_factory=anyio.Event)

    def append(self, text: str) -> None:
        if text:
            self.for_model.append(text)
            self.for_clients.append(text)
            self.changed.set()


class ExecuteCommand(Tool):
    name: ClassVar[str] = "execute_command"
    description: ClassVar[str] = (
        "Run a shell command (/bin/sh -c) in the workspace, or in `cwd` inside it, and "
        "get its exit code and output (stdout and stderr together; the middle of very "
        "long output is cut). The user sees the output live. Commands get no input: use "
        "non-interactive flags (`-y`, `--no-input`). Each call starts a new shell, so `cd` "
        "and variables do not carry over. The command is stopped after `timeout` seconds; "
        "processes it leaves in the background are stopped when it ends. It runs in a "
        "sandbox (unless the user turned it off): writes only in the workspace and /tmp, "
        "no network, no access to ~/.ssh, ~/.config, keyrings or other credentials. For "
        "Python data work, prefer the kernel."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "The shell command."},
            "cwd": {
                "type": "string",
                "description": "Directory to run in, relative to the workspace. Default: "
                "the workspace.",
            },
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 86400,
                "description": "Seconds before the command is stopped. Default: 600.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.COMMAND

    def __init__(
        self,
        *,
        default_timeout: float = 600.0,
        update_interval: float = 0.25,
        kill_grace: float = 3.0,
        drain_seconds: float = 0.5,
        max_output_chars: int = 30_000,
        max_client_chars: int = 500_000,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.default_timeout = default_timeout
        #: Clients see the output at most this often (seconds between updates).
        self.update_interval = update_interval
        #: Seconds between SIGTERM and SIGKILL.
        self.kill_grace = kill_grace
        #: After the shell exits, how long background processes that still hold
        #: the output pipe may keep writing before they are stopped.
        self.drain_seconds = drain_seconds
        #: Output kept for the model (head and tail).
        self.max_output_chars = max_output_chars
        #: Output kept in the `command_output` message for clients (head and tail).
        self.max_client_chars = max_client_chars
        #: Where commands run; None: unconfined, with the daemon's keys removed
        #: from the environment (unit tests of the output handling).
        self.sandbox = sandbox

    @staticmethod
    def _cwd(root: Path, given: str | None) -> Path:
        ws = Workspace(root)
        path = ws.resolve(given or ".")
        if not path.exists():
            raise ws.not_found(given or ".")
        if not path.is_dir():
            raise ToolError(f"cwd {given!r} is not a directory.")
        return path

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        command = str(args["command"])
        timeout = float(args.get("timeout") or self.default_timeout)
        cwd = await anyio.to_thread.run_sync(self._cwd, ctx.workspace, args.get("cwd"))
        argv = ["/bin/sh", "-c", command]
        header = ""
        if self.sandbox is None:
            env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        else:
            try:
                argv = self.sandbox.wrap(argv, workspace=ctx.workspace, cwd=cwd)
            except SandboxUnavailable as exc:
                raise ToolError(f"The command was not run. {exc.message}") from None
            env = self.sandbox.environment()
            header = self.sandbox.describe() + "\n"
        try:
            process = await anyio.open_process(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(f"The command could not be started: {exc}") from exc
        run: _Run | None = None
        timed_out = False
        try:
            run = _Run(
                message=await ctx.say(Say.COMMAND_OUTPUT, "", partial=True),
                for_model=BoundedText(self.max_output_chars),
                for_clients=BoundedText(self.max_client_chars),
            )
            async with anyio.create_task_group() as tg:
                assert process.stdout is not None
                tg.start_soon(self._read, process.stdout, run)
                tg.start_soon(self._publish, ctx, run)
                with anyio.move_on_after(timeout) as deadline:
                    await process.wait()
                timed_out = deadline.cancelled_caught
                if not timed_out:
                    with anyio.move_on_after(self.drain_seconds):
                        await run.output_closed.wait()
                await stop_process_group(process, grace=self.kill_grace)
                with anyio.move_on_after(1):
                    await run.output_closed.wait()
                tg.cancel_scope.cancel()
        finally:
            # Also on cancellation: nothing the command started may outlive it, and
            # clients must not keep a message that looks as if it were still running.
            with anyio.move_on_after(self.kill_grace + 10, shield=True):
                await stop_process_group(process, grace=self.kill_grace)
                await process.aclose()
                if run is not None:
                    run.message = await ctx.update(
                        run.message, text=run.for_clients.text(_cut_marker), partial=False
                    )
        assert run is not None
        output = clean_for_model(run.for_model.text(_cut_marker)).strip("\n")
        if timed_out:
            note = (
                f"The command timed out after {timeout:g} s; hdsp stopped it and every "
                "process it started."
            )
            await ctx.say(Say.ERROR, note)
            status = note
        elif process.returncode is not None and process.returncode < 0:
            status = f"The command was killed by signal {-process.returncode}."
        else:
            status = f"Exit code: {process.returncode}"
        body = f"{status}\nOutput:\n{output}" if output else f"{status}\n(no output)"
        result = ToolResult.text(header + body, is_error=timed_out)
        result.summary = status  # (the output is the command_output message's)
        return result

    @staticmethod
    async def _read(stream: anyio.abc.ByteReceiveStream, run: _Run) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            async for chunk in stream:
                run.append(decoder.decode(chunk))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            run.append(decoder.decode(b"", final=True))
            run.output_closed.set()

    async def _publish(self, ctx: ToolContext, run: _Run) -> None:
        """Send the output to clients when it changed, at most every update_interval."""
        while True:
            await run.changed.wait()
            run.changed = anyio.Event()
            run.message = await ctx.update(
                run.message, text=run.for_clients.text(_cut_marker), partial=True
            )
            await anyio.sleep(self.update_interval)
