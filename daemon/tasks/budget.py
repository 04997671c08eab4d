"""A task's context budget: how many tokens the next request takes (counted
before it is sent, :mod:`hdsp.daemon.llm.tokens`), where the profile draws the
line (`condense_threshold`, `context_buffer`), and the prompt that asks the
model for a summary when the line is passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import anyio
import structlog

from hdsp.daemon.config.settings import ProfileOptions
from hdsp.daemon.conversation import ModelInfo, ModelRequest, UsageChunk
from hdsp.daemon.llm import Provider
from hdsp.daemon.llm.errors import ProviderError
from hdsp.daemon.llm.tokens import Calibration, estimate_request_tokens

__all__ = ["COUNT_TIMEOUT", "SUMMARY_PROMPT", "ContextBudget", "RequestCount"]

log = structlog.get_logger("hdsp.tasks")

#: How long a provider's counter may take before the estimate is used (seconds).
COUNT_TIMEOUT = 10.0
#: Requests of more content blocks than this are estimated on a worker thread:
#: the estimate encodes every block, tens of milliseconds for a history of
#: hundreds of tool results, which the loop owes every other client (issue 32).
ESTIMATE_OFF_LOOP_BLOCKS = 256

SUMMARY_PROMPT = """\
The conversation above is growing too long for the model's context window. Write a \
summary that will replace it: the next request will carry your summary instead of \
these messages, and you will go on from it with nothing else.

Keep, in this order and under these headings:
1. Task: what the user asked for, in their words where it matters, and any change \
they made to it since.
2. Decisions: what was decided or found, and why.
3. Names: every file, path, table, column, variable, data frame and function that \
was created, read or changed, with what it holds.
4. State: what the kernel holds now (variables, loaded data, models), what ran \
successfully and what failed.
5. Latest outputs: the last results, figures and numbers that matter, exactly.
6. Open questions and next steps.

Do not call any tool. Write the summary only."""


@dataclass(frozen=True)
class RequestCount:
    tokens: int
    #: Who counted: the provider (its endpoint or the model's tokenizer) or the estimate.
    source: Literal["provider", "estimate"]
    #: The uncalibrated estimate (for calibrating by the reply's usage).
    estimate: int


class ContextBudget:
    """Counts requests for one task and learns from its replies' usage."""

    def __init__(self) -> None:
        self.calibration = Calibration()
        self.last: RequestCount | None = None

    async def count(self, provider: Provider, request: ModelRequest) -> RequestCount:
        """`request`'s prompt tokens: the provider's count, else the calibrated estimate."""
        if sum(len(m.content) for m in request.messages) > ESTIMATE_OFF_LOOP_BLOCKS:
            estimate = await anyio.to_thread.run_sync(estimate_request_tokens, request)
        else:
            estimate = estimate_request_tokens(request)
        counted: int | None = None
        with anyio.move_on_after(COUNT_TIMEOUT):
            try:
                counted = await provider.count_tokens(request)
            except ProviderError as exc:
                log.info("token count failed; estimating", error=exc.message)
        if counted is not None:
            found = RequestCount(counted, "provider", estimate)
        else:
            found = RequestCount(self.calibration.apply(estimate), "estimate", estimate)
        self.last = found
        return found

    def observe(self, usage: UsageChunk) -> None:
        """The reply to the last counted request reported `usage`."""
        reported = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        if self.last is not None and reported > 0:
            self.calibration.observe(self.last.estimate, reported)

    @staticmethod
    def limits(info: ModelInfo, options: ProfileOptions) -> tuple[int, int]:
        """(threshold, allowed): a request of more than `threshold` tokens is
        condensed; one of more than `allowed` (the window less the reply's tokens
        and the buffer) would be refused and must be reduced."""
        window = info.context_window
        reply = min(info.max_output, window // 2)
        allowed = int(window * (1 - options.context_buffer / 100)) - reply
        threshold = min(int(window * options.condense_threshold / 100), allowed)
        return threshold, max(1, allowed)
