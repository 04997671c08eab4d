"""A task's record: its HistoryItem and state, as every client and the store
see them, the writes that store them, and what the task has spent (its tokens
and dollars, charged to its tree of agents' approval caps too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from hdsp.daemon.approvals import ApprovalPolicy
from hdsp.daemon.conversation import ModelInfo, UsageChunk
from hdsp.daemon.store import Journal, update_task
from hdsp.protocol import (
    Event,
    HistoryItem,
    TaskState,
    TaskTokenUsageUpdated,
    TokenUsage,
    ToolUsageEntry,
)

__all__ = ["TaskRecord", "charged", "request_cost"]


class TaskRecord:
    """One task's item and state. `tool_usage` gives the task's counts of tool
    calls, told with its token usage."""

    def __init__(
        self,
        item: HistoryItem,
        state: TaskState,
        journal: Journal,
        approvals: ApprovalPolicy,
        tool_usage: Callable[[], Mapping[str, ToolUsageEntry]],
    ) -> None:
        self.item = item
        self.state = state
        #: The context the last reply filled, in tokens.
        self.context_tokens = 0
        self._journal = journal
        self._approvals = approvals
        self._tool_usage = tool_usage

    @property
    def approvals_key(self) -> str:
        """Whose approval settings and counts the task uses: a tree of agents
        shares its root's, so that its caps count the whole tree."""
        return self.item.root_task_id or self.item.id

    def usage(self) -> TokenUsage:
        i = self.item
        return TokenUsage(
            total_tokens_in=i.tokens_in,
            total_tokens_out=i.tokens_out,
            total_cost=i.total_cost,
            context_tokens=self.context_tokens,
            total_cache_writes=i.cache_writes,
            total_cache_reads=i.cache_reads,
        )

    def tool_usage(self) -> dict[str, ToolUsageEntry]:
        return dict(self._tool_usage())

    async def set_state(self, state: TaskState, event: Event | None = None) -> None:
        self.state = state
        self.item = msgspec.structs.replace(self.item, state=state)
        if event is None:
            await self._journal.write(update_task(self.item))
        else:
            await self._journal.emit(event, update_task(self.item))

    async def save(self) -> None:
        """Store the item as it is."""
        await self._journal.write(update_task(self.item))

    async def emit(self, event: Event) -> None:
        """Tell every client `event`, and store the item as it is with it."""
        await self._journal.emit(event, update_task(self.item))

    async def tell_usage(self) -> None:
        """Tell every client the task's usage (taskTokenUsageUpdated), and store it."""
        usage = (self.item.id, self.usage(), self.tool_usage())
        await self.emit(TaskTokenUsageUpdated(payload=usage))

    def charge(self, usage: UsageChunk, cost: float) -> None:
        """Add a request's `usage` and `cost` to the task's totals and its caps."""
        self.item = charged(self.item, usage, cost)
        self._approvals.add_cost(self.approvals_key, cost)


def request_cost(usage: UsageChunk, info: ModelInfo) -> float:
    """What a request of `usage` cost in dollars, at `info`'s prices (per million
    tokens)."""
    return (
        usage.input_tokens * info.input_price
        + usage.output_tokens * info.output_price
        + usage.cache_read_tokens * info.cache_read_price
        + usage.cache_write_tokens * info.cache_write_price
    ) / 1_000_000


def charged(item: HistoryItem, usage: UsageChunk, cost: float) -> HistoryItem:
    """`item` with `usage` and `cost` added to its totals."""
    return msgspec.structs.replace(
        item,
        tokens_in=item.tokens_in + usage.input_tokens,
        tokens_out=item.tokens_out + usage.output_tokens,
        cache_reads=(item.cache_reads or 0) + usage.cache_read_tokens,
        cache_writes=(item.cache_writes or 0) + usage.cache_write_tokens,
        total_cost=item.total_cost + cost,
    )
