"""Journal throughput with the store on PostgreSQL (issue 25): durable events
committed and published per second by the daemon's `Journal` on a `Store`
opened on a PostgreSQL database, against psycopg's own batched insert of the
same rows into the same server.

The server: a private cluster made as the tests make theirs
(tests/support/postgres.py, a Unix socket), but durable as a server is by
default (fsync and synchronous_commit on): each commit waits for its WAL to
reach the disk, on both sides.

hdsp: as bench_journal (a Store and a Journal as the daemon opens them,
publishing through the daemon's `EventPublisher` to an XPUB socket), one task's
message events emitted back to back, then flushed. Every commit goes through a
worker thread (a server is no short call) and takes two round trips: the batch,
then COMMIT (see store/postgres.py).

Baseline: the very same rows, inserted by a plain psycopg connection with
`executemany` in transactions of the journal's largest batch (1024 events): the
floor of persisting them on this server from this process. Rounds alternate
the two on fresh databases; the ratio is the median of the rounds' ratios.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import psycopg

from tests.support.postgres import PostgresCluster, find_bin_dir

from .bench_journal import BATCH, Rounds, item, journal_rate, rows_of
from .harness import Result

__all__ = ["run"]


def _psycopg_rate(url: str, n: int) -> tuple[float, float]:
    """(rows per second, CPU seconds of this process per row)."""
    events, messages = rows_of(n)
    task = item()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tasks (id, number, ts, state, item) VALUES (%s, %s, %s, %s, %s)",
            (task.id, task.number, task.ts, "idle", b"{}"),
        )
        cur = conn.cursor()
        t0, cpu0 = time.perf_counter(), time.process_time()
        for start in range(0, n, BATCH):
            with conn.transaction():
                cur.executemany(
                    "INSERT INTO ui_messages (task_id, ts, body) VALUES (%s, %s, %s) "
                    "ON CONFLICT (task_id, ts) DO UPDATE SET body = excluded.body",
                    messages[start : start + BATCH],
                )
                cur.executemany(
                    "INSERT INTO events (seq, topic, ts, body) VALUES (%s, %s, %s, %s)",
                    events[start : start + BATCH],
                )
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return n / elapsed, cpu / n


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result | list[Result]:
    name = "journal commit+publish, PostgreSQL"
    bin_dir = find_bin_dir()
    if bin_dir is None:
        print(f"{name}: not run, PostgreSQL is missing (apt-get install -y postgresql)")
        return []
    n = 5_000 if quick else 50_000
    rounds = 4 if quick else 6
    cluster = PostgresCluster(bin_dir, durable=True)
    figures = Rounds()
    try:
        await anyio.to_thread.run_sync(cluster.start)
        for r in range(rounds + 1):  # the first round warms up
            ours = cluster.url(await anyio.to_thread.run_sync(cluster.create_database))
            journal = await journal_rate(ours, f"ipc://{scratch}/jpub", n)
            theirs = cluster.url(await anyio.to_thread.run_sync(cluster.create_database))
            psycopg_rate = await anyio.to_thread.run_sync(_psycopg_rate, theirs, n)
            if r:
                figures.add(journal, psycopg_rate)
    finally:
        await anyio.to_thread.run_sync(cluster.stop)
    return figures.result(
        name,
        "durable message events/s through the Journal on a PostgreSQL store (commit on a "
        "worker thread, then publish on an XPUB socket) vs psycopg executemany of the same "
        "rows in transactions of 1024, same server (fsync on); median of each round's ratio",
        baseline="psycopg_batched_insert",
        ratio="journal/psycopg",
        target=0.5,
    )
