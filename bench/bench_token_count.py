"""What counting a request's tokens with Anthropic's count_tokens endpoint adds
to a turn: the same request, through the real anthropic SDK to the wire-level
fake (tests/fakes/anthropic_server.py) on this machine, timed from the start of
the turn (the count, when there is one) to the reply's last chunk, with and
without the count before it, alternating.

The fake answers at once, so the figure is hdsp's own cost of the count (a
second HTTP request on the same connection pool, building and encoding its
body) plus a loopback round trip; against api.anthropic.com each count adds a
network round trip and the endpoint's own time as well (tens to hundreds of
milliseconds), which no bench here can measure. The ratio's target (1.5) is a
sanity bound, not a goal the issue sets.
"""

from __future__ import annotations

import time
from pathlib import Path

from hdsp.daemon.llm.anthropic import AnthropicProvider
from hdsp.daemon.tasks.budget import ContextBudget
from tests.fakes.anthropic_server import FakeAnthropic, Reply
from tests.fakes.sessions import data_science_session

from .harness import Figure, Result

__all__ = ["run"]


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    repeats = 20 if quick else 200
    request = data_science_session(20, call_prefix="toolu_")
    with_count: list[float] = []
    without: list[float] = []
    count_alone: list[float] = []
    with FakeAnthropic(default=Reply.text("The mean of x is 4.2.")) as fake:
        provider = AnthropicProvider("claude-sonnet-4-5", "sk-ant-bench", fake.base_url)
        budget = ContextBudget()

        async def turn(counting: bool) -> float:
            started = time.perf_counter()
            if counting:
                counted = await budget.count(provider, request)
                assert counted.source == "provider", counted
                count_alone.append(time.perf_counter() - started)
            async with provider.stream(request) as chunks:
                async for _ in chunks:
                    pass
            return time.perf_counter() - started

        try:
            for _ in range(5):  # connections, the SDK's first-use costs
                await turn(True)
                await turn(False)
            count_alone.clear()
            for _ in range(repeats):
                with_count.append(await turn(True))
                without.append(await turn(False))
        finally:
            await provider.aclose()
    ms = 1000.0
    hdsp = {
        "turn with count": Figure.of([s * ms for s in with_count], "ms"),
        "the count alone": Figure.of([s * ms for s in count_alone], "ms"),
    }
    baseline = {"turn without count": Figure.of([s * ms for s in without], "ms")}
    ratio = hdsp["turn with count"].median / baseline["turn without count"].median
    return Result(
        name="token count, Anthropic",
        description=(
            "a 41-message turn through the anthropic SDK to the local fake, with "
            "count_tokens before it against without; the count's added time is a "
            "loopback round trip, a lower bound of the real endpoint's"
        ),
        hdsp=hdsp,
        baseline=baseline,
        ratios={"with ÷ without": (ratio, 1.5, "<=")},
    )
