"""The live view's rules on their own, with the wire's own types: what is printed
for good and when, and which live-only updates are stale.

A client that follows a task from a seq replays the log first, so a live-only
update published before a durable one can reach it after; it must not take a
final message back to an older partial version (seen as a race in the pty
tests: a retry's countdown "Retry 1 in 0 s." printed where `hdsp show` has
"Retried (attempt 1).")."""

from __future__ import annotations

import json

import pytest

from hdsp.client.cli.live import LiveView, Transcript
from hdsp.protocol import ClineMessage, MessageEvent, MessagePayload, TaskEvent


def say(ts: int, kind: str, text: str, *, partial: bool | None = None) -> ClineMessage:
    return ClineMessage(ts=ts, type="say", say=kind, text=text, partial=partial)


def event(m: ClineMessage, *, seq: int | None, prev_seq: int | None) -> TaskEvent:
    action = "created" if seq is not None and m.partial else "updated"
    payload = MessagePayload(task_id="t", action=action, message=m)
    return TaskEvent(data=MessageEvent(payload=(payload,)), seq=seq, prev_seq=prev_seq)


def test_the_models_text_is_printed_only_once_no_retry_can_replace_it() -> None:
    t = Transcript()
    t.update(say(1, "text", "the prompt"))
    t.update(say(2, "api_req_started", "{}"))
    t.update(say(3, "text", "Result: 99 r"))
    assert [m.ts for m in t.take_settled()] == [1, 2]  # the prompt goes at once
    t.update(say(4, "api_req_retry_delayed", "broke\nRetried (attempt 1)."))
    t.update(say(5, "api_req_started", "{}"))
    assert t.take_settled() == []  # a retry may still replace ts 3
    t.update(say(3, "text", "Result: 12 rows are invalid."))
    t.update(say(6, "completion_result", "done"))
    assert [(m.ts, m.text) for m in t.take_settled()][:1] == [(3, "Result: 12 rows are invalid.")]


@pytest.mark.parametrize("prev_seq", [5, None], ids=["daemon says", "fallback"])
def test_a_stale_live_update_does_not_take_back_a_final_message(
    prev_seq: int | None, capsys: pytest.CaptureFixture[str]
) -> None:
    with LiveView(redraw=False) as view:
        view.event(event(say(1, "text", "the prompt"), seq=4, prev_seq=0))
        countdown = say(2, "api_req_retry_delayed", "broke\nRetry 1 in 3 s.", partial=True)
        view.event(event(countdown, seq=5, prev_seq=4))
        final = say(2, "api_req_retry_delayed", "broke\nRetried (attempt 1).")
        view.event(event(final, seq=6, prev_seq=5))
        stale = say(2, "api_req_retry_delayed", "broke\nRetry 1 in 0 s.", partial=True)
        view.event(event(stale, seq=None, prev_seq=prev_seq))
        assert view.transcript.get(2) == final
    out, err = capsys.readouterr()
    assert "Retried (attempt 1)." in out and "Retry 1 in 0 s." not in out + err


def test_a_retry_that_reopens_the_models_text_is_followed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LiveView(redraw=False) as view:
        view.event(event(say(1, "text", "the prompt"), seq=1, prev_seq=0))
        view.event(event(say(2, "text", "Result: 9", partial=True), seq=2, prev_seq=1))
        # The attempt broke: the daemon finished the message as it stood...
        view.event(event(say(2, "text", "Result: 99 r"), seq=3, prev_seq=2))
        # ...and the retry reopened it, live, after that.
        view.event(event(say(2, "text", "Result: 1", partial=True), seq=None, prev_seq=3))
        assert view.transcript.get(2) == say(2, "text", "Result: 1", partial=True)
        view.event(event(say(2, "text", "Result: 12 rows are invalid."), seq=4, prev_seq=3))
    out = capsys.readouterr().out
    assert "Result: 12 rows are invalid." in out and "99" not in out


def test_a_printed_answer_that_a_retry_replaces_is_marked_and_printed_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """After a prompt (an api_req_failed ask, answered: retry), the partial answer
    was on the screen already: the new one follows a line saying so, and nothing
    is glued to what was printed."""
    with LiveView(redraw=False) as view:
        view.event(event(say(1, "text", "the prompt"), seq=1, prev_seq=0))
        view.event(event(say(2, "text", "Result: 99 r"), seq=2, prev_seq=1))
        view.close_tail()  # as a prompt does: everything on the screen, as it stands
        view.event(event(say(2, "text", "Result: 1", partial=True), seq=None, prev_seq=2))
        view.event(event(say(2, "text", "Result: 12 rows are invalid."), seq=3, prev_seq=2))
    captured = capsys.readouterr()
    assert "(retrying: the partial answer above is replaced by the one below)" in captured.err
    lines = captured.out.splitlines()
    assert "Result: 99 r" in lines and "Result: 12 rows are invalid." in lines
    assert lines.index("Result: 99 r") < lines.index("Result: 12 rows are invalid.")


def ask(ts: int, *, answer: str | None = None, answered_by: str | None = None) -> ClineMessage:
    text = '{"tool": "write_to_file", "path": "a.txt", "content": "hi"}'
    return ClineMessage(
        ts=ts,
        type="ask",
        ask="tool",
        text=text,
        is_answered=True if answer else None,
        answer=answer,
        answered_by=answered_by,
    )


def test_an_ask_is_printed_for_good_once_answered_with_who_answered(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As `hdsp show` has it: the ask, then how it was answered and by whom. A
    prompt prints the ask before it asks; once answered, only how follows."""
    with LiveView(redraw=False, task_id="0123456789") as view:
        view.event(event(say(1, "text", "the prompt"), seq=1, prev_seq=0))
        view.event(event(ask(2), seq=2, prev_seq=1))
        view.pending_ask = 2
        capsys.readouterr()
        with view.asking(ask(2)):
            asked = capsys.readouterr().out
        answered = ask(2, answer="yesButtonClicked", answered_by="cli")
        view.event(event(answered, seq=3, prev_seq=2))
        out = capsys.readouterr().out
    assert (asked + out).splitlines() == [
        "ask: allow this?",
        'tool: write_to_file {"path": "a.txt"}',
        "    hi",
        "  approved by cli",
    ]


def test_a_view_closing_on_the_ask_the_task_waits_on_says_how_to_answer_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LiveView(redraw=False, task_id="0123456789") as view:
        view.event(event(say(1, "text", "the prompt"), seq=1, prev_seq=0))
        view.event(event(ask(2), seq=2, prev_seq=1))
        view.pending_ask = 2
    out = capsys.readouterr().out
    assert "waiting for an answer: `hdsp answer 01234567 --yes`" in out
    assert "never answered" not in out


def test_long_output_is_folded_as_hdsp_show_folds_it_and_the_view_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = "\n".join(f"line {i}" for i in range(100))
    with LiveView(redraw=False) as view:
        view.event(event(say(1, "text", "the prompt"), seq=1, prev_seq=0))
        view.event(event(say(2, "command_output", output), seq=2, prev_seq=1))
    out, err = capsys.readouterr()
    assert "  | line 0" in out and "  | line 99" in out and "line 50" not in out
    assert "[... 82 more lines; --full shows them ...]" in out
    assert "`hdsp show --full` shows them whole" in err


def test_a_kernel_replay_ask_shows_every_line_of_the_code_it_will_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A restore with the kernel asks before it runs the recorded cells again:
    attached, the person sees each cell's code (escaped), not a line of JSON."""
    text = json.dumps(
        {
            "tool": "replay_kernel",
            "checkpoint": 3,
            "note": "Restart the task's kernel and run these cells again, in order.",
            "cells": [
                {"seq": 1, "code": "import os\ndf = load()\x1b[2K"},
                {"seq": 2, "code": "x = 1", "skip": "skipped: marked `# hdsp: no-replay`"},
            ],
        }
    )
    replay = ClineMessage(ts=2, type="ask", ask="tool", text=text)
    with LiveView(redraw=False, task_id="0123456789") as view:
        view.event(event(say(1, "text", "the prompt"), seq=1, prev_seq=0))
        view.event(event(replay, seq=2, prev_seq=1))
        view.pending_ask = 2
        capsys.readouterr()
        with view.asking(replay):
            asked = capsys.readouterr().out
    assert asked.splitlines() == [
        "ask: restore checkpoint 3 with the kernel?",
        "  Restart the task's kernel and run these cells again, in order.",
        "  --- execution 1",
        "      import os",
        "      df = load()\\x1b[2K",
        "  --- execution 2  [skipped: marked `# hdsp: no-replay`]",
        "      x = 1",
    ]
