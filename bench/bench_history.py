"""History growth: appending a message to a long task costs what it costs on a
short one (hdsp appends rows), against Roo-Code's pattern of rewriting the whole
JSON array through a temp file and a rename on every message."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import anyio

from hdsp.daemon.store import Journal, Store
from hdsp.protocol import ClineMessage, MessageEvent

from .harness import Figure, Result
from .journal_tasks import create_task, message_created, task_item

__all__ = ["run"]

_TEXT = "The mean of column x is 4.2; here is how it was computed. " * 4


def _message(task_id: str, ts: int) -> MessageEvent:
    return message_created(task_id, ClineMessage(ts=ts, type="say", say="text", text=_TEXT))


async def _publish(topic: bytes, body: bytes) -> None:
    pass


async def _hdsp_costs(
    path: Path, total: int, probes: list[int], window: int
) -> dict[int, list[float]]:
    """Seconds per durable append around each probe count."""
    costs: dict[int, list[float]] = {p: [] for p in probes}
    async with Store.open(path) as store:
        journal = Journal(store, _publish)
        async with anyio.create_task_group() as tg:
            await tg.start(journal.run)
            # Warm up on another task first: message 100 of the measured task is then
            # appended by a warm daemon, as message 10,000 is.
            for number, task_id in enumerate(("warm-up", "t"), start=1):
                await create_task(journal, task_item(task_id, number=number))
            for i in range(1, 1001):
                await journal.emit(_message("warm-up", i))
                await journal.flush()
            for i in range(1, total + 1):
                t0 = time.perf_counter()
                await journal.emit(_message("t", i))
                await journal.flush()
                elapsed = time.perf_counter() - t0
                for p in probes:
                    if p - window < i <= p:
                        costs[p].append(elapsed)
            await journal.aclose()
    return costs


def _roo_costs(path: Path, total: int, probe: int, window: int) -> list[float]:
    """Roo's safeWriteJson pattern: the whole array, to a temp file, renamed."""
    messages: list[dict[str, object]] = []
    costs: list[float] = []
    for i in range(1, total + 1):
        messages.append({"ts": i, "type": "say", "say": "text", "text": _TEXT})
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(messages))
        os.replace(tmp, path)
        if probe - window < i <= probe:
            costs.append(time.perf_counter() - t0)
    return costs


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    big = 2_000 if quick else 10_000
    roo_at = 1_000 if quick else 5_000
    window = 50 if quick else 200
    probes = sorted({100, roo_at, big})
    costs = await _hdsp_costs(scratch / "history.sqlite3", big, probes, window)
    roo = await anyio.to_thread.run_sync(_roo_costs, scratch / "roo.json", roo_at, roo_at, window)
    us = {p: [c * 1e6 for c in v] for p, v in costs.items()}
    roo_us = [c * 1e6 for c in roo]
    result = Result(
        name="history growth",
        description=f"durable append of message N of one task; Roo rewrite at {roo_at}",
        hdsp={f"append@{p}": Figure.of(v, "µs") for p, v in us.items()},
        baseline={f"roo_rewrite@{roo_at}": Figure.of(roo_us, "µs")},
    )
    result.ratios[f"append@{big}/append@100"] = (
        statistics.median(us[big]) / statistics.median(us[100]),
        1.2,
        "<=",
    )
    result.ratios[f"roo/hdsp@{roo_at}"] = (
        statistics.median(roo_us) / statistics.median(us[roo_at]),
        100.0,
        ">=",
    )
    return result
