"""Idle tasks leave memory and come back from the store, with nothing lost.

The real engine: a TaskManager over a real SQLite store and journal, the real
openai SDK against the fake OpenAI server. `max_idle_loaded` is lowered so that
the tests see tasks unloaded after a turn or two.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from hdsp.daemon.config import Profiles, Settings
from hdsp.daemon.errors import CommandError
from hdsp.daemon.llm.registry import Providers
from hdsp.daemon.store import INLINE_BYTES, Journal, Store
from hdsp.daemon.tasks import TaskManager
from hdsp.protocol import (
    ErrorCode,
    MessageEvent,
    RespondToAskData,
    SendMessageData,
    StartNewTaskData,
    TaskClosed,
    TaskCompleted,
    TaskConfiguration,
    TaskEvent,
    TaskInteractive,
)
from tests.daemon.store.journals import Published
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply

pytestmark = pytest.mark.timeout(30)


class Events(Published):
    """What the journal published, by task and kind."""

    def of(self, task_id: str, kind: type) -> list[TaskEvent]:
        return [e for e in self.events if isinstance(e.data, kind) and _task_of(e) == task_id]

    async def wait_for_count(self, task_id: str, kind: type, count: int) -> TaskEvent:
        with anyio.fail_after(10):
            await self.wait_for(lambda: len(self.of(task_id, kind)) >= count)
        return self.of(task_id, kind)[count - 1]


def _task_of(event: TaskEvent) -> str:
    data = event.data
    if isinstance(data, MessageEvent):
        return data.payload[0].task_id
    return str(data.payload[0])


@dataclass
class Engine:
    manager: TaskManager
    journal: Journal
    events: Events
    workspace: Path

    async def start(self, text: str, approvals: dict[str, object] | None = None) -> str:
        config = TaskConfiguration(workspace=str(self.workspace), approvals=approvals)
        ref = await self.manager.start_task(StartNewTaskData(text=text, configuration=config))
        return ref.task_id

    async def turn_ended(self, task_id: str, turns: int) -> TaskCompleted:
        """Wait for the `turns`th taskCompleted of the task; let the journal settle."""
        event = await self.events.wait_for_count(task_id, TaskCompleted, turns)
        await self.journal.flush()
        assert isinstance(event.data, TaskCompleted)
        return event.data


@pytest.fixture
async def engine(tmp_path: Path, fake_openai: FakeOpenAI) -> AsyncIterator[Engine]:
    events = Events()
    env = {"HDSP_BASE_URL": fake_openai.base_url, "HDSP_MODEL": "gpt-test"}
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with (
        Store.open(tmp_path / "hdsp.sqlite3") as store,
        Providers(Profiles(Settings(), env=env)) as providers,
    ):
        journal = Journal(store, events.publish)
        manager = TaskManager(store, journal, providers, default_workspace=str(workspace))
        manager.max_idle_loaded = 1
        async with anyio.create_task_group() as tg:
            await tg.start(journal.run)
            await tg.start(manager.run)
            yield Engine(manager, journal, events, workspace)
            await manager.shutdown()
            await journal.aclose()
            tg.cancel_scope.cancel()


def _completion(result: str) -> FakeReply:
    return FakeReply.tool_calls([ToolCall("attempt_completion", json.dumps({"result": result}))])


async def test_idle_tasks_beyond_the_limit_are_unloaded_and_come_back_whole(
    engine: Engine, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("Answer A"), FakeReply.text("Answer B"))
    a = await engine.start("Question A")
    await engine.turn_ended(a, 1)
    b = await engine.start("Question B")
    await engine.turn_ended(b, 1)
    # One idle task stays loaded: the most recently used.
    assert not engine.manager.is_loaded(a)
    assert engine.manager.is_loaded(b)

    fake_openai.script(FakeReply.text("Answer A again"))
    await engine.manager.send_message(a, SendMessageData(text="And then?"))
    await engine.turn_ended(a, 2)
    # A came back with its history: the model saw the whole conversation.
    sent = fake_openai.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "Question A"),
        ("assistant", "Answer A"),
        ("user", "And then?"),
    ]
    assert engine.manager.is_loaded(a) and not engine.manager.is_loaded(b)
    snap = await engine.manager.reads.snapshot(a)
    texts = [m.text for m in snap.messages if m.say == "text"]
    assert texts == ["Question A", "Answer A", "Answer A again"]
    assert engine.manager.statistics()["loaded"] == 1


async def test_an_unloaded_task_keeps_its_tool_usage_and_approvals(
    engine: Engine, fake_openai: FakeOpenAI
) -> None:
    engine.manager.max_idle_loaded = 0
    fake_openai.script(_completion("first"))
    # The user lets this task write without asking: that must outlive unloading.
    a = await engine.start("Write a note", approvals={"always_allow_write": True})
    first = await engine.turn_ended(a, 1)
    assert first.payload[2]["attempt_completion"].attempts == 1
    assert not engine.manager.is_loaded(a)

    note = json.dumps({"path": "note.md", "content": "hello\n"})
    fake_openai.script(
        FakeReply.tool_calls([ToolCall("write_to_file", note)]), _completion("second")
    )
    await engine.manager.send_message(a, SendMessageData(text="Now write it"))
    second = await engine.turn_ended(a, 2)
    usage = second.payload[2]
    assert usage["attempt_completion"].attempts == 2
    assert usage["write_to_file"].attempts == 1
    # Approved by the task's own setting: no ask was posted.
    assert (engine.workspace / "note.md").read_text() == "hello\n"
    assert not engine.events.of(a, TaskInteractive)
    assert not engine.manager.is_loaded(a)


async def test_a_task_that_waits_for_an_answer_stays_loaded(
    engine: Engine, fake_openai: FakeOpenAI
) -> None:
    engine.manager.max_idle_loaded = 0
    question = json.dumps({"question": "Which column?"})
    fake_openai.script(
        FakeReply.tool_calls([ToolCall("ask_followup_question", question)]),
        FakeReply.text("Answer B"),
        FakeReply.text("Using x."),
    )
    a = await engine.start("Question A")
    await engine.events.wait_for_count(a, TaskInteractive, 1)
    b = await engine.start("Question B")
    await engine.turn_ended(b, 1)
    assert engine.manager.is_loaded(a)
    assert not engine.manager.is_loaded(b)

    ask = (await engine.manager.reads.snapshot(a)).pending_ask
    assert ask is not None
    await engine.manager.respond_to_ask(
        a, RespondToAskData(ask_ts=ask.ts, response="messageResponse", text="x")
    )
    await engine.turn_ended(a, 1)
    assert not engine.manager.is_loaded(a)

    # Answering the same ask again, now that the task is unloaded, says it was.
    with pytest.raises(CommandError) as caught:
        await engine.manager.respond_to_ask(
            a, RespondToAskData(ask_ts=ask.ts, response="messageResponse", text="y")
        )
    assert caught.value.code == ErrorCode.ALREADY_ANSWERED


async def test_closing_an_unloaded_task_closes_it(engine: Engine, fake_openai: FakeOpenAI) -> None:
    engine.manager.max_idle_loaded = 0
    fake_openai.script(FakeReply.text("Done"))
    a = await engine.start("Question A")
    await engine.turn_ended(a, 1)
    assert not engine.manager.is_loaded(a)

    await engine.manager.close(a)
    await engine.journal.flush()
    assert len(engine.events.of(a, TaskClosed)) == 1
    with pytest.raises(CommandError) as caught:
        await engine.manager.close("no-such-task")
    assert caught.value.code == ErrorCode.TASK_NOT_FOUND


async def test_a_task_with_a_long_history_comes_back_whole(
    engine: Engine, fake_openai: FakeOpenAI
) -> None:
    # Past INLINE_BYTES the history is read on a worker thread, not on the loop.
    long_text = "x" * (INLINE_BYTES + 1)
    fake_openai.script(FakeReply.text("Read it"), FakeReply.text("B"))
    a = await engine.start(long_text)
    await engine.turn_ended(a, 1)
    b = await engine.start("Question B")
    await engine.turn_ended(b, 1)
    assert not engine.manager.is_loaded(a)

    fake_openai.script(FakeReply.text("Still here"))
    await engine.manager.send_message(a, SendMessageData(text="And then?"))
    await engine.turn_ended(a, 2)
    sent = fake_openai.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", long_text),
        ("assistant", "Read it"),
        ("user", "And then?"),
    ]


async def test_memory_of_unloaded_tasks_is_given_back(
    engine: Engine, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a number of unloads the manager collects what they left (cycles
    included) and has the allocator return free heap (hdsp.daemon.memory)."""
    import gc
    import weakref

    from hdsp.daemon.tasks import loaded as loaded_module

    monkeypatch.setattr(loaded_module, "GIVE_BACK_AFTER_UNLOADS", 2)
    collected = anyio.Event()

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            collected.set()

    fake_openai.script(*(FakeReply.text(f"Answer {i}") for i in range(3)))
    first = await engine.start("Question 0")
    await engine.turn_ended(first, 1)
    loaded = engine.manager.loaded.get(first)
    assert loaded is not None
    task = weakref.ref(loaded)
    del loaded  # (only the weak reference is the test's)
    gc.callbacks.append(on_gc)
    try:
        for i in (1, 2):  # each unloads the one before (max_idle_loaded is 1)
            await engine.turn_ended(await engine.start(f"Question {i}"), 1)
        with anyio.fail_after(10):
            await collected.wait()
    finally:
        gc.callbacks.remove(on_gc)
    assert task() is None
