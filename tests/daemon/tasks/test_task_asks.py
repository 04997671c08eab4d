"""A task's ask box (hdsp.daemon.tasks.asks): the first answer wins, a second one
hears that it came late, an answer may come before anyone waits, a deadline
answers for the person, and the task's state follows the ask's kind."""

from __future__ import annotations

import typing
from pathlib import Path

import anyio
import pytest

from hdsp.daemon.errors import CommandError
from hdsp.daemon.tasks.asks import AskBox
from hdsp.daemon.tools import AskAnswer, ToolError
from hdsp.protocol import (
    Ask,
    AskResponse,
    ErrorCode,
    Event,
    RespondToAskData,
    Say,
    TaskAskResponded,
    TaskState,
)
from tests.support.task_parts import Parts, open_parts

pytestmark = pytest.mark.timeout(30)


class States:
    """The states the box put its task in, in order."""

    def __init__(self) -> None:
        self.seen: list[TaskState] = []
        self.changed = anyio.Event()

    async def set(self, state: TaskState, event: Event) -> None:
        self.seen.append(state)
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_for(self, state: TaskState) -> None:
        with anyio.fail_after(5):
            while not self.seen or self.seen[-1] is not state:
                await self.changed.wait()


def _box(parts: Parts, states: States) -> AskBox:
    return AskBox(parts.messages(), states.set, parts.deps.clock)


def test_the_enum_has_exactly_the_wire_values() -> None:
    hints = typing.get_type_hints(RespondToAskData)
    assert set(typing.get_args(hints["response"])) == {r.value for r in AskResponse}


async def test_the_first_answer_wins_and_a_second_is_told_it_came_late(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        states = States()
        box = _box(parts, states)
        answers: list[AskAnswer] = []
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                answers.append(await box.ask(Ask.FOLLOWUP, "Which file?"))

            tg.start_soon(ask)
            await states.wait_for(TaskState.INTERACTIVE)
            pending = box.pending
            assert pending is not None and pending.ask == Ask.FOLLOWUP
            await box.respond(pending.ts, AskAnswer(AskResponse.MESSAGE, "data.csv"))
            with pytest.raises(CommandError) as late:
                await box.respond(pending.ts, AskAnswer(AskResponse.YES))
            assert late.value.code is ErrorCode.ALREADY_ANSWERED
        assert answers == [AskAnswer(AskResponse.MESSAGE, "data.csv")]
        assert states.seen == [TaskState.INTERACTIVE, TaskState.RUNNING]
        assert box.pending is None
        stored = await parts.stored_messages()
        assert [(m.type, m.ask or m.say, m.text) for m in stored] == [
            ("ask", Ask.FOLLOWUP, "Which file?"),
            ("say", Say.USER_FEEDBACK, "data.csv"),
        ]
        assert stored[0].is_answered
        assert len(await parts.of(TaskAskResponded)) == 1


async def test_an_answer_for_no_waiting_ask_is_refused(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        box = _box(parts, States())
        with pytest.raises(CommandError) as none:
            await box.respond(123, AskAnswer(AskResponse.YES))
        assert none.value.code is ErrorCode.INVALID_STATE
        ask = await box.post(Ask.TOOL, "{}")
        with pytest.raises(CommandError) as other:
            await box.respond(ask.ts + 1, AskAnswer(AskResponse.YES))
        assert other.value.code is ErrorCode.INVALID_STATE
        assert str(ask.ts) in str(other.value)


async def test_an_answer_before_the_wait_is_kept_for_it(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        states = States()
        box = _box(parts, states)
        ask = await box.post(Ask.COMMAND, "ls")
        await box.respond(ask.ts, AskAnswer(AskResponse.YES))
        answer = await box.wait(ask)
        assert answer.approved
        assert states.seen == []  # it never waited


async def test_the_state_follows_the_kind_of_ask(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        for kind, state in [
            (Ask.RESUME_TASK, TaskState.RESUMABLE),
            (Ask.COMPLETION_RESULT, TaskState.IDLE),
            (Ask.TOOL, TaskState.INTERACTIVE),
        ]:
            states = States()
            box = _box(parts, states)
            async with anyio.create_task_group() as tg:
                ask = await box.post(kind)
                tg.start_soon(box.wait, ask)
                await states.wait_for(state)
                await box.respond(ask.ts, AskAnswer(AskResponse.YES))
            assert states.seen == [state, TaskState.RUNNING]


async def test_a_deadline_answers_for_the_person_so_everyone_sees_it(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        box = _box(parts, States())
        ask = await box.post(Ask.TOOL, "{}")
        fallback = AskAnswer(AskResponse.NO, "(no answer in time)")
        answer = await box.wait(ask, deadline_ms=parts.deps.clock() - 1, on_timeout=fallback)
        assert answer is fallback
        stored = await parts.stored_messages()
        assert stored[0].is_answered
        assert stored[-1].text == "(no answer in time)"


async def test_a_tools_ask_with_no_answer_in_time_fails_the_tool(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        box = _box(parts, States())
        box.timeout = (0.05, None)
        with pytest.raises(ToolError, match="No answer within"):
            await box.ask(Ask.FOLLOWUP, "Anyone?")
        box.timeout = (0.05, AskAnswer(AskResponse.MESSAGE, "the default"))
        answer = await box.ask(Ask.FOLLOWUP, "Anyone now?")
        assert answer.text == "the default"
        box.clear()
        assert box.timeout is None and box.pending is None
