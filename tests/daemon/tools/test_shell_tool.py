"""execute_command with real processes: live output, exit codes, timeouts and
cancellation that stop the whole process group, leaving no process behind."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from hdsp.daemon.tools import ExecuteCommand, OutsideWorkspaceError, ToolError
from hdsp.protocol import ClineMessage, Say, encode
from tests.daemon.tools.tool_results import text_in
from tests.support.tool_context import RecordingContext

#: Prints the pids of two background children and of the shell, then waits.
SPAWNS_CHILDREN = "sleep 1000 & echo child=$!; sleep 1000 & echo child=$!; echo leader=$$; wait"


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent to reap it is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def pids_in(text: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"(?:child|leader)=(\d+)", text)]


@pytest.fixture
def ctx(tmp_path: Path) -> RecordingContext:
    root = tmp_path.resolve() / "ws"
    (root / "sub").mkdir(parents=True)
    return RecordingContext(root)


async def test_output_streams_in_several_updates_and_is_finalised(ctx: RecordingContext) -> None:
    tool = ExecuteCommand(update_interval=0.01)
    # The command paces itself; the test only observes.
    command = "for i in 1 2 3 4 5; do echo line$i; sleep 0.15; done"
    result = await tool.execute(ctx, {"command": command})
    assert text_in(result) == "Exit code: 0\nOutput:\nline1\nline2\nline3\nline4\nline5"
    assert not result.is_error
    [message] = ctx.of_kind(Say.COMMAND_OUTPUT)
    assert not message.partial and message.text == "line1\nline2\nline3\nline4\nline5\n"
    partial_texts = [m.text for m in ctx.updates_of(message.ts) if m.partial]
    assert len(set(partial_texts)) >= 3, partial_texts
    # Each live update shows a growing prefix of the final output.
    assert all(message.text.startswith(t or "") for t in partial_texts)


async def test_exit_code_and_stderr(ctx: RecordingContext) -> None:
    result = await ExecuteCommand().execute(ctx, {"command": "echo out; echo oops >&2; exit 3"})
    assert text_in(result) == "Exit code: 3\nOutput:\nout\noops"
    assert not result.is_error


async def test_output_that_is_not_utf8_is_represented_not_raised(ctx: RecordingContext) -> None:
    # Issue 13, finding 6's kin: bytes a command prints that are no UTF-8 (a
    # Latin-1 file, a binary) reach the model and the clients as U+FFFD, and the
    # message they are in encodes.
    result = await ExecuteCommand().execute(ctx, {"command": "printf 'caf\\351 \\377\\n'"})
    assert text_in(result) == "Exit code: 0\nOutput:\ncaf\ufffd \ufffd"
    [message] = ctx.of_kind(Say.COMMAND_OUTPUT)
    assert encode(message) and message.text == "caf\ufffd \ufffd\n"


async def test_no_output(ctx: RecordingContext) -> None:
    result = await ExecuteCommand().execute(ctx, {"command": "true"})
    assert text_in(result) == "Exit code: 0\n(no output)"


async def test_cwd_must_be_inside_the_workspace(ctx: RecordingContext) -> None:
    result = await ExecuteCommand().execute(ctx, {"command": "pwd", "cwd": "sub"})
    assert text_in(result).endswith(str(ctx.workspace / "sub"))
    with pytest.raises(OutsideWorkspaceError):
        await ExecuteCommand().execute(ctx, {"command": "pwd", "cwd": ".."})
    with pytest.raises(ToolError, match="No such file"):
        await ExecuteCommand().execute(ctx, {"command": "pwd", "cwd": "nope"})
    assert ctx.of_kind(Say.COMMAND_OUTPUT)[0].text == f"{ctx.workspace / 'sub'}\n"


async def test_the_daemons_keys_are_not_in_the_environment(
    ctx: RecordingContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HDSP_API_KEY", "sk-very-secret")
    monkeypatch.setenv("HDSP_TEST_VISIBLE", "visible")
    command = 'echo "[$HDSP_API_KEY][$HDSP_TEST_VISIBLE]"'
    result = await ExecuteCommand().execute(ctx, {"command": command})
    assert text_in(result).endswith("[][visible]")


async def test_huge_output_is_cut_in_the_middle_for_the_model(ctx: RecordingContext) -> None:
    tool = ExecuteCommand(max_output_chars=600, max_client_chars=3000)
    result = await tool.execute(ctx, {"command": "seq 1 100000"})
    text = text_in(result)
    assert text.startswith("Exit code: 0\nOutput:\n1\n2\n3\n")
    assert text.endswith("99999\n100000")
    assert re.search(r"\[\.\.\. [\d,]+ characters cut \.\.\.\]", text)
    assert len(text) < 800
    [message] = ctx.of_kind(Say.COMMAND_OUTPUT)
    assert message.text is not None and len(message.text) < 3100


async def test_ansi_codes_and_progress_redraws_are_cleaned_for_the_model(
    ctx: RecordingContext,
) -> None:
    command = r"printf '\033[32mok\033[0m\n10%%\r50%%\r100%%\ndone\n'"
    result = await ExecuteCommand().execute(ctx, {"command": command})
    assert text_in(result) == "Exit code: 0\nOutput:\nok\n100%\ndone"
    # Clients get the raw bytes: they may render colours.
    assert "\x1b[32m" in (ctx.of_kind(Say.COMMAND_OUTPUT)[0].text or "")


async def test_timeout_kills_the_whole_group(ctx: RecordingContext) -> None:
    tool = ExecuteCommand(kill_grace=2)
    result = await tool.execute(ctx, {"command": SPAWNS_CHILDREN, "timeout": 1})
    text = text_in(result)
    assert result.is_error
    assert text.startswith("The command timed out after 1 s; hdsp stopped it and every process")
    pids = pids_in(text)
    assert len(pids) == 3
    assert not [pid for pid in pids if alive(pid)]
    [error] = ctx.of_kind(Say.ERROR)
    assert error.text is not None and "timed out after 1 s" in error.text
    [message] = ctx.of_kind(Say.COMMAND_OUTPUT)
    assert not message.partial


async def test_children_that_ignore_sigterm_get_sigkill(ctx: RecordingContext) -> None:
    tool = ExecuteCommand(kill_grace=0.5)
    # `trap '' TERM` makes the shell and its children ignore SIGTERM.
    command = "trap '' TERM; " + SPAWNS_CHILDREN
    with anyio.fail_after(20):
        result = await tool.execute(ctx, {"command": command, "timeout": 0.5})
    pids = pids_in(text_in(result))
    assert len(pids) == 3
    assert not [pid for pid in pids if alive(pid)]


async def test_background_processes_stop_when_the_command_ends(ctx: RecordingContext) -> None:
    tool = ExecuteCommand(drain_seconds=0.2)
    result = await tool.execute(
        ctx, {"command": "sleep 1000 & echo child=$!; sleep 1000 >/dev/null 2>&1 & echo child=$!"}
    )
    text = text_in(result)
    assert text.startswith("Exit code: 0")
    pids = pids_in(text)
    assert len(pids) == 2
    assert not [pid for pid in pids if alive(pid)]


async def test_cancellation_midway_kills_the_group_and_leaves_no_orphans(
    ctx: RecordingContext,
) -> None:
    tool = ExecuteCommand(update_interval=0.01)

    def started(message: ClineMessage) -> bool:
        return message.say == Say.COMMAND_OUTPUT and "leader=" in (message.text or "")

    outcome: list[str] = []

    async def run(scope: anyio.CancelScope) -> None:
        with scope:
            await tool.execute(ctx, {"command": SPAWNS_CHILDREN})
            outcome.append("returned")  # it must not: it was cancelled

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, scope)
        with anyio.fail_after(10):
            message = await ctx.wait_for(started)
        pids = pids_in(message.text or "")
        assert len(pids) == 3 and all(alive(pid) for pid in pids)
        scope.cancel()
    assert scope.cancelled_caught and outcome == []
    assert not [pid for pid in pids if alive(pid)]
    # Clients are not left with a message that looks as if it were still running.
    [final] = ctx.of_kind(Say.COMMAND_OUTPUT)
    assert not final.partial and "leader=" in (final.text or "")
