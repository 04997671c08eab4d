"""Keeping a task's requests inside its model's context window (seeds 001/004):
each request is counted before it is sent; past the profile's threshold the
conversation is condensed (a summary the model writes replaces its older part)
or, when that is not possible, its oldest part is hidden, until it fits. Every
client sees what was done, with the tokens before and after.

:class:`ContextFit` owns the task's :class:`~.budget.ContextBudget`; a summary's
cost is charged to the task's :class:`~.record.TaskRecord`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import structlog

from hdsp.daemon.conversation import (
    ApiMessage,
    ModelRequest,
    TextBlock,
    TextDelta,
    UsageChunk,
)
from hdsp.daemon.llm import Provider
from hdsp.daemon.llm.errors import ProviderError
from hdsp.daemon.llm.registry import Providers
from hdsp.protocol import Say

from .budget import SUMMARY_PROMPT, ContextBudget, RequestCount
from .history import ApiHistory
from .messages import TaskMessages
from .record import TaskRecord, request_cost
from .waiting import ReplyWait, show_wait

__all__ = ["ContextFit"]

log = structlog.get_logger("hdsp.tasks")


class ContextFit:
    """Fits the requests of the task of `record` to its context window;
    `request` builds the task's next request."""

    def __init__(
        self,
        providers: Providers,
        messages: TaskMessages,
        history: ApiHistory,
        record: TaskRecord,
        request: Callable[[], ModelRequest],
    ) -> None:
        self._providers = providers
        self._messages = messages
        self._history = history
        self._record = record
        self._request = request
        self.budget = ContextBudget()

    async def reduce(self, before: int | None = None) -> bool:
        """Hide the oldest part of the conversation and say so, with the request's
        tokens `before` and after if known; False if none can go."""
        truncated = await self._history.truncate()
        if truncated is None:
            return False
        removed: dict[str, Any] = {"truncationId": truncated[0], "messagesRemoved": truncated[1]}
        if before is not None:
            provider = self._providers.get(self._record.item.api_config_name)
            after = await self.budget.count(provider, self._request())
            removed |= {"prevContextTokens": before, "newContextTokens": after.tokens}
        await self._messages.say(
            Say.SLIDING_WINDOW_TRUNCATION, json.dumps(removed), context_truncation=removed
        )
        return True

    async def fitted(self, provider: Provider) -> ModelRequest:
        """The next request, counted first: past the profile's threshold the
        conversation is condensed (a summary replaces its older part), or, when
        that is not possible, truncated, until it fits (seeds 001/004)."""
        request = self._request()
        options = self._providers.options(self._record.item.api_config_name)
        threshold, allowed = ContextBudget.limits(provider.info(), options)
        count = await self._first_count(provider, request)
        if count.tokens <= threshold:
            return request
        log.info("context over threshold", tokens=count.tokens, threshold=threshold)
        condensed = options.auto_condense and await self.condense(provider, count.tokens)
        if not condensed and await self.reduce(count.tokens):
            request = self._request()
            count = await self.budget.count(provider, request)
        elif condensed:
            request = self._request()
            count = self.budget.last or count
        while count.tokens > allowed and await self.reduce(count.tokens):
            request = self._request()
            count = await self.budget.count(provider, request)
        return request

    async def _first_count(self, provider: Provider, request: ModelRequest) -> RequestCount:
        """A turn's first count may wait for the provider's SDK to load (the first
        request after a start): every client sees that wait as it sees a model's."""
        wait = ReplyWait(started=anyio.current_time(), preparing=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(show_wait, self._messages, wait, name="wait for the request")
            try:
                count = await self.budget.count(provider, request)
            except BaseException:
                wait.end("stopped")
                raise
            wait.end("ready")
        return count

    async def condense(self, provider: Provider, before: int, *, manual: bool = False) -> bool:
        """Ask the model for a summary of the conversation and let it replace
        the older messages (tagged, never deleted); say how it went, with the
        request's tokens before and after. False if it could not be done."""
        if not self._history.can_condense():
            if manual:
                await self._messages.say(
                    Say.CONDENSE_CONTEXT_ERROR,
                    "Nothing to condense: too few messages since the start or the last summary.",
                )
            return False
        shown = await self._messages.say(Say.CONDENSE_CONTEXT, partial=True)
        base = self._request()
        ask = ApiMessage(role="user", content=[TextBlock(text=SUMMARY_PROMPT)], ts=0)
        request = ModelRequest(
            system=base.system, messages=[*self._history.to_condense(), ask], tools=base.tools
        )
        text, usage, failure = "", UsageChunk(), None
        try:
            async with provider.stream(request) as chunks:
                async for chunk in chunks:
                    if isinstance(chunk, TextDelta):
                        text += chunk.text
                    elif isinstance(chunk, UsageChunk):
                        usage = chunk
        except ProviderError as exc:
            failure = exc.message
        if failure is None and not text.strip():
            failure = "the model's summary was empty"
        cost = request_cost(usage, provider.info())
        self._record.charge(usage, cost)
        if failure is not None:
            await self._messages.update(
                shown,
                say=Say.CONDENSE_CONTEXT_ERROR,
                text=f"Condensing the conversation failed: {failure}",
                partial=False,
            )
            await self._record.save()
            return False
        condense_id, hidden = await self._history.condense(text.strip())
        after = await self.budget.count(provider, self._request())
        info: dict[str, Any] = {
            "condenseId": condense_id,
            "prevContextTokens": before,
            "newContextTokens": after.tokens,
            "messagesCondensed": hidden,
            "cost": cost,
            "summary": text.strip(),
        }
        await self._messages.update(
            shown, text=json.dumps(info), context_condense=info, partial=False
        )
        await self._record.tell_usage()
        return True
