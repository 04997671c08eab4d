"""A turn's model requests, made one at a time: what waits for the next request
(a person's feedback, steered messages) goes into the history first, the request
is fitted to the context window, and its reply streams to every client.

Transient failures are retried after a backoff that every client sees
(api_req_retry_delayed, api_req_retried); a context window that overflows is
reduced (non-destructively, at most 3 times); an image the provider refuses is
left out; anything else asks api_req_failed: no ends the turn as a cancel does,
else the request is made again.

:class:`TurnRequests` owns the reply that streams now; a reply's cost and usage
are charged to the task's :class:`~.record.TaskRecord`, and the open turn is
saved through the callback it is handed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from hdsp.daemon.conversation import TextBlock
from hdsp.daemon.llm import Provider
from hdsp.daemon.llm.errors import ContextWindowExceeded, ProviderError
from hdsp.daemon.llm.images import image_refused
from hdsp.protocol import Ask, AskResponse, ClineMessage, Say, SendMessageData

from .asks import AskBox
from .context_fit import ContextFit
from .deps import TaskDeps
from .feedback import Feedback
from .history import ApiHistory
from .messages import TaskMessages
from .queued import MessageQueue
from .record import TaskRecord
from .reply import INTERRUPTED_NOTE, StreamedReply
from .turn import TurnState, user_content
from .waiting import count_down

__all__ = ["TurnRequests", "add_user_message"]


async def add_user_message(
    messages: TaskMessages, history: ApiHistory, message: SendMessageData, sent_by: str | None
) -> None:
    """A message the user sent (`sent_by`: who, over TCP): shown to every client
    as user feedback, and added to the API history."""
    await messages.say(
        Say.USER_FEEDBACK,
        message.text,
        images=message.images,
        context=message.context,
        sent_by=sent_by,
    )
    await history.add("user", user_content(message.text, message.images, message.context))


class TurnRequests:
    """The model requests of the turns of the task of `record`. `save_turn` stores the open turn's state, `cancel` cancels
    the turn."""

    def __init__(
        self,
        deps: TaskDeps,
        messages: TaskMessages,
        history: ApiHistory,
        asks: AskBox,
        queue: MessageQueue,
        feedback: Feedback,
        fit: ContextFit,
        record: TaskRecord,
        *,
        save_turn: Callable[[], Awaitable[None]],
        cancel: Callable[[], None],
    ) -> None:
        self._deps = deps
        self._messages = messages
        self._history = history
        self._asks = asks
        self._queue = queue
        self._feedback = feedback
        self._fit = fit
        self._record = record
        self._save_turn = save_turn
        self._cancel = cancel
        #: The reply that streams now (None between requests).
        self._reply: StreamedReply | None = None

    async def make(self, turn: TurnState) -> StreamedReply:
        """One model request of the open `turn`, retried until a reply comes."""
        deps = self._deps
        attempt = 0
        reductions = 0
        previous: StreamedReply | None = None
        # Tools that come from elsewhere (MCP servers) get ready first: a server
        # starts when a task first needs it (bounded by its startup timeout).
        item = self._record.item
        await deps.tools.prepare(Path(item.workspace or "."), item.id)
        while True:
            if turn.ask_ts is not None:
                # The api_req_failed ask just posted, or one a restart left waiting.
                answer = await self._asks.wait_saved(turn.ask_ts)
                turn.ask_ts = None
                await self._save_turn()
                if answer is not None and answer.response == AskResponse.NO:
                    self._cancel()  # not retried: the turn ends as a cancel ends it
                    await anyio.lowlevel.checkpoint()
            if self._feedback:
                await self._history.add("user", [TextBlock(text=self._feedback.take())])
            for steer, sender in await self._queue.take_steered():
                # Where it lands in the turn is where every client sees it.
                await add_user_message(self._messages, self._history, steer, sender)
            provider = deps.providers.get(self._record.item.api_config_name)
            request = await self._fit.fitted(provider)
            started = await self._messages.say(
                Say.API_REQ_STARTED,
                json.dumps({"model": provider.model, "profile": self._record.item.api_config_name}),
            )
            # A retry replaces what the broken attempt showed, not adds to it.
            reply = self._reply = StreamedReply(self._messages, previous)
            try:
                await reply.stream(provider, request)
            except ProviderError as exc:
                await self.close_reply(keep=False)
                failure: dict[str, Any] = {"error": exc.message}
                if reply.text:
                    # A retry replaces the text on screen: what this attempt had
                    # said stays in its request's message.
                    failure["partialText"] = reply.text
                await self._messages.update(started, text=json.dumps(failure))
                previous = reply
                attempt += 1
                if isinstance(exc, ContextWindowExceeded) and reductions < 3:
                    reductions += 1
                    if await self._fit.reduce():
                        continue
                if image_refused(exc) and self._history.refuse_images():
                    await self._say_images_left_out(exc)
                    continue
                delay = deps.retry_policy.delay(exc, attempt)
                if delay is not None:
                    await count_down(self._messages, exc.message, attempt, delay)
                    continue
                await self._messages.say(Say.ERROR, exc.message)
                failed = await self._asks.post(Ask.API_REQ_FAILED, exc.message)
                turn.ask_ts = failed.ts
                await self._save_turn()
                attempt = 0
                continue  # the loop waits for the answer
            await self.close_reply(keep=False)
            if previous is not None:
                await reply.blank_unused(previous)
            await self._account(started, reply, provider)
            return reply

    async def close_reply(self, *, keep: bool) -> None:
        """Finish messages left partial; with `keep`, what the model said so far
        goes into the history, marked as interrupted."""
        reply, self._reply = self._reply, None
        if reply is None:
            return
        await reply.finish()
        if keep and reply.text:
            await self._history.add("assistant", [TextBlock(text=reply.text + INTERRUPTED_NOTE)])

    async def _say_images_left_out(self, exc: ProviderError) -> None:
        """Tell the model and every client why the images are gone."""
        note = (
            f"The model provider refused an image ({exc.message}); hdsp left the "
            "images out of the conversation and sent it again."
        )
        await self._messages.say(Say.ERROR, note)
        self._feedback.add(
            note + " If you need what an image showed, describe it in text or make a smaller one."
        )

    async def _account(
        self, started: ClineMessage, reply: StreamedReply, provider: Provider
    ) -> None:
        """Charge `reply` to the task, and show its tokens and cost on the
        api_req_started message `started`."""
        self._fit.budget.observe(reply.usage)
        cost = reply.cost(provider.info())
        self._record.charge(reply.usage, cost)
        self._record.context_tokens = reply.context_tokens()
        await self._messages.update(started, text=reply.request_info(started.text, cost))
        await self._record.tell_usage()
