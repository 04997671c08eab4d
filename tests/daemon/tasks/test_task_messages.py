"""A task's UI messages (hdsp.daemon.tasks.messages) and its queue of waiting
messages (hdsp.daemon.tasks.queued), over a real store and journal."""

from __future__ import annotations

from pathlib import Path

import pytest

from hdsp.daemon.errors import CommandError
from hdsp.daemon.tasks.messages import TOOL_OUTPUT_KEPT
from hdsp.daemon.tasks.queued import MAX_QUEUED, MessageQueue
from hdsp.protocol import ErrorCode, QueuedMessagesUpdated, Say, SendMessageData
from tests.support.task_parts import open_parts

pytestmark = pytest.mark.timeout(30)


async def test_timestamps_grow_even_when_the_clock_stands_still(tmp_path: Path) -> None:
    async with open_parts(tmp_path, clock=lambda: 1000) as parts:
        messages = parts.messages()
        assert [messages.next_ts() for _ in range(3)] == [1000, 1001, 1002]


async def test_a_partial_message_is_kept_until_it_is_final(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        messages = parts.messages()
        live = await messages.say(Say.TEXT, "so", partial=True)
        assert messages.partial == {live.ts: live}
        live = await messages.update(live, text="so far")
        assert messages.partial[live.ts].text == "so far"
        await messages.finish_partial()
        assert messages.partial == {}
        stored = await parts.stored_messages()
        assert [(m.text, m.partial) for m in stored] == [("so far", False)]
        saved = await messages.saved(live.ts)
        assert saved is not None and saved.text == "so far"
        assert await messages.saved(live.ts + 1) is None


async def test_a_running_tools_messages_carry_its_id_and_make_its_output(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        messages = parts.messages()
        messages.tool_use_id = "call-1"
        await messages.say(Say.TOOL, '{"tool": "shell"}')  # the call, not its output
        await messages.say(Say.TEXT, "line 1")
        await messages.say(Say.TEXT, "x" * TOOL_OUTPUT_KEPT)
        messages.tool_use_id = None
        await messages.say(Say.TEXT, "someone else's")
        output = await messages.tool_output("call-1")
        assert output.startswith("...\n") and len(output) == TOOL_OUTPUT_KEPT + 4
        assert "someone else's" not in output and "shell" not in output
        stored = await parts.stored_messages()
        assert [m.tool_use_id for m in stored] == ["call-1", "call-1", "call-1", None]


async def test_the_queue_is_bounded_and_every_change_is_published(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        messages = parts.messages()
        queue = MessageQueue("task-1", messages.emit, parts.deps.clock)
        for i in range(MAX_QUEUED):
            await queue.put(SendMessageData(text=f"m{i}"))
        with pytest.raises(CommandError) as full:
            await queue.put(SendMessageData(text="one too many"))
        assert full.value.code is ErrorCode.TASK_BUSY
        second = list(queue)[1]
        await queue.delete(second.id)
        with pytest.raises(CommandError) as gone:
            await queue.delete(second.id)
        assert gone.value.code is ErrorCode.INVALID_REQUEST
        taken = await queue.take()
        assert taken is not None and taken[0].text == "m0" and taken[1] is None
        assert [m.text for m in queue][:2] == ["m2", "m3"]
        updates = await parts.of(QueuedMessagesUpdated)
        assert len(updates) == MAX_QUEUED + 2
        last = updates[-1]
        assert isinstance(last, QueuedMessagesUpdated)
        assert [m.text for m in last.payload[1]] == [m.text for m in queue]


async def test_taking_from_an_empty_queue_publishes_nothing(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        queue = MessageQueue("task-1", parts.messages().emit, parts.deps.clock)
        assert await queue.take() is None
        assert len(queue) == 0
        assert await parts.of(QueuedMessagesUpdated) == []


async def test_a_queued_message_keeps_who_sent_it_over_tcp(tmp_path: Path) -> None:
    """A team daemon's queue says who queued each message (its key's name), and
    the message taken from it still does: stored, so a restart keeps it too."""
    async with open_parts(tmp_path) as parts:
        queue = MessageQueue("task-1", parts.messages().emit, parts.deps.clock)
        await queue.put(SendMessageData(text="from far"), sent_by="alice")
        await queue.put(SendMessageData(text="steer", delivery="steer"), sent_by="bob")
        await queue.put(SendMessageData(text="local"))
        assert [m.sent_by for m in queue] == ["alice", "bob", None]
        updates = await parts.of(QueuedMessagesUpdated)
        last = updates[-1]
        assert isinstance(last, QueuedMessagesUpdated)
        assert [m.sent_by for m in last.payload[1]] == ["alice", "bob", None]
        steered = await queue.take_steered()
        assert [(d.text, by) for d, by in steered] == [("steer", "bob")]
        taken = await queue.take()
        assert taken is not None and (taken[0].text, taken[1]) == ("from far", "alice")
