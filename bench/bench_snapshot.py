"""Snapshot: `GetTask` of a task with 10,000 messages, through the client library
from a running hdspd (what a frontend does when it opens a long task).

The task's history is written through the daemon's own journal before the
daemon starts: a mix of short and long texts, tool asks and results, as a long
data-science session has. Timed from the request to the decoded snapshot.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from hdsp.client import connect
from hdsp.daemon.paths import resolve_paths
from hdsp.daemon.store import Journal, Store
from hdsp.protocol import ClineMessage
from tests.support.daemon_process import DaemonProcess, short_tmp_dir

from .harness import Figure, Result
from .journal_tasks import create_task, message_created, task_item

__all__ = ["run"]

TASK = "bench-snapshot"


def _message(i: int) -> ClineMessage:
    ts = 1_700_000_000_000 + i
    match i % 4:
        case 0:
            return ClineMessage(ts=ts, type="say", say="text", text="The mean of x is 4.2. " * 20)
        case 1:
            tool = '{"tool":"executeCode","code":"df.groupby(\'k\').x.mean()"}'
            return ClineMessage(ts=ts, type="ask", ask="tool", text=tool)
        case 2:
            return ClineMessage(ts=ts, type="say", say="api_req_started", text='{"cost":0.001}')
        case _:
            return ClineMessage(ts=ts, type="say", say="text", text="ok")


async def _publish(topic: bytes, body: bytes) -> None:
    pass


async def _write_history(database: Path, count: int) -> None:
    database.parent.mkdir(parents=True, exist_ok=True)
    async with Store.open(database) as store:
        journal = Journal(store, _publish)
        async with anyio.create_task_group() as tg:
            await tg.start(journal.run)
            await create_task(journal, task_item(TASK, task="a long task"))
            for i in range(count):
                await journal.emit(message_created(TASK, _message(i)))
            await journal.flush()
            await journal.aclose()


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    count = 2_000 if quick else 10_000
    reps = 5 if quick else 20
    root = short_tmp_dir()
    proc = DaemonProcess(root)
    samples: list[float] = []
    try:
        await _write_history(resolve_paths(proc.data_dir, proc.runtime_dir).database, count)
        await anyio.to_thread.run_sync(proc.start)
        async with connect(proc.runtime_dir, name="bench-snapshot") as client:
            for i in range(reps + 2):
                t0 = time.perf_counter()
                snap = await client.get_task(TASK)
                if i >= 2:  # the first two warm up (file cache, first decode)
                    samples.append(time.perf_counter() - t0)
                assert len(snap.messages) == count, len(snap.messages)
    finally:
        if proc.proc is not None:
            await anyio.to_thread.run_sync(proc.stop)
        proc.cleanup()
    ms = [s * 1000 for s in samples]
    result = Result(
        name="snapshot",
        description=f"GetTask of a task with {count} messages via hdsp.client",
        hdsp={"get_task": Figure.of(ms, "ms", p99=True)},
    )
    # An absolute target (no baseline): reported as value/target <= 1.
    result.ratios["get_task/100ms"] = (result.hdsp["get_task"].median / 100, 1.0, "<=")
    return result
