"""The CLI on a terminal (a pty): `hdsp chat`, and the README's walkthrough of
`hdsp` commands run one after the other as a user types them."""

from __future__ import annotations

import inspect
import json
import re
import signal
from pathlib import Path
from typing import Any

import pexpect
import pytest

from hdsp.client.exit_codes import ExitCode
from hdsp.client.sync import connect
from hdsp.protocol import MessageEvent, TaskAborted, TaskCompleted, TaskIdle, TaskInteractive
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.integration.test_agents_e2e import agent_of, results_in
from tests.support.cli_pty import ENTER, PROMPT, chat_at_prompt, finish, say, spawn
from tests.support.daemon_process import DaemonProcess
from tests.support.scripted_turns import call, done


def run(daemon: DaemonProcess, *args: str, cwd: Path | None = None) -> tuple[int, str]:
    """A command to its end on a terminal: exit code and what it showed."""
    child = spawn(daemon, *args, cwd=cwd)
    code = finish(child)
    return code, str(child.before).replace("\r\n", "\n")


def write_call(path: str) -> FakeReply:
    return call("write_to_file", path=path, content="a note\n")


def lead_calls_a_writer(body: dict[str, Any]) -> FakeReply | None:
    """The model of two agents: lead calls writer, whose write of a.txt asks;
    then lead finishes with what writer returned."""
    results = results_in(body)
    if agent_of(body) == "lead":
        if not results:
            return call("call_agent", agent_name="writer", message="write")
        return call("finish", message=f"lead: {results[0]}")
    if not results:
        return write_call("a.txt")
    return call("finish", message="wrote a.txt")


def wait_for(
    daemon: DaemonProcess,
    task_id: str,
    since: int,
    kinds: tuple[type, ...],
    *,
    say: str | None = None,
    partial: bool | None = None,
) -> None:
    """Until `task_id` has an event of `kinds` (a message `say`, `partial`)."""
    with connect(daemon.runtime_dir, name="test-watch") as client:
        for event in client.events(task_id, since_seq=since):
            if not isinstance(event.data, kinds):
                continue
            if isinstance(event.data, MessageEvent):
                m = event.data.payload[0].message
                if (say is not None and m.say != say) or (partial and not m.partial):
                    continue
            return


def head_seq(daemon: DaemonProcess) -> int:
    with connect(daemon.runtime_dir, name="test-watch") as client:
        return int(client.status().head_seq)


# ---- hdsp chat ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_chat_streams_replies_answers_asks_and_takes_slash_commands(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        FakeReply.text("Hello from the model."),
        write_call("n.txt"),
        done("wrote it"),
        FakeReply.text("got two lines"),
        FakeReply.text("again"),
        FakeReply.text("Summary: the user said hello and a note was written to n.txt."),
    )
    child = chat_at_prompt(daemon, "--workspace", str(tmp_path))
    say(child, "/help", "/condense", PROMPT)
    say(child, "/mode plan", "/mode is not available yet", PROMPT)
    say(child, "/profile", "/profile is not available yet", PROMPT)

    say(child, "hello", "Hello from the model.", PROMPT)

    # An ask in between: Enter alone does not approve, y does.
    say(child, "write n.txt", "[y]es")
    say(child, "", "Enter alone does neither")
    say(child, "y", "Result: wrote it", PROMPT)
    assert (tmp_path / "n.txt").read_text() == "a note\n"

    # Esc Enter makes a new line; Enter sends both lines as one message.
    say(child, "line one\x1b" + ENTER + "line two", "got two lines", PROMPT)
    # The up arrow brings the last message back.
    say(child, "\x1b[A", "again", PROMPT)

    def text(content: object) -> str:
        if isinstance(content, str):
            return content
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))  # type: ignore[attr-defined]

    users = [
        text(m["content"]) for m in fake_openai.requests[-1]["messages"] if m["role"] == "user"
    ]
    assert sum("line one\nline two" in u for u in users) == 2, users

    # /condense asks the model for a summary at once.
    say(child, "/condense", "Condensed: ", PROMPT)
    assert len(fake_openai.requests) == 6

    say(child, "/quit", "Left the chat; `hdsp chat ")
    assert finish(child) == ExitCode.OK


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_chat_ctrl_c_cancels_the_turn_and_comes_back_to_the_prompt(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("first"), FakeReply.hang(), FakeReply.text("after"))
    child = chat_at_prompt(daemon, "--workspace", str(tmp_path))
    say(child, "start", "first", PROMPT)
    # The request is on: the model server answers nothing.
    say(child, "wait forever", "Thin")  # FakeReply.hang: one chunk, then nothing
    child.sendintr()
    child.expect_exact("Cancelling the agent's turn")
    child.expect_exact(PROMPT)
    say(child, "go on", "after", PROMPT)
    child.sendeof()
    assert finish(child) == ExitCode.OK


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_chat_on_a_task_that_waits_answers_its_ask_first(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(write_call("w.txt"), done("wrote w.txt"))
    since = head_seq(daemon)
    with connect(daemon.runtime_dir, name="test") as client:
        task_id = client.start_task("write w.txt", workspace=tmp_path).task_id
    wait_for(daemon, task_id, since, (TaskInteractive,))
    child = spawn(daemon, "chat", task_id[:8])
    child.expect_exact("> write w.txt")  # the history so far
    child.expect_exact("[y]es")
    say(child, "y", "Result: wrote w.txt", PROMPT)
    assert (tmp_path / "w.txt").exists()
    say(child, "/quit")
    assert finish(child) == ExitCode.OK


def test_run_asks_an_agents_approval_here_labelled_with_the_agent(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """`hdsp run --agent lead`: lead calls writer, whose write asks; the ask
    reaches this terminal, labelled with the agent, and `y` here approves it."""
    for name, groups in (("lead", "read,agents"), ("writer", "read,edit")):
        code, shown = run(daemon, "agent", "add", name, f"The {name}.", "--groups", groups)
        assert code == ExitCode.OK, shown

    fake_openai.responder = lead_calls_a_writer
    child = spawn(
        daemon,
        "run",
        "--agent",
        "lead",
        "--auto-approve",
        "subtasks",
        "--workspace",
        str(tmp_path),
        "Write a.txt",
    )
    child.expect_exact("The agent writer (task ")
    child.expect_exact("asks:")
    child.expect_exact("a.txt")
    child.expect_exact("[y]es")
    assert not (tmp_path / "a.txt").exists()
    say(child, "y", "Approved: the ask of writer.", "lead: wrote a.txt")
    assert finish(child) == ExitCode.OK
    assert (tmp_path / "a.txt").read_text() == "a note\n"


# ---- the README's walkthrough ------------------------------------------------


def readme_walkthrough() -> list[str]:
    """The commands of README.md's "Using the CLI" block, without their comments."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("## Using the CLI", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_walkthrough_test_follows_the_readmes_current_walkthrough() -> None:
    """Every command of the README's walkthrough (its subcommand and options) has
    its step, a `# hdsp ...` comment, in test_the_readme_walkthrough: a command
    added to the README and not to the test fails here."""
    steps = [
        line.strip()
        for line in inspect.getsource(test_the_readme_walkthrough).splitlines()
        if line.strip().startswith("# hdsp ")
    ]
    commands = readme_walkthrough()
    assert len(commands) >= 10, commands
    for command in commands:
        words = command.split()
        options = [w for w in words if w.startswith("--")]
        assert any(
            f"hdsp {words[1]}" in step and all(o in step for o in options) for step in steps
        ), f"README's `{command}` has no step in the walkthrough test"


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_readme_walkthrough(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """README.md, "Using the CLI", command by command on a terminal."""
    ws = tmp_path

    # hdsp run "..."   streams the reply live
    fake_openai.script(FakeReply.text("The North grew fastest.", chunk_size=3))
    code, shown = run(daemon, "run", "Load sales.csv and tell me which region grew fastest", cwd=ws)
    assert code == ExitCode.OK, shown
    assert "> Load sales.csv and tell me which region grew fastest" in shown
    assert "The North grew fastest." in shown and "tokens:" in shown
    first = re.search(r"task ([0-9a-f-]{36})", shown)
    assert first is not None

    # hdsp run --detach "..."   prints the task id and returns
    fake_openai.script(write_call("notes.md"), done("wrote notes.md"))
    since = head_seq(daemon)
    code, shown = run(daemon, "run", "--detach", "Write notes.md", cwd=ws)
    assert code == ExitCode.OK
    task_id = shown.strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", task_id), shown
    short = task_id[:4]  # "ids may be shortened to a unique prefix"
    while any(t.startswith(short) for t in [first.group(1)]):
        short = task_id[: len(short) + 1]
    wait_for(daemon, task_id, since, (TaskInteractive,))

    # hdsp asks   every ask that waits for an answer, across tasks
    code, shown = run(daemon, "asks")
    assert code == ExitCode.OK and task_id[:8] in shown and "notes.md" in shown, shown

    # hdsp tasks   newest first
    code, shown = run(daemon, "tasks")
    assert code == ExitCode.OK
    assert shown.index(task_id[:8]) < shown.index(first.group(1)[:8])

    # hdsp attach 3f2a   show a task and follow it, answering its asks
    child = spawn(daemon, "attach", short)
    child.expect_exact("notes.md")
    child.expect_exact("[y]es")
    say(child, "y", "Result: wrote notes.md")
    assert finish(child) == ExitCode.OK
    assert (ws / "notes.md").read_text() == "a note\n"

    # hdsp show 3f2a   a task's history
    code, shown = run(daemon, "show", short)
    assert code == ExitCode.OK
    assert "> Write notes.md" in shown and "approved by hdsp" in shown
    assert "Result: wrote notes.md" in shown

    # hdsp send 3f2a "Now plot it"   continue a conversation, live
    fake_openai.script(FakeReply.text("Here is the plot."))
    code, shown = run(daemon, "send", short, "Now plot it")
    assert code == ExitCode.OK, shown
    assert "> Now plot it" in shown and "Here is the plot." in shown

    # hdsp chat   a conversation at a prompt (hdsp chat 3f2a: an existing task)
    fake_openai.script(FakeReply.text("Hello at the prompt."))
    child = chat_at_prompt(daemon, cwd=ws)
    say(child, "hello", "Hello at the prompt.", PROMPT)
    say(child, "/quit", "Left the chat; `hdsp chat ")
    assert finish(child) == ExitCode.OK

    # hdsp answer 3f2a --yes   approve what it waits for (--no "why" denies)
    fake_openai.script(write_call("more.md"), done("wrote more.md"))
    since = head_seq(daemon)
    code, shown = run(daemon, "send", "--detach", short, "Write more.md")
    assert code == ExitCode.OK, shown
    wait_for(daemon, task_id, since, (TaskInteractive,))
    since = head_seq(daemon)
    code, shown = run(daemon, "answer", short, "--yes")
    assert code == ExitCode.OK and "Answered the tool ask" in shown, shown
    wait_for(daemon, task_id, since, (TaskCompleted,))
    assert (ws / "more.md").exists()
    fake_openai.script(write_call("no.md"), done("wrote nothing"))
    since = head_seq(daemon)
    run(daemon, "send", "--detach", short, "Write no.md")
    wait_for(daemon, task_id, since, (TaskInteractive,))
    since = head_seq(daemon)
    code, shown = run(daemon, "answer", short, "--no", "not now")
    assert code == ExitCode.OK, shown
    wait_for(daemon, task_id, since, (TaskCompleted,))
    assert not (ws / "no.md").exists()

    # Ctrl-C during `hdsp run` cancels the task (exit 1: aborted).
    fake_openai.script(FakeReply.hang())
    child = spawn(daemon, "run", "Take your time", cwd=ws)
    child.expect(r"task ([0-9a-f-]{36})")
    stopped = str(child.match.group(1))
    child.expect_exact("> Take your time")
    child.sendintr()
    child.expect_exact("Cancelling the task")
    assert finish(child) == ExitCode.FAILED

    # (The CLI's note after the abort: `hdsp send` continues it.)
    fake_openai.script(FakeReply.text("Back at it."))
    code, shown = run(daemon, "send", stopped[:8], "go on")
    assert code == ExitCode.OK and "Back at it." in shown, shown

    # hdsp resume 3f2a   continue a task the daemon stopped
    fake_openai.script(FakeReply.hang())
    since = head_seq(daemon)
    code, shown = run(daemon, "run", "--detach", "Count slowly", cwd=ws)
    cut = shown.strip()
    wait_for(daemon, cut, since, (MessageEvent,), say="text", partial=True)
    daemon.stop()
    daemon.start()
    code, shown = run(daemon, "tasks")
    assert f"{cut[:8]}  #" in shown and "resumable" in shown, shown
    fake_openai.script(FakeReply.text("Done after all."))
    since = head_seq(daemon)
    code, shown = run(daemon, "resume", cut[:8])
    assert code == ExitCode.OK and "running" in shown, shown
    wait_for(daemon, cut, since, (TaskCompleted, TaskIdle, TaskAborted))
    code, shown = run(daemon, "show", cut[:8])
    assert "Done after all." in shown, shown
    # ... but not a completed one.
    code, shown = run(daemon, "resume", short)
    assert code == ExitCode.USAGE and "nothing to resume" in shown

    # hdsp cancel 3f2a / hdsp close 3f2a
    code, shown = run(daemon, "cancel", short)
    assert code == ExitCode.OK and "stays open" in shown
    code, shown = run(daemon, "close", short)
    assert code == ExitCode.OK and "closed" in shown

    # hdsp events --follow   every event as NDJSON, live
    child = spawn(daemon, "events", "--follow")
    fake_openai.script(FakeReply.text("evented"))
    line = None
    for _ in range(60):  # until its subscription is in effect (no telling from here)
        code, _shown = run(daemon, "run", "--detach", "poke", cwd=ws)
        if child.expect([r"\{[^\r\n]*\}\r\n", pexpect.TIMEOUT], timeout=1) == 0:
            line = json.loads(str(child.match.group(0)))
            break
    assert line is not None and line["seq"] > since
    child.kill(signal.SIGINT)
    assert finish(child) == ExitCode.INTERRUPTED  # 130 interrupted

    # hdsp kernels   list kernels; start, attach, interrupt, restart, shutdown ID
    code, shown = run(daemon, "kernels")
    assert code == ExitCode.OK and ("No kernels." in shown or "python3" in shown), shown

    # --json prints NDJSON for scripts
    code, shown = run(daemon, "--json", "tasks")
    assert all(json.loads(row)["id"] for row in shown.strip().splitlines())

    # Exit code 2: the command was refused.
    code, shown = run(daemon, "show", "no-such-task")
    assert code == ExitCode.USAGE and "No task id starts with" in shown

    # hdsp daemon status | stop
    code, shown = run(daemon, "daemon", "status")
    assert code == ExitCode.OK and "running" in shown and "tasks:" in shown
    code, shown = run(daemon, "daemon", "stop")
    assert code == ExitCode.OK and "hdspd is stopping." in shown
    assert daemon.wait() == 0

    # Exit code 3: the daemon is unreachable.
    code, shown = run(daemon, "tasks")
    assert code == ExitCode.UNREACHABLE and "hdspd is not running" in shown
