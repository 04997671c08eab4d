"""The streaming reply view (hdsp.daemon.tasks.reply): chunks become live partial
messages, then one assistant message for the API history, with its cost."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.daemon.conversation import (
    Chunk,
    ModelInfo,
    ModelRequest,
    ReasoningBlock,
    ReasoningDelta,
    StopChunk,
    TextBlock,
    TextDelta,
    ToolCallEnd,
    ToolUseBlock,
    UsageChunk,
)
from hdsp.daemon.tasks.messages import TaskMessages
from hdsp.daemon.tasks.reply import StreamedReply
from hdsp.protocol import ClineMessage, HistoryItem, Say
from tests.support.task_parts import TASK_ID, open_parts

pytestmark = pytest.mark.timeout(30)


async def test_text_streams_as_one_partial_message_then_a_final_one(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        reply = StreamedReply(parts.messages())
        for delta in ["Hel", "lo", ", world"]:
            await reply.on_chunk(TextDelta(text=delta))
        await reply.finish()
        events = await parts.message_events()
        # Created once; the deltas that came within PARTIAL_INTERVAL wait for the next.
        assert events[0][0] == "created" and events[0][1].partial
        assert {m.ts for _, m in events} == {events[0][1].ts}
        action, final = events[-1]
        assert (action, final.say, final.text, final.partial) == (
            "updated",
            Say.TEXT,
            "Hello, world",
            False,
        )
        assert reply.content() == [TextBlock(text="Hello, world")]
        stored = await parts.stored_messages()
        assert [(m.text, m.partial) for m in stored] == [("Hello, world", False)]


async def test_reasoning_ends_when_the_answer_begins(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        reply = StreamedReply(parts.messages())
        await reply.on_chunk(ReasoningDelta(text="Think"))
        await reply.on_chunk(ReasoningDelta(text="", signature="sig-1"))
        await reply.on_chunk(TextDelta(text="Answer"))
        assert reply.reasoning_msg is not None and not reply.reasoning_msg.partial
        assert reply.text_msg is not None and reply.text_msg.partial
        await reply.finish()
        # Anthropic gets its signed thinking back before the text.
        assert reply.content() == [
            ReasoningBlock(text="Think", signature="sig-1"),
            TextBlock(text="Answer"),
        ]
        kinds = [(m.say, m.text) for m in await parts.stored_messages()]
        assert kinds == [(Say.REASONING, "Think"), (Say.TEXT, "Answer")]


async def test_tool_calls_usage_and_stop_are_collected(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        reply = StreamedReply(parts.messages())
        await reply.on_chunk(ToolCallEnd(index=0, id="c1", name="read_file", arguments={"p": 1}))
        await reply.on_chunk(
            ToolCallEnd(index=1, id="c2", name="shell", arguments=None, raw_arguments="{bad")
        )
        await reply.on_chunk(
            UsageChunk(input_tokens=1000, output_tokens=500, cache_read_tokens=200)
        )
        await reply.on_chunk(StopChunk(reason="tool_use"))
        assert reply.stop_reason == "tool_use"
        assert reply.content() == [
            ToolUseBlock(id="c1", name="read_file", input={"p": 1}),
            # Not JSON: the history keeps what the model sent.
            ToolUseBlock(id="c2", name="shell", input={}, raw_input="{bad"),
        ]
        calls = reply.call_states()
        assert [(c.id, c.status, c.arguments, c.raw_arguments) for c in calls] == [
            ("c1", "pending", {"p": 1}, ""),
            ("c2", "pending", None, "{bad"),
        ]
        info = ModelInfo(input_price=3.0, output_price=15.0, cache_read_price=0.3)
        cost = reply.cost(info)
        assert cost == pytest.approx((1000 * 3.0 + 500 * 15.0 + 200 * 0.3) / 1_000_000)
        assert reply.context_tokens() == 1700
        item = HistoryItem(id="t", number=1, ts=1, task="x", tokens_in=10, total_cost=1.0)
        charged = reply.charged(item, cost)
        assert (charged.tokens_in, charged.tokens_out, charged.cache_reads) == (1010, 500, 200)
        assert charged.total_cost == pytest.approx(1.0 + cost)
        assert '"tokensIn": 1000' in reply.request_info('{"model": "m"}', cost)
        assert await parts.message_events() == []  # none of this is shown as text


async def test_a_retry_takes_over_the_broken_attempts_messages(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        messages = parts.messages()
        broken = StreamedReply(messages)
        await broken.on_chunk(ReasoningDelta(text="Hmm"))
        await broken.on_chunk(TextDelta(text="Half an ans"))
        await broken.finish()
        retry = StreamedReply(messages, broken)
        await retry.on_chunk(TextDelta(text="A whole answer"))
        await retry.finish()
        await retry.blank_unused(broken)
        stored = await parts.stored_messages()
        # The same two messages: the text replaced, the unused reasoning emptied.
        assert [(m.say, m.text) for m in stored] == [
            (Say.REASONING, ""),
            (Say.TEXT, "A whole answer"),
        ]


class PausingProvider:
    """A model that sends `deltas` at once, then pauses until `go` is set."""

    model = "pausing"

    def __init__(self, deltas: list[str]) -> None:
        self.deltas = deltas
        self.go = anyio.Event()

    def info(self) -> ModelInfo:
        return ModelInfo()

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[Chunk]]:
        async def chunks() -> AsyncIterator[Chunk]:
            for delta in self.deltas:
                yield TextDelta(text=delta)
            await self.go.wait()
            yield StopChunk(reason="end_turn")

        yield chunks()

    async def aclose(self) -> None:
        pass


async def test_text_held_back_by_the_interval_shows_when_the_model_pauses(
    tmp_path: Path,
) -> None:
    async with open_parts(tmp_path) as parts:
        shown = anyio.Event()

        class Watched(TaskMessages):
            async def update(self, message: ClineMessage, **changes: Any) -> ClineMessage:
                new = await super().update(message, **changes)
                if new.partial and new.text == "Hello, world":
                    shown.set()
                return new

        messages = Watched(TASK_ID, parts.store, parts.journal, parts.deps.clock)
        reply = StreamedReply(messages)
        provider = PausingProvider(["Hel", "lo", ", world"])
        async with anyio.create_task_group() as tg:
            tg.start_soon(reply.stream, provider, ModelRequest(system="", messages=[]))
            # The deltas came within PARTIAL_INTERVAL; the model now says nothing,
            # and all it sent shows anyway (before: "Hel" until the stream ended).
            with anyio.fail_after(5):
                await shown.wait()
            provider.go.set()
        await reply.finish()
        stored = await parts.stored_messages()
        assert [(m.text, m.partial) for m in stored] == [("Hello, world", False)]
