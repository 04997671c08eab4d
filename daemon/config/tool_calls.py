"""The operator's limits on tool calls (`tool_calls` in the settings): how many
calls of one model reply run, and how many run at once, per task and in the
whole daemon (issue 32). Past `max_per_reply` a call is not run, and its result
tells the model to ask for it in a later reply; the concurrency limits make
calls wait for a free slot (back-pressure) instead of all starting at once.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ToolCallLimits"]


class ToolCallLimits(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    #: Calls of one model reply that run; the rest get a "not run" result.
    max_per_reply: int = Field(default=64, ge=1, le=10_000)
    #: Calls of one task that run at once (approval waits and agent calls apart).
    max_concurrent_per_task: int = Field(default=8, ge=1, le=1_000)
    #: Calls of all tasks that run at once.
    max_concurrent: int = Field(default=32, ge=1, le=10_000)
