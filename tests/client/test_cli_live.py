"""The live view of `hdsp run`, `send` and `attach`, as a person sees it: the real
CLI on a pseudo-terminal (its screen read through a terminal emulator, so that
redraws count as redraws) or on a pipe, against the real daemon and the scripted
fake model.

What is proved here: after any retry the screen says what `hdsp show` says
(never a partial answer glued to the next); the status line redraws in place
and a pipe gets each status once; a prompt is taken down when the world moves
(another client answers, the task is cancelled, the daemon goes away); Ctrl-C
means what the README says in each command, at a prompt too, without a hang or
a traceback; a message queued by `send` is never dropped in silence.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as OAI
from tests.support.cli_process import run_hdsp_sync
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.scripted_turns import call
from tests.support.terminal import Terminal, cli_env

pytestmark = pytest.mark.slow

#: Bounds on the fake server's silence (seconds) and quick retries, as in the
#: model fault matrix (tests/integration/test_model_faults.py).
SILENCE = 4.0
FAST_RETRIES = {"base_delay": 0.05, "max_delay": 5}

WRONG = "Result: 99 rows are invalid."
RIGHT = "Result: 12 rows are invalid."


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def live_daemon(fake: FakeOpenAI) -> Iterator[DaemonProcess]:
    daemon = DaemonProcess(short_tmp_dir())
    daemon.data_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "version": 2,
        "profiles": {
            "oai": {
                "name": "oai",
                "provider": "openai-compatible",
                "model": "gpt-test",
                "base_url": fake.base_url,
                "options": {"first_byte_timeout": SILENCE, "idle_timeout": SILENCE},
            }
        },
        "current_profile": "oai",
        "retry": FAST_RETRIES,
    }
    (daemon.data_dir / "settings.json").write_text(json.dumps(settings))
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()
        daemon.cleanup()


def hdsp(
    daemon: DaemonProcess, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`hdsp ARGS` on pipes (no terminal)."""
    return run_hdsp_sync(cli_env(daemon.runtime_dir, term="dumb"), *args, cwd=cwd, timeout=120)


def task_id_of(text: str) -> str:
    """The task id from the `task ID` line `hdsp run` begins with."""
    for line in text.splitlines():
        if line.startswith("task "):
            return line.split()[1]
    raise AssertionError(f"no task line in:\n{text}")


def terminal(daemon: DaemonProcess, *args: str, **options: Any) -> Terminal:
    """`hdsp ARGS` on a terminal (`options` as `Terminal` takes them), to use in
    a `with`, which closes it."""
    return Terminal(daemon.runtime_dir, *args, **options)


def finished(daemon: DaemonProcess, *args: str, **options: Any) -> Terminal:
    """`hdsp ARGS` on a terminal, run to its end, which is a success."""
    with terminal(daemon, *args, **options) as term:
        assert term.finish() == 0, term.text
    return term


def conversation_in_show(daemon: DaemonProcess, term: Terminal) -> list[str]:
    """The conversation `hdsp show` shows, on a terminal of the same size, of the
    task `term` ran."""
    return conversation(finished(daemon, "show", task_id_of(term.text)).lines)


def show_body(text: str) -> str:
    """`hdsp show`'s output without exactly its header (the task's line and a
    blank line) and its footer (the usage line; no output here is folded): what
    `hdsp run` prints on stdout (it says the task's line and usage on stderr)."""
    lines = text.split("\n")
    assert lines[0].startswith("task ") and lines[1] == "", text
    assert lines[-2].startswith("tokens:") and lines[-1] == "", text
    return "\n".join(lines[2:-2]) + "\n"


def conversation(lines: list[str]) -> list[str]:
    """The conversation on a screen: from the user's prompt to the usage line at
    the bottom (each command words the task line above it its own way)."""
    assert lines and lines[-1].startswith("tokens:"), lines
    starts = [i for i, line in enumerate(lines) if line.startswith("> ")]
    assert starts, lines
    return lines[starts[0] : -1]


#: The faults of the retry matrix that break a reply after it began: each makes
#: the daemon retry, and the retry's answer replaces the partial one.
MIDSTREAM = {
    "broken SSE framing": lambda r: r.unframed_after(4),
    "TCP reset": lambda r: r.reset_after(4),
    "clean close": lambda r: r.end_after(4),
    "malformed chunk": lambda r: r.malformed_after(4),
    "error event": lambda r: r.error_after(4, "Upstream model crashed"),
}


def _script_fault(fake: FakeOpenAI, fault: str) -> None:
    assert fake.pending == 0, "a test before this one left scripted replies"
    # The broken attempt streams "Result: 99 r" before its fault.
    fake.script(MIDSTREAM[fault](OAI.text(WRONG, chunk_size=4)), OAI.text(RIGHT, chunk_size=3))


@pytest.mark.parametrize("fault", list(MIDSTREAM))
def test_after_a_retry_the_terminal_shows_what_hdsp_show_shows(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path, fault: str
) -> None:
    """Item 1 on a terminal: the partial answer of the broken attempt is redrawn
    away, and the final screen is the history's."""
    _script_fault(fake, fault)
    term = finished(live_daemon, "run", "How many rows are invalid?", cwd=workspace)
    screen = term.lines
    assert RIGHT in screen, term.text
    assert "Result: 99" not in term.text, term.text
    assert conversation(screen) == conversation_in_show(live_daemon, term)


@pytest.mark.parametrize("fault", list(MIDSTREAM))
def test_after_a_retry_a_pipe_gets_what_hdsp_show_prints(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path, fault: str
) -> None:
    """Item 1 without a terminal: only settled messages are printed, so the
    output is the history's, and the retry is said once."""
    _script_fault(fake, fault)
    run = hdsp(live_daemon, "run", "How many rows are invalid?", cwd=workspace)
    assert run.returncode == 0, run.stderr
    show = hdsp(live_daemon, "show", task_id_of(run.stderr))
    assert show.returncode == 0, show.stderr
    assert RIGHT in run.stdout and "Result: 99" not in run.stdout
    assert run.stdout == show_body(show.stdout)
    assert run.stderr.splitlines()[-1] == show.stdout.splitlines()[-1]  # the usage
    # The retry: said once, without the daemon's JSON record of it.
    assert run.stderr.count("Retry 1 in") == 1, run.stderr
    assert '{"attempt"' not in run.stderr + show.stderr


def test_a_pipe_gets_each_tool_call_its_output_and_result_once_as_hdsp_show_prints_them(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """Without a terminal only settled messages are printed: a listing, a
    command's output, a cell's output and each result come once, nothing is
    left out, and stdout is `hdsp show`'s body; each status is one line."""
    (workspace / "sales.csv").write_text("region,sales\nnorth,3\n")
    code = "import time\nfor i in range(3):\n    print('cell line', i, flush=True)\n    time.sleep(0.5)"
    fake.script(
        call("list_files", path="."),
        call("execute_command", command="seq 1 3"),
        call("execute_code", code=code),
        OAI.text("All three ran."),
    )
    run = hdsp(live_daemon, "run", "--auto-approve", "command,execute", "look", cwd=workspace)
    assert run.returncode == 0, run.stderr
    show = hdsp(live_daemon, "show", task_id_of(run.stderr))
    assert run.stdout == show_body(show.stdout), run.stdout
    out = run.stdout
    assert out.count("sales.csv") == 1 and out.count("  | 2\n") == 1
    assert out.count("cell line 2") == 1 and out.count("  → Exit code: 0") == 1
    assert out.index("sales.csv") < out.index("  | 2") < out.index("cell line 2")
    assert out.index("cell line 2") < out.index("All three ran.")
    assert run.stderr.count("running a command") <= 1 and run.stderr.count("running a cell") == 1
    assert b"\x1b" not in (run.stdout + run.stderr).encode()


# ---- the status line (item 6) -----------------------------------------------------


def test_the_status_line_counts_down_and_waits_in_place_on_a_terminal(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """A retry's countdown and a silent server's wait are one line, redrawn in
    place; neither stays on the screen, and no JSON record reaches it."""
    fake.script(
        OAI.status(429, retry_after=3), OAI.accept_and_hang(), OAI.text("Answered at last.")
    )
    with terminal(live_daemon, "run", "Are you there?", cwd=workspace) as term:
        for marker in ("Retry 1 in", "waiting for the model ("):
            seen: set[str] = set()

            def moving(marker: str = marker, seen: set[str] = seen) -> bool:
                shown = [line for line in term.lines if marker in line]
                assert len(shown) <= 1, term.text  # redrawn, never stacked
                seen.update(shown)
                return len(seen) >= 2

            term.wait_for(moving, f"{marker!r} that changes in place")
        assert term.finish() == 0, term.text
    final = term.text
    assert "Answered at last." in final
    assert "Retry 1 in" not in final and "waiting for the model" not in final
    assert final.count("Retried (attempt 1).") == 1
    assert b'{"attempt"' not in term.output


def test_without_a_terminal_each_status_is_one_line(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    fake.script(
        OAI.status(429, retry_after=3), OAI.accept_and_hang(), OAI.text("Answered at last.")
    )
    run = hdsp(live_daemon, "run", "Are you there?", cwd=workspace)
    assert run.returncode == 0, run.stderr
    assert "Answered at last." in run.stdout
    assert run.stderr.count("Retry 1 in") == 1, run.stderr
    assert run.stderr.count("waiting for the model") == 1, run.stderr
    assert '{"attempt"' not in run.stderr
    assert b"\x1b" not in (run.stdout + run.stderr).encode()


def test_the_status_line_shows_the_tokens_and_cost_so_far(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """After the first request, the status line adds what the task used so far."""
    fake.script(call("list_files", path="."), OAI.accept_and_hang(), OAI.text("Listed."))
    usage = re.compile(r"waiting for the model \(\d+s\) · [\d,]+ in · [\d,]+ out · \$\d+\.\d{4}")
    with terminal(live_daemon, "run", "list it", cwd=workspace) as term:
        term.wait_for(lambda: usage.search(term.text) is not None, "the usage so far")
        assert term.finish() == 0, term.text
    assert usage.search(term.text) is None and "Listed." in term.text


# ---- asks: Ctrl-C, and the world moving while one waits (items 3, 5, 8) ----------


def state_of(daemon: DaemonProcess, task_id: str) -> dict[str, Any]:
    show = hdsp(daemon, "--json", "show", task_id)
    assert show.returncode == 0, show.stderr
    snapshot: dict[str, Any] = json.loads(show.stdout)
    return snapshot


PROMPT = "[y]es / [n]o"


def test_ctrl_c_at_an_approval_prompt_cancels_the_task_at_once(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """Item 3: no hang until Enter, no traceback; nothing approved."""
    fake.script(call("write_to_file", path="a.txt", content="hi\n"))
    with terminal(live_daemon, "run", "write a", cwd=workspace) as term:
        term.wait_for_text(PROMPT)
        term.ctrl_c()
        assert term.finish(timeout=30) == 1, term.text
    assert "Cancelling: nothing was approved." in term.text
    assert "Task aborted." in term.text
    assert "Traceback" not in term.text and "ExceptionGroup" not in term.text
    assert "goes on" not in term.text
    assert not (workspace / "a.txt").exists()
    assert state_of(live_daemon, task_id_of(term.text))["state"] == "aborted"


def test_a_prompt_answered_elsewhere_is_taken_down_at_once(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """Item 5: `hdsp answer` from elsewhere; the prompt here goes without an Enter."""
    fake.script(call("write_to_file", path="b.txt", content="hi\n"), OAI.text("Wrote it."))
    with terminal(live_daemon, "run", "write b", cwd=workspace) as term:
        term.wait_for_text(PROMPT)
        answer = hdsp(live_daemon, "answer", task_id_of(term.text), "--yes")
        assert answer.returncode == 0, answer.stderr
        term.wait_for_text("The ask was answered elsewhere.")
        assert term.finish(timeout=60) == 0, term.text
    assert (workspace / "b.txt").read_text() == "hi\n"
    # The final screen keeps the ask, why its prompt went, and what followed.
    final = term.text
    assert final.index("ask: allow this?") < final.index("The ask was answered elsewhere.")
    assert final.index("The ask was answered elsewhere.") < final.index("Wrote it.")


def test_a_prompt_of_a_task_cancelled_elsewhere_is_taken_down(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    fake.script(call("write_to_file", path="c.txt", content="hi\n"))
    with terminal(live_daemon, "run", "write c", cwd=workspace) as term:
        term.wait_for_text(PROMPT)
        cancel = hdsp(live_daemon, "cancel", task_id_of(term.text))
        assert cancel.returncode == 0, cancel.stderr
        assert term.finish(timeout=30) == 1, term.text
    assert "The ask is gone: the task stopped." in term.text
    assert "Task aborted." in term.text
    assert not (workspace / "c.txt").exists()


def test_ctrl_c_in_attach_detaches_and_the_ask_still_waits(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """Item 8: attaching is watching; Ctrl-C leaves the task as it was."""
    fake.script(call("write_to_file", path="d.txt", content="hi\n"))
    run = hdsp(live_daemon, "run", "write d", cwd=workspace)
    assert run.returncode == 4, run.stderr  # ExitCode.WAITING: nobody here to approve
    task_id = task_id_of(run.stderr)
    with terminal(live_daemon, "attach", task_id[:8], cwd=workspace) as term:
        term.wait_for_text(PROMPT)
        term.ctrl_c()
        assert term.finish(timeout=30) == 1, term.text
    assert "Detached; the task goes on (it waits for an answer)." in term.text
    assert "Traceback" not in term.text
    snapshot = state_of(live_daemon, task_id)
    assert snapshot["state"] == "interactive" and snapshot["pendingAsk"] is not None
    hdsp(live_daemon, "cancel", task_id)


# ---- send to a busy task (item 4) ---------------------------------------------------


def _busy_task(daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path) -> str:
    """A task that runs a command for a minute (approved up front)."""
    fake.script(call("execute_command", command="sleep 60"))
    run = hdsp(daemon, "run", "--detach", "--auto-approve", "command", "sleep", cwd=workspace)
    assert run.returncode == 0, run.stderr
    task_id = run.stdout.strip()
    with terminal(daemon, "attach", task_id, cwd=workspace) as term:
        term.wait_for_text("running a command (")
        term.ctrl_c()
        term.finish(timeout=30)
    return task_id


def test_ctrl_c_in_send_to_a_busy_task_takes_the_message_back(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    task_id = _busy_task(live_daemon, fake, workspace)
    with terminal(live_daemon, "send", task_id, "and then?", cwd=workspace) as term:
        term.wait_for_text("the message waits until its turn ends")
        term.ctrl_c()
        assert term.finish(timeout=30) == 1, term.text
    assert "Your message was taken out of the task's queue before its turn" in term.text
    snapshot = state_of(live_daemon, task_id)
    assert snapshot.get("queue", []) == [] and snapshot["state"] == "running"
    hdsp(live_daemon, "cancel", task_id)


def test_send_to_a_task_cancelled_before_the_messages_turn_says_so_and_ends(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    task_id = _busy_task(live_daemon, fake, workspace)
    with terminal(live_daemon, "send", task_id, "and then?", cwd=workspace) as term:
        term.wait_for_text("the message waits until its turn ends")
        assert hdsp(live_daemon, "cancel", task_id).returncode == 0
        assert term.finish(timeout=30) == 1, term.text
    assert "The task was aborted before your message's turn" in term.text
    assert [q["text"] for q in state_of(live_daemon, task_id).get("queue", [])] == ["and then?"]


def test_a_prompt_is_taken_down_while_the_daemon_is_away_and_asked_again_after(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    """Item 5: the daemon dies under a prompt; the prompt goes, the screen says
    why, and once the daemon is back the ask (still waiting) is asked again."""
    fake_openai.script(call("write_to_file", path="e.txt", content="hi\n"), OAI.text("Done."))
    with terminal(daemon, "run", "write e", cwd=workspace) as term:
        term.wait_for_text(PROMPT)
        daemon.kill()
        term.wait_for_text("hdspd went away; waiting for it to come back")
        daemon.start()
        term.wait_for_text("hdspd is back.")
        back = "hdspd is back."
        term.wait_for(lambda: PROMPT in term.text.partition(back)[2], "the ask, asked again")
        term.type("y\n")
        assert term.finish(timeout=60) == 0, term.text
    assert (workspace / "e.txt").read_text() == "hi\n"
    # The ask is on the screen once, the prompts taken down, how it was answered.
    assert term.text.count("write_to_file") == 1 and PROMPT not in term.text, term.text
    assert "approved by hdsp" in term.text
    assert "Done." in term.text


def test_a_prompt_of_a_daemon_that_stops_is_taken_down_and_says_how_to_go_on(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    """A daemon that stops on purpose makes its tasks resumable and says so: the
    prompt goes at once and the CLI ends with how to go on: answer the ask, which
    waits again once hdspd is back (`hdsp resume` is refused: the task waits)."""
    fake_openai.script(call("write_to_file", path="f.txt", content="hi\n"))
    with terminal(daemon, "run", "write f", cwd=workspace) as term:
        term.wait_for_text(PROMPT)
        daemon.stop()
        assert term.finish(timeout=30) == 1, term.text
    assert "`hdsp answer" in term.text and "Traceback" not in term.text
    assert "`hdsp resume" not in term.text


def test_the_status_line_shows_a_running_cell_with_its_time_and_output_lines(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    code = "import time\nfor i in range(5):\n    print('line', i, flush=True)\n    time.sleep(1)"
    fake.script(call("execute_code", code=code), OAI.text("Counted."))
    running = re.compile(r"running a cell \((\d+)s, (\d+) output lines?\)")
    with terminal(live_daemon, "run", "--auto-approve", "execute", "count", cwd=workspace) as term:
        seen: set[tuple[int, int]] = set()

        def counting() -> bool:
            shown = [m.groups() for line in term.lines if (m := running.search(line))]
            assert len(shown) <= 1, term.text
            seen.update((int(s), int(n)) for s, n in shown)
            return len({n for _, n in seen}) >= 2

        term.wait_for(counting, "a running cell whose output lines are counted")
        # Its output is drawn as it comes, above the status line, before it ends.
        term.wait_for(
            lambda: "line 2" in term.text and running.search(term.text) is not None,
            "a running cell's output drawn live",
        )
        live = term.lines
        assert live.index("line 0") < live.index("line 2") < len(live) - 1, term.text
        assert "line 4" not in term.text
        assert term.finish() == 0, term.text
    assert "running a cell" not in term.text
    # The cell printed for good once, as `hdsp show` prints it.
    assert term.text.count("line 4") == 1 and "Counted." in term.text
    assert conversation(term.lines) == conversation_in_show(live_daemon, term)


def test_a_running_commands_output_is_drawn_as_it_comes_then_printed_once(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    command = "echo step-one; sleep 1; echo step-two; sleep 1; echo step-three; sleep 1"
    fake.script(call("execute_command", command=command), OAI.text("Stepped."))
    with terminal(live_daemon, "run", "--auto-approve", "command", "step", cwd=workspace) as term:
        term.wait_for(
            lambda: "step-two" in term.lines and "running a command (" in term.text,
            "a running command's output drawn live",
        )
        assert "step-three" not in term.lines
        assert term.finish() == 0, term.text
    assert "running a command" not in term.text
    assert term.lines.count("  | step-two") == 1 and "Stepped." in term.text
    assert conversation(term.lines) == conversation_in_show(live_daemon, term)


def test_two_quick_ctrl_cs_in_run_never_say_the_cancelled_task_goes_on(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """Item 4's second half: the second Ctrl-C detaches from a task that is being
    cancelled, and says so, not that it goes on."""
    fake.script(call("execute_command", command="sleep 60"))
    with terminal(live_daemon, "run", "--auto-approve", "command", "sleep", cwd=workspace) as term:
        term.wait_for_text("running a command (")
        term.type("\x03\x03")
        assert term.finish(timeout=30) == 1, term.text
    assert "Cancelling the task" in term.text
    assert "goes on" not in term.text and "Traceback" not in term.text
    task_id = task_id_of(term.text)
    state = state_of(live_daemon, task_id)["state"]
    if state != "aborted":  # detached before the abort was seen: it still ends so
        assert "Detached while the task stops." in term.text


OSC52 = "\x1b]52;c;ZXZpbA==\x07"
TITLE = "\x1b]0;pwned\x07"


def test_the_live_region_and_status_line_show_escapes_as_text(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """What the model says reaches the redrawn region escaped, as it reaches
    printed lines: no OSC (clipboard, title) nor its BEL gets to the terminal,
    while hdsp's own cursor movements do."""
    evil = f"Look {OSC52} and {TITLE}\u202e! \x1b[2K\rfake"
    fake.script(
        OAI.text(evil, chunk_size=3).end_after(8),  # a partial answer, drawn live
        OAI.text(evil, chunk_size=3),
    )
    term = finished(live_daemon, "run", "say it", cwd=workspace)
    assert b"\x1b]" not in term.output and b"\x07" not in term.output
    assert b"\x1b[1A" in term.output  # the view did redraw
    assert (
        "Look \\x1b]52;c;ZXZpbA==\\x07 and \\x1b]0;pwned\\x07\\u202e! \\x1b[2K\\rfake" in term.text
    )


def test_asks_one_after_another_are_each_asked(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """The next ask may come while the answer to the last one is on its way: it
    is asked all the same, once."""
    fake.script(
        call("write_to_file", path="g1.txt", content="1\n"),
        call("write_to_file", path="g2.txt", content="2\n"),
        OAI.text("Both written."),
    )
    with terminal(live_daemon, "run", "write two", cwd=workspace) as term:
        term.wait_for_text(PROMPT)
        term.type("y\n")
        term.wait_for(lambda: PROMPT in term.text.partition("g2.txt")[2], "the second ask")
        term.type("y\n")
        assert term.finish() == 0, term.text
    assert (workspace / "g1.txt").exists() and (workspace / "g2.txt").exists()
    assert "Both written." in term.text and PROMPT not in term.text
    assert term.text.count("ask: allow this?") == 2 and term.text.count("approved by hdsp") == 2


def test_an_answered_ask_is_shown_once_as_hdsp_show_shows_it(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """The ask asked at the prompt is the history's ask: once answered, the screen
    shows it once, with who answered, and the prompt line is gone: the screen's
    conversation is `hdsp show`'s."""
    fake.script(call("write_to_file", path="h.txt", content="hi\n"), OAI.text("Wrote h."))
    with terminal(live_daemon, "run", "write h", cwd=workspace) as term:
        term.wait_for_text(PROMPT)
        term.type("\n")  # Enter alone: answers nothing, says so
        term.wait_for_text("Enter alone does neither")
        term.type("y\n")
        assert term.finish() == 0, term.text
    screen = term.lines
    assert (workspace / "h.txt").read_text() == "hi\n"
    assert term.text.count("write_to_file") == 1, term.text
    assert PROMPT not in term.text and "Enter alone does neither" not in term.text
    assert conversation(screen) == conversation_in_show(live_daemon, term)


def test_show_colours_a_diff_on_a_terminal(
    live_daemon: DaemonProcess, fake: FakeOpenAI, workspace: Path
) -> None:
    """Added lines green, removed red, hunks cyan: on a terminal that wants colour
    (an empty NO_COLOR does not count, as no-color.org says)."""
    (workspace / "i.txt").write_text("old\n")
    fake.script(call("write_to_file", path="i.txt", content="new\n"), OAI.text("Changed."))
    run = hdsp(live_daemon, "run", "--auto-approve", "write", "change i", cwd=workspace)
    assert run.returncode == 0, run.stderr
    term = finished(live_daemon, "show", task_id_of(run.stderr), env={"NO_COLOR": ""})
    assert b"\x1b[32m+new\x1b[0m" in term.output and b"\x1b[31m-old\x1b[0m" in term.output
    assert b"\x1b[36m@@" in term.output
    # Without a terminal (or with NO_COLOR), no colour at all.
    plain = hdsp(live_daemon, "show", task_id_of(run.stderr))
    assert "+new" in plain.stdout and "\x1b" not in plain.stdout
