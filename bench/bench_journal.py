"""Journal throughput: durable events committed and published per second by the
daemon's `Journal`, against SQLite's own batched insert of the same rows.

hdsp: a `Store` and a `Journal` as the daemon opens them, publishing to a real
pyzmq XPUB socket through the daemon's own `EventPublisher` (ipc, nobody
subscribed: the send is the daemon's share of a publish); one task's message events are emitted back to back, then flushed.
Each event is an event row and a UI-message upsert, as a task's message is.
Timed from the first `emit` until `flush` returns (all committed and published).

Baseline: the very same rows (the envelopes and message bodies, encoded
beforehand), inserted by a plain `sqlite3` connection to a database of the same
schema and pragmas (WAL, synchronous=NORMAL) with `executemany`, in transactions
of the journal's largest batch (1024 events): the physical floor of persisting
them here. Both run in this process, alternating in rounds, on fresh databases;
the ratio is the median of the rounds' ratios (each round's pair runs back to
back: a burst of load on the shared machine lands on one pair, not on one side).
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import zmq
import zmq.asyncio

from hdsp.daemon.server.publishing import EventPublisher
from hdsp.daemon.store import Journal, Store
from hdsp.daemon.store.sqlite import SqliteDatabase
from hdsp.protocol import ClineMessage, HistoryItem, TaskEvent, encode

from .harness import Figure, Result
from .journal_tasks import create_task, message_created, task_item

__all__ = ["BATCH", "TASK", "Rounds", "item", "journal_rate", "rows_of", "run"]

TASK = "bench-journal"
TEXT = "The mean of column x is 4.2; here is how it was computed. " * 3
BATCH = 1024


def _message(i: int) -> ClineMessage:
    return ClineMessage(ts=1_700_000_000_000 + i, type="say", say="text", text=TEXT)


def item() -> HistoryItem:
    return task_item(TASK, task="journal")


async def journal_rate(path: Path | str, endpoint: str, n: int) -> tuple[float, float]:
    """(events per second, CPU seconds of this process per event)."""
    ctx = zmq.asyncio.Context()
    pub = ctx.socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 100_000)
    pub.bind(endpoint)

    events = EventPublisher(pub)  # as `Server` publishes

    try:
        async with Store.open(path) as store:
            journal = Journal(store, events.publish, publish_batch=events.publish_batch)
            async with anyio.create_task_group() as tg:
                await tg.start(journal.run)
                await create_task(journal, item())
                await journal.flush()
                t0, cpu0 = time.perf_counter(), time.process_time()
                for i in range(n):
                    await journal.emit(message_created(TASK, _message(i)))
                await journal.flush()
                elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
                await journal.aclose()
    finally:
        pub.close(0)
        ctx.term()
    return n / elapsed, cpu / n


def rows_of(n: int) -> tuple[list[tuple[int, str, int, bytes]], list[tuple[str, int, bytes]]]:
    """The event rows and UI-message rows `n` of the journal's events make."""
    now = int(time.time() * 1000)
    events: list[tuple[int, str, int, bytes]] = []
    messages: list[tuple[str, int, bytes]] = []
    for i in range(n):
        msg = _message(i)
        event = message_created(TASK, msg)
        events.append((i + 2, TASK, now, encode(TaskEvent(data=event, seq=i + 2, prev_seq=i + 1))))
        messages.append((TASK, msg.ts, encode(msg)))
    return events, messages


def _sqlite_rate(path: Path, n: int) -> tuple[float, float]:
    """(rows per second, CPU seconds of this process per row)."""
    SqliteDatabase(path, check_seconds=0).close()  # the schema, as the daemon makes it
    events, messages = rows_of(n)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        task = item()
        conn.execute(
            "INSERT INTO tasks (id, number, ts, state, item) VALUES (?, ?, ?, ?, ?)",
            (task.id, task.number, task.ts, "idle", encode(task)),
        )
        t0, cpu0 = time.perf_counter(), time.process_time()
        for start in range(0, n, BATCH):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO ui_messages (task_id, ts, body) VALUES (?, ?, ?) "
                "ON CONFLICT (task_id, ts) DO UPDATE SET body = excluded.body",
                messages[start : start + BATCH],
            )
            conn.executemany(
                "INSERT INTO events (seq, topic, ts, body) VALUES (?, ?, ?, ?)",
                events[start : start + BATCH],
            )
            conn.execute("COMMIT")
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        conn.close()
    return n / elapsed, cpu / n


@dataclass
class Rounds:
    """Each round's rates and CPU per row, the journal's against the baseline's."""

    hdsp: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)
    hdsp_cpu: list[float] = field(default_factory=list)
    raw_cpu: list[float] = field(default_factory=list)

    def add(self, ours: tuple[float, float], theirs: tuple[float, float]) -> None:
        """One round: (rows per second, CPU seconds per row) of each side."""
        (rate, cpu), (raw_rate, raw_cpu) = ours, theirs
        self.hdsp.append(rate)
        self.raw.append(raw_rate)
        self.hdsp_cpu.append(cpu * 1e6)
        self.raw_cpu.append(raw_cpu * 1e6)

    def result(
        self, name: str, description: str, baseline: str, ratio: str, target: float
    ) -> Result:
        """The rounds as figures, and the median of each round's ratio against `target`.

        Paired: each round's two runs are seconds apart, so that a burst of load on a
        shared machine falls on one round's pair rather than on one side's median."""
        result = Result(
            name=name,
            description=description,
            hdsp={
                "events_per_s": Figure.of(self.hdsp, "ev/s"),
                # CPU time (all threads) per event: what a loaded machine changes least.
                "cpu_per_event": Figure.of(self.hdsp_cpu, "µs"),
            },
            baseline={
                baseline: Figure.of(self.raw, "rows/s"),
                "cpu_per_row": Figure.of(self.raw_cpu, "µs"),
            },
        )
        paired = statistics.median(h / s for h, s in zip(self.hdsp, self.raw, strict=True))
        result.ratios[ratio] = (paired, target, ">=")
        return result


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    n = 5_000 if quick else 50_000
    rounds = 6 if quick else 8
    figures = Rounds()
    for r in range(rounds + 1):  # the first round warms up
        ours = await journal_rate(scratch / f"journal-{r}.sqlite3", f"ipc://{scratch}/jpub", n)
        theirs = await anyio.to_thread.run_sync(_sqlite_rate, scratch / f"sqlite-{r}.sqlite3", n)
        if r:
            figures.add(ours, theirs)
    return figures.result(
        "journal commit+publish",
        "durable message events/s through the Journal (commit, then publish on an XPUB "
        "socket) vs sqlite3 executemany of the same rows in batches of 1024; the ratio "
        "is the median of each round's (the two sides run back to back in a round)",
        baseline="sqlite_batched_insert",
        ratio="journal/sqlite",
        target=0.8,
    )
