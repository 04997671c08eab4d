"""The tool-call state machine (hdsp.daemon.tasks.calls): each call is checked,
decided by the approval policy, run, and recorded, with the turn saved at every
step; a call interrupted by a restart is reported, not run again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from hdsp.daemon.conversation import TextBlock
from hdsp.daemon.tasks.asks import AskBox
from hdsp.daemon.tasks.calls import REPETITION_LIMIT, ToolCalls
from hdsp.daemon.tasks.messages import TaskMessages
from hdsp.daemon.tasks.turn import CallState
from hdsp.daemon.tools import (
    AskAnswer,
    Tool,
    ToolCategory,
    ToolContext,
    ToolError,
    ToolResult,
)
from hdsp.protocol import (
    Ask,
    AskResponse,
    ClineMessage,
    Event,
    Say,
    TaskState,
    TaskToolFailed,
)
from tests.support.task_parts import Parts, open_parts

pytestmark = pytest.mark.timeout(30)

_ARGS: Mapping[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


class _NoteTool(Tool):
    """A tool of a note (`text`) that keeps the arguments of its runs."""

    parameters: ClassVar[Mapping[str, Any]] = _ARGS

    def __init__(self) -> None:
        self.runs: list[Mapping[str, Any]] = []

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        self.runs.append(args)
        return await self.answer(ctx, args["text"])

    async def answer(self, ctx: ToolContext, text: str) -> ToolResult:
        raise NotImplementedError


class Peek(_NoteTool):
    """A read-only tool: approved without asking; it says what it read."""

    name: ClassVar[str] = "peek"
    description: ClassVar[str] = "Read a note."
    category: ClassVar[ToolCategory] = ToolCategory.READ

    async def answer(self, ctx: ToolContext, text: str) -> ToolResult:
        await ctx.say(Say.TEXT, f"peeking at {text}")
        if text == "missing":
            raise ToolError("there is no such note")
        if text == "crash":
            raise RuntimeError("a bug in the tool")
        return ToolResult.text(f"note {text}")


class Scribble(_NoteTool):
    """A write tool: a person approves each call."""

    name: ClassVar[str] = "scribble"
    description: ClassVar[str] = "Write a note."
    category: ClassVar[ToolCategory] = ToolCategory.WRITE

    async def answer(self, ctx: ToolContext, text: str) -> ToolResult:
        return ToolResult.text("written")


class Rig:
    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.saves = 0
        self.states: list[TaskState] = []
        self.asking = anyio.Event()
        self.messages = TaskMessages("task-1", parts.store, parts.journal, parts.deps.clock)
        self.asks = AskBox(self.messages, self._set_state, parts.deps.clock)
        self.calls = ToolCalls(parts.deps, self.messages, self.asks, parts.workspace, self._save)

    async def _save(self) -> None:
        self.saves += 1

    async def _set_state(self, state: TaskState, event: Event) -> None:
        self.states.append(state)
        if state is TaskState.INTERACTIVE:
            self.asking.set()

    @asynccontextmanager
    async def asked(self, call: CallState) -> AsyncIterator[ClineMessage]:
        """`call` running in a task of its own until it asks; the block has its
        ask to answer, and its end waits for the call to end."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.calls.run, call)
            with anyio.fail_after(5):
                await self.asking.wait()
            ask = self.asks.pending
            assert ask is not None
            yield ask


@asynccontextmanager
async def _rig(tmp_path: Path, *tools: Tool) -> AsyncIterator[Rig]:
    """A Rig over the task's parts, with `tools`."""
    async with open_parts(tmp_path, tools=list(tools)) as parts:
        yield Rig(parts)


def _call(name: str, arguments: dict[str, Any] | None, raw: str = "") -> CallState:
    return CallState(id=f"call-{name}", name=name, arguments=arguments, raw_arguments=raw)


def _text(call: CallState) -> str:
    assert call.result is not None
    return " ".join(b.text for b in call.result if isinstance(b, TextBlock))


async def test_an_approved_call_runs_and_its_messages_carry_its_id(tmp_path: Path) -> None:
    peek = Peek()
    async with _rig(tmp_path, peek) as rig:
        call = _call("peek", {"text": "a"})
        await rig.calls.run(call)
        assert (call.status, _text(call), call.is_error) == ("done", "note a", False)
        assert peek.runs == [{"text": "a"}]
        assert rig.calls.mistakes == 0
        assert rig.calls.tool_usage["peek"].attempts == 1
        assert rig.saves >= 2  # running, then done
        stored = await rig.parts.stored_messages()
        said = [(m.say, m.tool_use_id) for m in stored]
        assert (Say.TOOL, "call-peek") in said and (Say.TEXT, "call-peek") in said
        assert rig.messages.tool_use_id is None


async def test_calls_that_cannot_run_are_errors_the_model_and_people_see(tmp_path: Path) -> None:
    async with _rig(tmp_path, Peek()) as rig:
        unknown = _call("nope", {})
        not_json = _call("peek", None, raw="{text: a")
        invalid = _call("peek", {"text": 3})
        for call in (unknown, not_json, invalid):
            await rig.calls.run(call)
            assert call.status == "done" and call.is_error
        assert "no tool named 'nope'" in _text(unknown) and "peek" in _text(unknown)
        assert "not valid JSON" in _text(not_json) and "{text: a" in _text(not_json)
        assert "invalid arguments for peek" in _text(invalid)
        assert rig.calls.mistakes == 3
        assert rig.calls.tool_usage["peek"].failures == 2
        assert len(await rig.parts.of(TaskToolFailed)) == 3
        errors = [m.text for m in await rig.parts.stored_messages() if m.say == Say.ERROR]
        assert len(errors) == 3 and not any(e and e.startswith("Error:") for e in errors)


async def test_the_same_call_again_and_again_is_refused(tmp_path: Path) -> None:
    peek = Peek()
    async with _rig(tmp_path, peek) as rig:
        calls = [_call("peek", {"text": "same"}) for _ in range(REPETITION_LIMIT)]
        for call in calls:
            await rig.calls.run(call)
        assert len(peek.runs) == REPETITION_LIMIT - 1
        assert calls[-1].is_error and "same arguments" in _text(calls[-1])
        other = _call("peek", {"text": "other"})
        await rig.calls.run(other)
        assert not other.is_error


async def test_tool_errors_count_as_mistakes_and_a_success_resets_them(tmp_path: Path) -> None:
    async with _rig(tmp_path, Peek()) as rig:
        missing, crash = _call("peek", {"text": "missing"}), _call("peek", {"text": "crash"})
        await rig.calls.run(missing)
        await rig.calls.run(crash)
        assert _text(missing) == "Error: there is no such note"
        assert "failed inside hdsp (RuntimeError)" in _text(crash)
        assert rig.calls.mistakes == 2
        await rig.calls.run(_call("peek", {"text": "fine"}))
        assert rig.calls.mistakes == 0


async def test_a_write_asks_and_runs_once_approved(tmp_path: Path) -> None:
    scribble = Scribble()
    async with _rig(tmp_path, scribble) as rig:
        call = _call("scribble", {"text": "hi"})
        async with rig.asked(call) as ask:
            assert call.status == "asking"
            assert ask.ask == Ask.TOOL and ask.ts == call.ask_ts
            await rig.asks.respond(ask.ts, AskAnswer(AskResponse.YES))
        assert (call.status, _text(call)) == ("done", "written")
        assert scribble.runs == [{"text": "hi"}]


async def test_a_denied_write_does_not_run_and_says_why(tmp_path: Path) -> None:
    scribble = Scribble()
    async with _rig(tmp_path, scribble) as rig:
        call = _call("scribble", {"text": "hi"})
        async with rig.asked(call) as ask:
            await rig.asks.respond(ask.ts, AskAnswer(AskResponse.NO, "not there"))
        assert scribble.runs == []
        assert _text(call) == "The user denied this operation. The user said: not there"
        assert not call.is_error


async def test_a_call_interrupted_by_a_restart_is_reported_not_run_again(tmp_path: Path) -> None:
    peek = Peek()
    async with _rig(tmp_path, peek) as rig:
        rig.messages.tool_use_id = "call-peek"
        await rig.messages.say(Say.TEXT, "half of the output")
        rig.messages.tool_use_id = None
        call = _call("peek", {"text": "a"})
        call.status = "running"
        await rig.calls.run(call)
        assert peek.runs == []
        assert call.is_error and "interrupted by a restart" in _text(call)
        assert "half of the output" in _text(call)


async def test_the_tool_context_is_the_tasks(tmp_path: Path) -> None:
    async with _rig(tmp_path) as rig:
        ctx = rig.calls.context
        assert ctx.task_id == "task-1"
        assert ctx.workspace == rig.parts.workspace
        with pytest.raises(KeyError):
            ctx.service("kernels")  # no kernel service was handed in
