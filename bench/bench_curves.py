"""Scale curves: what grows with the data, printed as tables (one row per size).

Each size gets a fresh store written by `fill.fill_store` (the daemon's schema
and row formats) and a real `hdspd` started on it:

- event log (10k -> 100k -> 1M events; 10k -> 50k in quick mode, over 100
  tasks): READY time (spawn to the systemd READY=1 the daemon sends once it
  serves), GetStatus round trip through the client library (median of 30), and
  a client process (`peers replay`) following every task from seq 0: ms to its
  first event, events/s to the head, and how much its peak resident memory grew.
- tasks (100 -> 1k -> 10k; up to 1k in quick mode, 10k events): the daemon's
  resident memory once ready, READY time, GetStatus, and the wall time of
  `hdsp tasks` and `hdsp show PREFIX` (8 characters of a task id).
- history (100 -> 10k -> 100k messages of one task; up to 10k in quick mode):
  the first page (100 messages) of GetTaskPage and the whole GetTask, through
  the client library, and the database's size.

The targets are the issue's: GetStatus and `show PREFIX` independent of the
log and task counts (the biggest size within 2x of the smallest, plus 1 ms of
noise), replay's first event <= 100 ms, client memory <= 64 MB and >= 100k
events/s at the biggest log, the first page of the biggest history <= 50 ms.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

from hdsp.client import connect
from hdsp.daemon.paths import resolve_paths
from tests.support.daemon_process import DaemonProcess, short_tmp_dir

from .fill import fill_store
from .harness import Figure, Result
from .process import Peer

__all__ = ["run"]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cli(runtime_dir: Path, *args: str) -> float:
    env = os.environ | {"HDSP_RUNTIME_DIR": str(runtime_dir)}
    t0 = time.perf_counter()
    subprocess.run(
        [str(Path(sys.executable).parent / "hdsp"), *args], env=env, check=True, capture_output=True
    )
    return (time.perf_counter() - t0) * 1000


class _Daemon:
    """A daemon on a freshly filled store (async context manager)."""

    def __init__(self, *, tasks: int, events: int, messages: int = 4) -> None:
        self.proc = DaemonProcess(short_tmp_dir())
        self.sizes = (tasks, events, messages)
        self.ready_ms = 0.0
        self.ids: list[str] = []

    async def __aenter__(self) -> _Daemon:
        tasks, events, messages = self.sizes
        db = resolve_paths(self.proc.data_dir, self.proc.runtime_dir).database
        self.database = db
        self.ids = await anyio.to_thread.run_sync(
            lambda: fill_store(db, tasks=tasks, events=events, messages_per_task=messages)
        )
        t0 = time.perf_counter()
        await anyio.to_thread.run_sync(self.proc.start)
        self.ready_ms = (time.perf_counter() - t0) * 1000
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc.proc is not None and self.proc.proc.poll() is None:
            await anyio.to_thread.run_sync(self.proc.stop)
        self.proc.cleanup()


async def _status_ms(runtime_dir: Path, n: int = 30) -> float:
    samples = []
    async with connect(runtime_dir, name="bench-curves") as client:
        for _ in range(n + 5):
            t0 = time.perf_counter()
            await client.status()
            samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples[5:])


async def _replay(runtime_dir: Path) -> tuple[float, float, float]:
    """(ms to the first event, events/s, MB the client's peak RSS grew)."""
    peer = Peer([sys.executable, "-m", "bench.peers", "replay", str(runtime_dir)], patience=600)
    try:
        await peer.launch()
        first, total, count, grew = (await peer.line()).split()
    finally:
        await peer.stop()
    return float(first), int(count) / float(total), float(grew)


def _fig(value: float, unit: str) -> Figure:
    return Figure.of([value], unit)


async def event_log(*, quick: bool) -> Result:
    sizes = [10_000, 50_000] if quick else [10_000, 100_000, 1_000_000]
    hdsp: dict[str, Figure] = {}
    status: dict[int, float] = {}
    last: tuple[float, float, float] = (0.0, 0.0, 0.0)
    for n in sizes:
        async with _Daemon(tasks=100, events=n) as d:
            status[n] = await _status_ms(d.proc.runtime_dir)
            last = await _replay(d.proc.runtime_dir)
            hdsp[f"ready@{n}"] = _fig(d.ready_ms, "ms")
            hdsp[f"get_status@{n}"] = _fig(status[n], "ms")
            hdsp[f"replay_first_event@{n}"] = _fig(last[0], "ms")
            hdsp[f"replay_rate@{n}"] = _fig(last[1], "ev/s")
            hdsp[f"replay_client_mem@{n}"] = _fig(max(last[2], 0.1), "MB")
    small, big = sizes[0], sizes[-1]
    result = Result(
        name="curve: event log",
        description=(
            f"event log of {' -> '.join(map(str, sizes))} events: READY, GetStatus, and a "
            "client replaying from seq 0 (first event, rate, peak memory growth)"
        ),
        hdsp=hdsp,
    )
    result.ratios[f"get_status@{big}/@{small}"] = (status[big] / (status[small] + 1), 2.0, "<=")
    result.ratios["replay_first_event_ms"] = (last[0], 100.0, "<=")
    result.ratios["replay_client_mem_mb"] = (last[2], 64.0, "<=")
    result.ratios["replay_rate_ev_s"] = (last[1], 100_000.0, ">=")
    return result


async def tasks_curve(*, quick: bool) -> Result:
    sizes = [100, 1_000] if quick else [100, 1_000, 10_000]
    hdsp: dict[str, Figure] = {}
    show: dict[int, float] = {}
    status: dict[int, float] = {}
    tasks_ms = 0.0
    for n in sizes:
        async with _Daemon(tasks=n, events=10_000) as d:
            assert d.proc.proc is not None
            rss = _rss_mb(d.proc.proc.pid)
            status[n] = await _status_ms(d.proc.runtime_dir)
            run_dir = d.proc.runtime_dir
            prefix = d.ids[len(d.ids) // 2][:8]
            tasks_ms = statistics.median(
                [await anyio.to_thread.run_sync(_cli, run_dir, "tasks") for _ in range(3)]
            )
            show[n] = statistics.median(
                [await anyio.to_thread.run_sync(_cli, run_dir, "show", prefix) for _ in range(3)]
            )
            hdsp[f"daemon_rss@{n}"] = _fig(rss, "MB")
            hdsp[f"ready@{n}"] = _fig(d.ready_ms, "ms")
            hdsp[f"get_status@{n}"] = _fig(status[n], "ms")
            hdsp[f"hdsp_tasks@{n}"] = _fig(tasks_ms, "ms")
            hdsp[f"hdsp_show_prefix@{n}"] = _fig(show[n], "ms")
    small, big = sizes[0], sizes[-1]
    result = Result(
        name="curve: tasks",
        description=(
            f"{' -> '.join(map(str, sizes))} tasks (10k events): daemon RSS, READY, GetStatus, "
            "`hdsp tasks`, `hdsp show PREFIX`"
        ),
        hdsp=hdsp,
    )
    result.ratios[f"show_prefix@{big}/@{small}"] = (show[big] / show[small], 1.5, "<=")
    result.ratios[f"get_status@{big}/@{small}"] = (status[big] / (status[small] + 1), 2.0, "<=")
    result.ratios["hdsp_tasks_ms"] = (tasks_ms, 150.0, "<=")
    return result


async def history_curve(*, quick: bool) -> Result:
    sizes = [100, 10_000] if quick else [100, 10_000, 100_000]
    hdsp: dict[str, Figure] = {}
    first_page = 0.0
    for n in sizes:
        async with _Daemon(tasks=1, events=100, messages=n) as d:
            task_id = d.ids[0]
            pages, whole = [], []
            async with connect(d.proc.runtime_dir, name="bench-curves") as client:
                client.timeout = 300
                for _ in range(7):
                    t0 = time.perf_counter()
                    page = await client.get_task_page(task_id, limit=100)
                    pages.append((time.perf_counter() - t0) * 1000)
                    assert len(page.messages) == min(100, n)
                for _ in range(3):
                    t0 = time.perf_counter()
                    snap = await client.get_task(task_id)
                    whole.append((time.perf_counter() - t0) * 1000)
                    assert len(snap.messages) == n
            first_page = statistics.median(pages[2:])
            hdsp[f"first_page@{n}"] = _fig(first_page, "ms")
            hdsp[f"get_task@{n}"] = _fig(statistics.median(whole), "ms")
            size = sum(p.stat().st_size for p in d.database.parent.glob(d.database.name + "*"))
            hdsp[f"db_size@{n}"] = _fig(size / 1e6, "MB")
    result = Result(
        name="curve: history",
        description=(
            f"one task of {' -> '.join(map(str, sizes))} messages: first page of GetTaskPage "
            "(100), whole GetTask, database size"
        ),
        hdsp=hdsp,
    )
    result.ratios["first_page_ms"] = (first_page, 50.0, "<=")
    return result


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> list[Result]:
    return [
        await event_log(quick=quick),
        await tasks_curve(quick=quick),
        await history_curve(quick=quick),
    ]
