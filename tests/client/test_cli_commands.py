"""The CLI's commands as a user runs them (issue 15): `answer`'s two forms, `show`
with the whole history, `asks`, `kernels`, `resume`, `close`, `cancel`,
`config set`, `events --follow`, `daemon status`, `secret set`, completion and
the exit-code table. Each drives the real `hdsp` against a real `hdspd` with
the scripted fake model."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from hdsp.client import Client
from hdsp.client.exit_codes import ExitCode
from hdsp.protocol import TaskInteractive, TaskSnapshot
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import cli_env, run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.events import ENDINGS, collect_turn
from tests.support.scripted_turns import call, done


def write_call(path: str, content: str = "hi\n") -> FakeReply:
    return call("write_to_file", path=path, content=content)


async def start(client: Client, text: str, workspace: Path, **kwargs: object) -> tuple[str, int]:
    head = (await client.status()).head_seq
    ref = await client.start_task(text, workspace=workspace, **kwargs)  # type: ignore[arg-type]
    return ref.task_id, head


async def wait_for_ask(client: Client, task_id: str, since: int) -> None:
    with anyio.fail_after(30):
        await collect_turn(client, task_id, since, until=(TaskInteractive,))


async def wait_for_end(client: Client, task_id: str, since: int) -> None:
    with anyio.fail_after(30):
        await collect_turn(client, task_id, since, until=ENDINGS)


async def run_to_end(client: Client, text: str, workspace: Path, **kwargs: object) -> str:
    """A new task, its first turn waited to its end: its id."""
    task_id, head = await start(client, text, workspace, **kwargs)
    await wait_for_end(client, task_id, head)
    return task_id


async def two_turns(client: Client, workspace: Path, second: str) -> tuple[str, TaskSnapshot]:
    """A task that was told "hi", then `second`, each turn to its end: its id and
    its history."""
    task_id = await run_to_end(client, "hi", workspace)
    head = (await client.status()).head_seq
    await client.send_message(task_id, second)
    await wait_for_end(client, task_id, head)
    return task_id, await client.get_task(task_id)


@pytest.mark.slow
async def test_answer_takes_no_and_its_reason_in_both_orders_and_show_tells_the_whole_story(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(write_call("a.txt"), write_call("b.txt"), done("nothing written"))
    task_id, head = await start(client, "write two files", tmp_path)
    await wait_for_ask(client, task_id, head)

    # The README's form: the task first, then --no and the reason.
    head = (await client.status()).head_seq
    r = await run_hdsp(daemon.runtime_dir, "answer", task_id[:6], "--no", "not that one")
    assert r.returncode == ExitCode.OK, r.stderr
    await wait_for_ask(client, task_id, head)

    # `hdsp asks` lists the ask the task waits on.
    r = await run_hdsp(daemon.runtime_dir, "asks")
    assert r.returncode == ExitCode.OK, r.stderr
    assert task_id[:8] in r.stdout and "write_to_file b.txt" in r.stdout

    # While it waits, `hdsp show` says so and how to answer.
    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:6])
    assert "waiting for an answer" in r.stdout and f"hdsp answer {task_id[:8]}" in r.stdout

    # And the other order.
    head = (await client.status()).head_seq
    r = await run_hdsp(daemon.runtime_dir, "answer", "--no", task_id[:6], "nor that")
    assert r.returncode == ExitCode.OK, r.stderr
    await wait_for_end(client, task_id, head)
    assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()

    r = await run_hdsp(daemon.runtime_dir, "asks")
    assert "No task waits for an answer." in r.stdout

    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:6])
    assert r.returncode == ExitCode.OK, r.stderr
    out = r.stdout
    # Each ask with its arguments, then who denied it and why, in order.
    first = out.index('ask: allow this?\ntool: write_to_file {"path": "a.txt"')
    assert out.index("denied by hdsp", first) < out.index("> not that one", first)
    second = out.index('ask: allow this?\ntool: write_to_file {"path": "b.txt"')
    assert first < out.index("> not that one") < second
    assert out.index("denied by hdsp", second) < out.index("> nor that", second)
    assert "Result: nothing written" in out
    assert "waiting for an answer" not in out

    # --json gives the raw records, the answers in them.
    r = await run_hdsp(daemon.runtime_dir, "--json", "show", task_id)
    asks = [m for m in json.loads(r.stdout)["messages"] if m["type"] == "ask"]
    assert [(m["answer"], m["answeredBy"]) for m in asks[:2]] == [
        ("noButtonClicked", "hdsp"),
        ("noButtonClicked", "hdsp"),
    ]


@pytest.mark.slow
async def test_show_marks_auto_approved_writes_folds_long_diffs_and_shows_retries(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    long = "".join(f"line {i}\n" for i in range(60))
    command = FakeReply.tool_calls([ToolCall("execute_command", '{"command": "seq 1 50"}')])
    fake_openai.script(
        FakeReply.status(500, retry_after=0),
        write_call("long.txt", long),
        command,
        done("ok"),
    )
    approvals = {
        "always_allow_write": True,
        "always_allow_command": True,
        "allowed_commands": ["seq"],
    }
    task_id = await run_to_end(client, "write a long file", tmp_path, approvals=approvals)
    assert (tmp_path / "long.txt").read_text() == long

    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:8])
    assert r.returncode == ExitCode.OK, r.stderr
    out = r.stdout
    assert 'tool: write_to_file {"path": "long.txt", "isNewFile": true}  (auto-approved)' in out, (
        out
    )
    assert "request failed:" in out and "retried the request (attempt 1" in out
    assert "+line 0" in out and "+line 59" in out
    assert "+line 30" not in out  # folded
    assert "more lines; --full shows them" in out
    # The command's output, folded too.
    assert "  | 1\n" in out and "  | 50\n" in out and "  | 25\n" not in out
    r = await run_hdsp(daemon.runtime_dir, "show", "--full", task_id[:8])
    assert "+line 30" in r.stdout and "  | 25\n" in r.stdout and "more lines" not in r.stdout


@pytest.mark.slow
async def test_show_gives_each_tool_calls_result_under_it_folded_escaped_and_errors_red(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_text(
        "region,sales\x1b]0;pwned\x07\n" + "".join(f"r{i},{i}\n" for i in range(60))
    )
    (tmp_path / "notes").mkdir()

    def tool(name: str, **args: object) -> FakeReply:
        return FakeReply.tool_calls([ToolCall(name, json.dumps(args))])

    fake_openai.script(
        tool("list_files", path="."),
        tool("read_file", path="data.csv"),
        tool("read_file", path="missing.csv"),
        tool("execute_command", command="seq 1 3"),
        done("read it"),
    )
    approvals = {"always_allow_command": True, "allowed_commands": ["seq"]}
    task_id = await run_to_end(client, "look at the data", tmp_path, approvals=approvals)

    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:8])
    assert r.returncode == ExitCode.OK, r.stderr
    out = r.stdout
    # Each call, then what it gave back, under it and in order.
    listed = out.index('tool: list_files {"path": "."}  (auto-approved)\n')
    read = out.index('tool: read_file {"path": "data.csv"}  (auto-approved)\n', listed)
    missing = out.index('tool: read_file {"path": "missing.csv"}  (auto-approved)\n', read)
    command = out.index("tool: execute_command", missing)
    listing = out[listed:read]
    assert "  → " in listing and "data.csv" in listing and "notes/" in listing, listing
    # A long result folded (the model read all of it), escapes shown as text.
    content = out[read:missing]
    assert "r0,0" in content and "r59,59" in content and "r30,30" not in content, content
    assert "more lines; --full shows them" in content
    assert "\x1b" not in out and "\\x1b]0;pwned\\x07" in content
    # A tool's error is shown as the model got it.
    assert "missing.csv" in out[missing:command] and "  → Error:" in out[missing:command]
    # A command's output once (its own message), then its exit code.
    ran = out[command:]
    assert ran.count("  | 2\n") == 1 and "  → Exit code: 0" in ran, ran
    assert out.index("  | 3\n", command) < out.index("  → Exit code: 0", command)

    r = await run_hdsp(daemon.runtime_dir, "show", "--full", task_id[:8])
    assert "r30,30" in r.stdout and "more lines" not in r.stdout

    # The raw record says which call it belongs to and whether it failed.
    r = await run_hdsp(daemon.runtime_dir, "--json", "show", task_id)
    results = [m for m in json.loads(r.stdout)["messages"] if m.get("say") == "tool_result"]
    records = [json.loads(m["text"]) for m in results]
    assert [x["tool"] for x in records] == [
        "list_files",
        "read_file",
        "read_file",
        "execute_command",
    ]
    assert [x.get("isError", False) for x in records] == [False, False, True, False]
    assert all(m["toolUseId"] for m in results)


@pytest.mark.slow
async def test_show_shows_a_truncated_context(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    listing = FakeReply.tool_calls([ToolCall("list_files", '{"path": "."}')])
    fake_openai.script(listing, listing, FakeReply.context_length_exceeded(), done("short"))
    task_id = await run_to_end(client, "look around", tmp_path)
    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:8])
    assert "context truncated: the 2 oldest messages were left out" in r.stdout, r.stdout
    assert 'tool: list_files {"path": "."}  (auto-approved)' in r.stdout


async def test_show_escapes_what_the_model_wrote(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("evil \x1b]52;c;aGk=\x07 \x1b[2K\rfake\u202e"))
    task_id = await run_to_end(client, "hi", tmp_path)
    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:8])
    assert "\x1b" not in r.stdout and "\r" not in r.stdout and "\u202e" not in r.stdout
    assert "\\x1b]52;c;aGk=\\x07" in r.stdout and "\\u202e" in r.stdout


@pytest.mark.slow
async def test_resume_close_cancel_and_config_set_say_what_they_do(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("all done"))
    task_id = await run_to_end(client, "hi", tmp_path)
    short = task_id[:8]
    requests = len(fake_openai.requests)
    messages = len((await client.get_task(task_id)).messages)

    r = await run_hdsp(daemon.runtime_dir, "resume", short)
    assert r.returncode == ExitCode.USAGE
    assert "completed; there is nothing to resume" in r.stderr and f"hdsp send {short}" in r.stderr
    snap = await client.get_task(task_id)
    assert snap.state == "completed" and snap.pending_ask is None
    assert len(snap.messages) == messages and len(fake_openai.requests) == requests

    r = await run_hdsp(daemon.runtime_dir, "cancel", short)
    assert r.returncode == ExitCode.OK and "the task stays open" in r.stdout
    r = await run_hdsp(daemon.runtime_dir, "close", short)
    assert r.returncode == ExitCode.OK and "closed" in r.stdout and "released" in r.stdout
    r = await run_hdsp(daemon.runtime_dir, "--help")
    assert "stays open" in r.stdout and "release its kernel and memory" in r.stdout

    r = await run_hdsp(daemon.runtime_dir, "config", "set", "retry.max_atempts", "3")
    assert r.returncode == ExitCode.USAGE
    assert "No setting 'retry.max_atempts'" in r.stderr and "retry.max_attempts" in r.stderr
    r = await run_hdsp(daemon.runtime_dir, "config", "set", "colour", "1")
    assert r.returncode == ExitCode.USAGE and "Known settings: " in r.stderr
    assert "max_atempts" not in json.dumps((await client.get_settings()).settings)
    r = await run_hdsp(daemon.runtime_dir, "config", "set", "retry.max_attempts", "3")
    assert r.returncode == ExitCode.OK and r.stdout.strip() == "3"


async def test_delete_removes_one_message_and_refuses_the_tasks_first(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("first answer"), FakeReply.text("second answer"))
    task_id, snap = await two_turns(client, tmp_path, "an aside to forget")
    aside = next(m for m in snap.messages if m.text == "an aside to forget")
    answer = next(m for m in snap.messages if m.text == "second answer")
    short = task_id[:8]

    r = await run_hdsp(daemon.runtime_dir, "delete", short, str(snap.messages[0].ts))
    assert r.returncode != ExitCode.OK and "first message cannot be deleted" in r.stderr
    r = await run_hdsp(daemon.runtime_dir, "delete", short, str(aside.ts))
    assert r.returncode == ExitCode.OK and "the message was deleted" in r.stdout
    r = await run_hdsp(daemon.runtime_dir, "delete", short, str(answer.ts))
    assert r.returncode == ExitCode.OK, r.stderr
    after = await client.get_task(task_id)
    assert after.messages == [m for m in snap.messages if m.ts not in (aside.ts, answer.ts)]


Lines = BufferedByteReceiveStream


@asynccontextmanager
async def _follow(runtime_dir: Path, *extra: str) -> AsyncIterator[tuple[Process, Lines]]:
    args = [sys.executable, "-m", "hdsp.client", "events", "--follow", *extra]
    async with await anyio.open_process(args, env=cli_env(runtime_dir)) as proc:
        assert proc.stdout is not None
        try:
            yield proc, BufferedByteReceiveStream(proc.stdout)
        finally:
            if proc.returncode is None:
                proc.kill()


async def _line(lines: Lines, seconds: float) -> str | None:
    """A line of output within `seconds`, or None."""
    with anyio.move_on_after(seconds):
        return (await lines.receive_until(b"\n", 1 << 20)).decode()
    return None


async def test_events_follow_starts_now_and_since_replays(
    daemon: DaemonProcess, client: Client
) -> None:
    await client.update_settings({"retry": {"max_attempts": 4}})  # an event before
    head = (await client.status()).head_seq
    assert head >= 1
    async with _follow(daemon.runtime_dir, "--since", "0") as (_, lines):
        first = await _line(lines, 30)
        assert first is not None and json.loads(first)["seq"] == 1
    async with _follow(daemon.runtime_dir) as (_, lines):
        # Nothing old comes; new events come once it is subscribed (poked until
        # then: there is no telling from here when that is).
        line = None
        for attempt in range(60):
            await client.update_settings({"retry": {"max_attempts": 5 + attempt % 2}})
            line = await _line(lines, 0.5)
            if line:
                break
        assert line is not None
        assert json.loads(line)["seq"] > head


async def test_daemon_status_forgets_a_killed_client(daemon: DaemonProcess, client: Client) -> None:
    assert (await client.status()).clients == 1
    await client.update_settings({"retry": {"max_attempts": 4}})
    async with _follow(daemon.runtime_dir, "--since", "0") as (proc, lines):
        assert await _line(lines, 30)  # connected
        assert (await client.status()).clients == 2
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert (await client.status()).clients == 1
    r = await run_hdsp(daemon.runtime_dir, "--json", "daemon", "status")
    assert json.loads(r.stdout)["clients"] == 2  # this test's client and that command


async def test_secret_set_names_the_backend_and_warns_in_plain_text(daemon: DaemonProcess) -> None:
    r = await run_hdsp(daemon.runtime_dir, "secret", "set", "work", stdin="sk-value\n")
    assert r.returncode == ExitCode.OK, r.stderr
    assert "secret work stored in plain text at " in r.stdout
    assert "(keyring backend: keyrings.alt.file.PlaintextKeyring)" in r.stdout
    assert "warning: this keyring does not encrypt" in r.stderr
    assert "sk-value" not in r.stdout + r.stderr


@pytest.mark.slow
async def test_the_demo_says_simulated_before_its_ask_and_owns_a_denial(
    daemon: DaemonProcess, client: Client, tmp_path: Path
) -> None:
    task_id, head = await start(client, "Write a note to notes.md", tmp_path, profile="demo")
    await wait_for_ask(client, task_id, head)
    snap = await client.get_task(task_id)
    assert snap.pending_ask is not None
    said = [m.text or "" for m in snap.messages if m.type == "say" and m.say == "text"]
    assert "[Simulated]" in said[-1]  # said before the ask, in the same turn
    head = (await client.status()).head_seq
    r = await run_hdsp(daemon.runtime_dir, "answer", task_id[:8], "--no")
    assert r.returncode == ExitCode.OK, r.stderr
    await wait_for_end(client, task_id, head)
    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:8])
    assert "You denied the note" in r.stdout
    assert "wrote the note you approved" not in r.stdout
    assert not (tmp_path / "notes.md").exists()


@pytest.mark.slow
async def test_kernels_list_start_interrupt_restart_shutdown(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    r = await run_hdsp(daemon.runtime_dir, "kernels")
    assert r.returncode == ExitCode.OK and "No kernels" in r.stdout
    r = await run_hdsp(daemon.runtime_dir, "--json", "kernels", "start", "--cwd", str(tmp_path))
    assert r.returncode == ExitCode.OK, r.stderr
    kernel_id = json.loads(r.stdout)["kernelId"]
    r = await run_hdsp(daemon.runtime_dir, "kernels", "list")
    assert kernel_id in r.stdout and "started by hdsp" in r.stdout
    for action, said in (
        ("interrupt", "interrupted"),
        ("restart", "restarted"),
        ("shutdown", "shut down"),
    ):
        r = await run_hdsp(daemon.runtime_dir, "kernels", action, kernel_id[:8])
        assert r.returncode == ExitCode.OK, r.stderr
        assert f"{kernel_id}: {said}" in r.stdout
    r = await run_hdsp(daemon.runtime_dir, "kernels", "restart", "nope")
    assert r.returncode == ExitCode.USAGE and "No kernel id starts with 'nope'" in r.stderr


async def test_help_has_examples_and_the_whole_exit_code_table(tmp_path: Path) -> None:
    r = await run_hdsp(tmp_path, "--help")
    assert r.returncode == 0
    assert "examples:" in r.stdout and 'hdsp answer 3f2a --no "' in r.stdout
    table = r.stdout[r.stdout.index("exit codes:") :]
    for code in ExitCode:
        assert f"  {int(code):<4}" in table
    # The codes the CLI returns are the table's.
    r = await run_hdsp(tmp_path, "tasks")
    assert r.returncode == ExitCode.UNREACHABLE
    r = await run_hdsp(tmp_path, "answer")
    assert r.returncode == ExitCode.USAGE


async def test_completion_offers_subcommands_and_task_ids_and_is_silent_without_a_daemon(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    for shell in ("bash", "zsh", "fish"):
        r = await run_hdsp(daemon.runtime_dir, "completion", shell)
        assert r.returncode == 0 and "hdsp" in r.stdout and "_ARGCOMPLETE" in r.stdout
    fake_openai.script(FakeReply.text("hi"))
    task_id = await run_to_end(client, "complete me", tmp_path)

    async def complete(runtime_dir: Path, line: str) -> tuple[list[str], float]:
        out = tmp_path / "completions"
        started = time.monotonic()
        r = await run_hdsp(
            runtime_dir,
            _ARGCOMPLETE="1",
            _ARGCOMPLETE_SHELL="bash",
            COMP_LINE=line,
            COMP_POINT=str(len(line)),
            _ARGCOMPLETE_STDOUT_FILENAME=str(out),
        )
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        return out.read_text().split("\x0b"), time.monotonic() - started

    words, _ = await complete(daemon.runtime_dir, "hdsp sh")
    assert "show" in [w.strip() for w in words]
    words, _ = await complete(daemon.runtime_dir, f"hdsp show {task_id[:2]}")
    assert task_id[:8] in [w.strip() for w in words]
    # No daemon: nothing offered, no error, no wait beyond the short deadline.
    words, took = await complete(tmp_path, f"hdsp show {task_id[:2]}")
    assert [w for w in words if w.strip()] == []
    assert took < 10


def test_hdsp_chat_refuses_without_a_terminal(daemon: DaemonProcess) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "hdsp.client", "chat"],
        env=cli_env(daemon.runtime_dir),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert r.returncode == ExitCode.USAGE and "needs a terminal" in r.stderr


def _readme_python_example() -> str:
    """The Python block of README.md's "From Python" section."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## From Python", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_readmes_python_example_prints_every_durable_event_once_in_order(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Item 8: the example skips live-only updates (no `seq None` under a comment
    that says every durable event) and prints each durable one once, in order."""
    fake_openai.script(FakeReply.text("Iris has 150 rows.", chunk_size=3))
    script = tmp_path / "example.py"
    script.write_text(_readme_python_example())
    args = [sys.executable, str(script)]
    env = cli_env(daemon.runtime_dir, PYTHONUNBUFFERED="1")  # (a line at a time)
    seqs: list[int] = []
    async with await anyio.open_process(args, env=env, cwd=tmp_path) as proc:
        assert proc.stdout is not None
        lines = BufferedByteReceiveStream(proc.stdout)
        try:
            with anyio.fail_after(30):
                while True:
                    line = (await lines.receive_until(b"\n", 1 << 20)).decode()
                    seq, _, data = line.partition(" ")
                    assert seq.isdigit(), line  # never `None`
                    seqs.append(int(seq))
                    if data.startswith("TaskCompleted("):
                        break
        finally:
            proc.terminate()
            await proc.wait()
    assert seqs == sorted(set(seqs)) and len(seqs) > 3, seqs


async def test_condense_edit_fork_and_rewind_from_the_command_line(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    """`hdsp condense`, `edit`, `fork` and `rewind` against the real daemon, each
    checked in the history they leave."""
    fake_openai.script(
        FakeReply.text("first answer"),
        FakeReply.text("second answer"),
        FakeReply.text("answer to the edit"),
    )
    task_id, snap = await two_turns(client, tmp_path, "a second thought")
    mine = next(m for m in snap.messages if m.text == "a second thought")
    first = next(m for m in snap.messages if m.text == "first answer")
    short = task_id[:8]

    # Too little to summarise: it says so, and nothing is sent to the model.
    requests = len(fake_openai.requests)
    r = await run_hdsp(daemon.runtime_dir, "condense", short)
    assert r.returncode == ExitCode.OK, r.stderr
    said = (await client.get_task(task_id)).messages[-1]
    assert said.say == "condense_context_error" and "Nothing to condense" in (said.text or "")
    assert len(fake_openai.requests) == requests

    head = (await client.status()).head_seq
    r = await run_hdsp(daemon.runtime_dir, "edit", short, str(mine.ts), "a better thought")
    assert r.returncode == ExitCode.OK and "your message was replaced and sent" in r.stdout
    await wait_for_end(client, task_id, head)
    texts = [m.text for m in (await client.get_task(task_id)).messages if m.say == "text"]
    assert texts[-2:] == ["first answer", "answer to the edit"] and "second answer" not in texts
    assert "a better thought" in json.dumps(fake_openai.requests[-1]["messages"])

    r = await run_hdsp(daemon.runtime_dir, "fork", short, str(first.ts), "--json")
    assert r.returncode == ExitCode.OK, r.stderr
    fork = json.loads(r.stdout)["taskId"]
    forked = await client.get_task(fork)
    assert forked.messages[-1].ts == first.ts and fork != task_id

    r = await run_hdsp(daemon.runtime_dir, "rewind", short, str(first.ts), "--keep")
    assert r.returncode == ExitCode.OK and "rewound" in r.stdout
    assert (await client.get_task(task_id)).messages[-1].ts == first.ts
    r = await run_hdsp(daemon.runtime_dir, "rewind", short, str(snap.messages[0].ts))
    assert r.returncode != ExitCode.OK and "first message" in r.stderr


async def test_condense_shows_its_tokens_before_and_after_and_the_summary(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    """`hdsp condense` on a task with enough to condense, and `hdsp show` after:
    the marker with the request's tokens before and after, and the summary."""
    fake_openai.script(
        done("first answer"),
        done("second answer"),
        done("third answer"),
        FakeReply.text("Task: say hi. Decisions: none yet. Open questions: what next."),
    )
    task_id = await run_to_end(client, "hi", tmp_path)
    for text in ("and again", "once more"):
        head = (await client.status()).head_seq
        await client.send_message(task_id, text)
        await wait_for_end(client, task_id, head)
    short = task_id[:8]
    r = await run_hdsp(daemon.runtime_dir, "condense", short)
    assert r.returncode == ExitCode.OK, r.stderr
    assert len(fake_openai.requests) == 4

    r = await run_hdsp(daemon.runtime_dir, "show", short)
    assert r.returncode == ExitCode.OK, r.stderr
    line = next(x for x in r.stdout.splitlines() if "context condensed" in x)
    match = re.search(
        r"older messages in requests \(the history keeps them\), ([\d,]+) -> ([\d,]+) tokens", line
    )
    assert match is not None, line
    before, after = (int(n.replace(",", "")) for n in match.groups())
    assert before > after > 0
    assert "Task: say hi. Decisions: none yet." in r.stdout


async def test_send_steer_joins_the_running_turn_from_the_command_line(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_text("x,y\n1,2\n")
    gate = threading.Event()
    fake_openai.script(
        (
            FakeReply.text("Reading it.")
            + FakeReply.tool_calls([ToolCall("read_file", json.dumps({"path": "data.csv"}))])
        ).held_after(2, gate),
        done("steered answer"),
    )
    task_id, head = await start(client, "describe data.csv", tmp_path)
    try:
        await fake_openai.wait_for_requests_async(1)
        r = await run_hdsp(
            daemon.runtime_dir, "send", "--detach", "--steer", task_id[:8], "Use column y only"
        )
        assert r.returncode == ExitCode.OK, r.stderr
        assert "joins its turn before the next model request" in r.stderr + r.stdout
        queue = (await client.get_task(task_id)).queue
        assert [(m.text, m.delivery) for m in queue] == [("Use column y only", "steer")]
    finally:
        gate.set()
    await wait_for_end(client, task_id, head)
    # One turn: the second request carries the read's result, then the steer.
    assert len(fake_openai.requests) == 2
    roles = [m["role"] for m in fake_openai.requests[1]["messages"]]
    assert roles[-2:] == ["tool", "user"]
    assert fake_openai.requests[1]["messages"][-1]["content"] == "Use column y only"
