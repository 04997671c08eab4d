"""The streaming reply view: what one model request has produced so far, shown
live as partial `text` and `reasoning` messages (at most every
PARTIAL_INTERVAL seconds, and what was held back shows when the interval is
over, even if the stream pauses) and assembled, when it ends, into the assistant
message of the API history.
"""

from __future__ import annotations

import json
import time

import anyio

from hdsp.daemon.conversation import (
    Block,
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
from hdsp.daemon.llm import Provider
from hdsp.daemon.llm.errors import ProviderError
from hdsp.protocol import ClineMessage, HistoryItem, Say

from .messages import TaskMessages
from .record import charged, request_cost
from .turn import CallState
from .waiting import ReplyWait, show_wait

__all__ = ["INTERRUPTED_NOTE", "PARTIAL_INTERVAL", "StreamedReply"]

#: Live-only partial updates of one message are sent at most this often (seconds).
PARTIAL_INTERVAL = 0.05

#: Why a reply may end other than by itself, as providers' stop reasons say it
#: (shown on its text message: ACP clients end their turn with it).
_UNUSUAL_STOPS = ("max_tokens", "refusal", "content_filter")

#: What the history adds to a reply a person cancelled.
INTERRUPTED_NOTE = "\n\n[Response interrupted by the user]"


class StreamedReply:
    """One model request's reply. A retry takes over the messages the broken
    attempt (`previous`) showed, instead of adding new ones."""

    def __init__(self, messages: TaskMessages, previous: StreamedReply | None = None) -> None:
        self._messages = messages
        self.text = ""
        self.reasoning = ""
        self.text_msg: ClineMessage | None = None
        self.reasoning_msg: ClineMessage | None = None
        if previous is not None:
            self.text_msg, self.reasoning_msg = previous.text_msg, previous.reasoning_msg
        #: Signatures of the reasoning blocks (Anthropic thinking), to send back.
        self.signatures: list[str] = []
        self.tool_calls: list[ToolCallEnd] = []
        self.usage = UsageChunk()
        self.stop_reason: str | None = None
        self._last_partial = 0.0
        #: Set when the interval held back text from the partial messages.
        self._held_back = anyio.Event()
        self._streamed = False
        self._showing = anyio.Lock()

    async def stream(self, provider: Provider, request: ModelRequest) -> None:
        """Stream the reply to `request`; while it has not begun, say that the task
        waits, and for how long (:func:`.waiting.show_wait`). Raises ProviderError."""
        wait = ReplyWait(started=anyio.current_time())
        error: ProviderError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(show_wait, self._messages, wait, name="wait for the model")
            tg.start_soon(self._show_held_back, name="show the text held back")
            try:
                async with provider.stream(request) as chunks:
                    wait.accepted = True
                    async for chunk in chunks:
                        if wait.outcome is None:
                            wait.end("began")
                        await self.on_chunk(chunk)
            except ProviderError as exc:
                error = exc  # raised outside the task group, not in an ExceptionGroup
            finally:
                wait.end("failed" if error is not None else "stopped")
                self._streamed = True
                self._held_back.set()
        if error is not None:
            raise error

    async def on_chunk(self, chunk: object) -> None:
        match chunk:
            case TextDelta(text=delta):
                if self.reasoning_msg is not None and self.reasoning_msg.partial:
                    # Reasoning is over once the answer begins.
                    async with self._showing:
                        self.reasoning_msg = await self._messages.update(
                            self.reasoning_msg, text=self.reasoning, partial=False
                        )
                self.text += delta
                self.text_msg = await self._show(Say.TEXT, self.text_msg, self.text)
            case ReasoningDelta(text=delta, signature=signature):
                if signature:
                    self.signatures.append(signature)
                if not delta:
                    return
                self.reasoning += delta
                self.reasoning_msg = await self._show(
                    Say.REASONING, self.reasoning_msg, self.reasoning
                )
            case ToolCallEnd():
                self.tool_calls.append(chunk)
            case UsageChunk():
                self.usage = chunk
            case StopChunk(reason=reason):
                self.stop_reason = reason

    async def _show(self, say: Say, message: ClineMessage | None, text: str) -> ClineMessage:
        """The partial message `message` (new if None) showing `text`, if it is time."""
        async with self._showing:
            if message is None:
                message = await self._messages.say(say, text, partial=True)
            elif not message.partial:  # a retry takes over the broken attempt's
                message = await self._messages.update(message, text=text, partial=True)
            elif time.monotonic() - self._last_partial >= PARTIAL_INTERVAL:
                message = await self._messages.update(message, text=text)
            else:
                self._held_back.set()
                return message
            self._last_partial = time.monotonic()
            return message

    async def _show_held_back(self) -> None:
        """Show the text the interval held back once the interval is over, so that a
        model that pauses mid-reply (before a tool call, or just slow) is seen to
        have said everything it sent; until the stream ends."""
        while True:
            await self._held_back.wait()
            if self._streamed:
                return
            self._held_back = anyio.Event()
            await anyio.sleep(max(0.0, self._last_partial + PARTIAL_INTERVAL - time.monotonic()))
            async with self._showing:
                if self._streamed:
                    return
                for attr, text in (("text_msg", self.text), ("reasoning_msg", self.reasoning)):
                    message: ClineMessage | None = getattr(self, attr)
                    if message is not None and message.partial and message.text != text:
                        setattr(self, attr, await self._messages.update(message, text=text))
                self._last_partial = time.monotonic()

    async def finish(self) -> None:
        """Finish the messages left partial, with all the text they got; a reply
        that did not end by itself says why on its text (`stop_reason`)."""
        if self.reasoning_msg is not None and self.reasoning_msg.partial:
            await self._messages.update(self.reasoning_msg, text=self.reasoning, partial=False)
        cut = self.stop_reason if self.stop_reason in _UNUSUAL_STOPS else None
        if self.text_msg is not None and (self.text_msg.partial or cut is not None):
            self.text_msg = await self._messages.update(
                self.text_msg, text=self.text, partial=False, stop_reason=cut
            )

    async def blank_unused(self, previous: StreamedReply) -> None:
        """Empty the messages of a broken attempt that this one did not reuse."""
        if previous.text_msg is not None and not self.text:
            await self._messages.update(previous.text_msg, text="", partial=False)
        if previous.reasoning_msg is not None and not self.reasoning:
            await self._messages.update(previous.reasoning_msg, text="", partial=False)

    def content(self) -> list[Block]:
        """The assistant message's content: signed reasoning, text, tool calls."""
        content: list[Block] = []
        if self.reasoning and self.signatures:
            # Anthropic needs its signed thinking back with the tool calls.
            content.append(ReasoningBlock(text=self.reasoning, signature=self.signatures[-1]))
        if self.text:
            content.append(TextBlock(text=self.text))
        content.extend(
            ToolUseBlock(
                id=c.id,
                name=c.name,
                input=c.arguments or {},
                # Not JSON: the history keeps what the model sent.
                raw_input=c.raw_arguments if c.arguments is None else None,
            )
            for c in self.tool_calls
        )
        return content

    def call_states(self) -> list[CallState]:
        """The reply's tool calls, each as a call of the turn, pending."""
        return [
            CallState(id=c.id, name=c.name, arguments=c.arguments, raw_arguments=c.raw_arguments)
            for c in self.tool_calls
        ]

    def cost(self, info: ModelInfo) -> float:
        """What the reply cost in dollars, at `info`'s prices (per million tokens)."""
        return request_cost(self.usage, info)

    def charged(self, item: HistoryItem, cost: float) -> HistoryItem:
        """`item` with this reply's tokens and `cost` added to its totals."""
        return charged(item, self.usage, cost)

    def request_info(self, started: str | None, cost: float) -> str:
        """The text of the `api_req_started` message `started`, with this reply's
        tokens and cost."""
        info = json.loads(started or "{}")
        u = self.usage
        info.update(
            tokensIn=u.input_tokens,
            tokensOut=u.output_tokens,
            cacheReads=u.cache_read_tokens,
            cacheWrites=u.cache_write_tokens,
            cost=cost,
        )
        return json.dumps(info)

    def context_tokens(self) -> int:
        """The context the reply filled: providers report input split into
        uncached, cache-read and cache-written."""
        u = self.usage
        return u.input_tokens + u.cache_read_tokens + u.cache_write_tokens + u.output_tokens
