"""`python -m bench.profiles NAME`: the profiles of bench/PROFILES.md, reproduced.

- `journal`: cProfile of the daemon's `Journal` committing and publishing one
  task's message events, in this process (as `bench_journal` times it), and the
  time per event spent in `Store.commit` (SQLite, on a worker thread for big
  batches) against the rest of `_commit_and_publish` (encoding, scrubbing,
  publishing).
- `status`: a real hdspd answering Ping, then GetStatus, from the minimal
  synchronous client of `bench_roundtrip`: the daemon's CPU time (all its
  threads) per command, and a py-spy sample of the daemon while it answers
  GetStatus (inclusive share of each function).
- `turns`: a real hdspd against the zero-latency fake model of `bench_scale`:
  after warm-up turns, sequential turns (SendMessage to taskCompleted) while
  py-spy samples the daemon; its CPU per turn, and the inclusive shares.
- `execute`: a real hdspd executing "1+1" on its kernel for a client (as
  `bench_kernel`), alternating with the lean client on the same kernel; the
  daemon's CPU per execution, and a py-spy sample of it while it executes.
- `startup`: hdspd under cProfile from exec to the first answered ListTasks of
  the minimal client of `bench_startup`; cumulative times of the start-up.

py-spy must be on PATH (`pip install py-spy`; it is in the dev extra). Every
profile prints its own table; nothing is written to bench/results.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import os
import pstats
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import zmq

from hdsp.daemon.paths import resolve_paths
from tests.support.daemon_process import DaemonProcess, model_env, short_tmp_dir

__all__ = ["main"]

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(max(1, round(seconds))),
            "--rate",
            "1000",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def inclusive(raw: Path, top: int = 40, keep: str | None = None) -> str:
    """Each function's inclusive share of py-spy's raw (collapsed) samples; only
    stacks that pass through `keep` when given (the event loop's work, say)."""
    shares: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if keep is not None and keep not in stack:
            continue
        n = int(count)
        total += n
        seen: set[str] = set()
        for frame in stack.split(";"):
            name = re.sub(r" \(/[^)]*/(site-packages/)?", " (", frame)
            if name not in seen:
                seen.add(name)
                shares[name] += n
    lines = [f"{total} samples" + (f" through {keep!r}" if keep else "")]
    lines += [f"{100 * n / max(1, total):5.1f}%  {name}" for name, n in shares.most_common(top)]
    return "\n".join(lines)


# ---- journal --------------------------------------------------------------------------


async def _journal(n: int) -> None:
    from hdsp.daemon.store import Store
    from hdsp.daemon.store.journal import Journal

    from .bench_journal import journal_rate

    spent = {"commit": 0.0, "commit_and_publish": 0.0}
    commit, commit_and_publish = Store.commit, Journal._commit_and_publish

    async def timed_commit(self: Store, *args: object) -> None:
        t = time.perf_counter()
        await commit(self, *args)  # type: ignore[arg-type]
        spent["commit"] += time.perf_counter() - t

    async def timed_batch(self: Journal, batch: list[object]) -> None:
        t = time.perf_counter()
        await commit_and_publish(self, batch)  # type: ignore[arg-type]
        spent["commit_and_publish"] += time.perf_counter() - t

    scratch = Path(tempfile.mkdtemp(prefix="hdsp-profile-"))
    await journal_rate(scratch / "warm.sqlite3", f"ipc://{scratch}/warm", n // 4)
    Store.commit, Journal._commit_and_publish = timed_commit, timed_batch  # type: ignore[method-assign]
    try:
        rate, _ = await journal_rate(scratch / "timed.sqlite3", f"ipc://{scratch}/timed", n)
    finally:
        Store.commit, Journal._commit_and_publish = commit, commit_and_publish  # type: ignore[method-assign]
    us = {k: v / n * 1e6 for k, v in spent.items()}
    print(f"journal: {rate:.0f} events/s = {1e6 / rate:.1f} us/event, of which")
    print(f"  Store.commit (SQLite; a thread for big batches): {us['commit']:.1f} us/event")
    rest = us["commit_and_publish"] - us["commit"]
    print(f"  the rest of _commit_and_publish (encode, scrub, publish): {rest:.1f} us/event")
    profile = cProfile.Profile()
    profile.enable()
    await journal_rate(scratch / "profiled.sqlite3", f"ipc://{scratch}/profiled", n)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
    print(text.getvalue())


# ---- status ---------------------------------------------------------------------------


def _status(seconds: float) -> None:
    from .bench_roundtrip import _dealer, _frames, _round_trips

    root = short_tmp_dir()
    proc = DaemonProcess(root)
    paths = resolve_paths(proc.data_dir, proc.runtime_dir)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "hdsp.daemon", "--log-format", "json"],
        env=proc.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = _dealer(ctx, paths.control_endpoint)
    sock.setsockopt(zmq.RECONNECT_IVL, 1)
    try:
        ping, status = _frames(sock)
        for frame in (ping, status):
            _round_trips(sock, frame, 3000)  # warm-up (and the SDKs' import ends)
        for name, frame in [("Ping", ping), ("GetStatus", status)] * 2:
            c0 = _cpu_seconds(daemon.pid)
            samples = _round_trips(sock, frame, 5000)
            cpu = (_cpu_seconds(daemon.pid) - c0) / 5000
            print(
                f"{name}: median round trip {statistics.median(samples) * 1e6:.0f} us, "
                f"daemon CPU {cpu * 1e6:.0f} us per command"
            )
        out = Path(tempfile.mkdtemp(prefix="hdsp-profile-")) / "status.raw"
        spy = _py_spy(daemon.pid, seconds, out)
        while spy.poll() is None:
            _round_trips(sock, status, 200)
        print(inclusive(out, keep="run_forever"))
    finally:
        sock.close(0)
        ctx.term()
        daemon.send_signal(signal.SIGTERM)
        assert daemon.stdin is not None
        daemon.stdin.close()
        daemon.wait(30)
        proc.cleanup()


# ---- turns ----------------------------------------------------------------------------


async def _turns(count: int) -> None:
    from hdsp.client import connect

    from .bench_scale import _APPROVALS, _MODEL, _FakeModel, _Turns

    async with _FakeModel() as fake:
        daemon = DaemonProcess(short_tmp_dir(), env=model_env(fake.base_url, _MODEL))
        await anyio.to_thread.run_sync(daemon.start)
        assert daemon.proc is not None
        pid = daemon.proc.pid
        try:
            async with connect(daemon.runtime_dir, name="bench-profile-turns") as client:
                client.timeout = 300
                turns = _Turns()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(turns.follow, client, (await client.status()).head_seq)
                    ids = []
                    for i in range(4):
                        ref = await client.start_task(f"Task {i}: mean?", approvals=_APPROVALS)
                        ids.append(ref.task_id)
                        await turns.wait_until(lambda r=ref.task_id: r in turns.ended)

                    async def turn(i: int) -> float:
                        task_id = ids[i % len(ids)]
                        turns.ended.pop(task_id, None)
                        t0 = time.perf_counter()
                        await client.send_message(task_id, "And the median?")
                        await turns.wait_until(lambda: task_id in turns.ended)
                        return turns.ended[task_id][0] - t0

                    for i in range(20):  # warm-up: imports, HTTP clients, caches
                        await turn(i)
                    c0 = _cpu_seconds(pid)
                    walls = [await turn(i) for i in range(count)]
                    cpu = (_cpu_seconds(pid) - c0) / count
                    print(
                        f"{count} sequential turns: median {statistics.median(walls) * 1e3:.2f} ms, "
                        f"daemon CPU {cpu * 1e3:.2f} ms per turn"
                    )
                    out = Path(tempfile.mkdtemp(prefix="hdsp-profile-")) / "turns.raw"
                    spy = _py_spy(pid, max(2.0, count * statistics.median(walls)), out)
                    i = 0
                    while spy.poll() is None:
                        await turn(i)
                        i += 1
                    print(inclusive(out, top=60, keep="run_forever"))
                    tg.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(daemon.stop)
            daemon.cleanup()


# ---- execute --------------------------------------------------------------------------


async def _execute(count: int) -> None:
    from jupyter_client.asynchronous.client import AsyncKernelClient

    from hdsp.client import connect
    from hdsp.protocol import KernelInfo, ShutdownKernel, StartKernel

    from .bench_kernel import _START, _hdsp, _lean

    daemon = DaemonProcess(short_tmp_dir())
    await anyio.to_thread.run_sync(daemon.start)
    assert daemon.proc is not None
    pid = daemon.proc.pid
    cwd = Path(tempfile.mkdtemp(prefix="hdsp-profile-"))
    try:
        async with connect(daemon.runtime_dir, name="bench-profile-execute") as client:
            info: KernelInfo = await client.request(StartKernel(cwd=str(cwd)), timeout=_START)
            assert info.connection_file is not None
            kc = AsyncKernelClient()
            kc.load_connection_file(info.connection_file)
            kc.start_channels(hb=False)
            try:
                await kc.wait_for_ready(timeout=_START)
                await _hdsp(client, info.kernel_id, 50)
                await _lean(kc, 50)
                hdsp: list[float] = []
                lean: list[float] = []
                cpu = 0.0
                for _ in range(count):
                    c0 = _cpu_seconds(pid)
                    hdsp += await _hdsp(client, info.kernel_id, 1)
                    cpu += _cpu_seconds(pid) - c0
                    lean += await _lean(kc, 1)
                print(
                    f"execute('1+1'): through hdspd {statistics.median(hdsp) * 1e3:.2f} ms, "
                    f"lean client on the same kernel {statistics.median(lean) * 1e3:.2f} ms; "
                    f"daemon CPU {cpu / count * 1e3:.2f} ms per execution"
                )
                out = cwd / "execute.raw"
                spy = _py_spy(pid, 5, out)
                while spy.poll() is None:
                    await _hdsp(client, info.kernel_id, 5)
                print(inclusive(out, top=60, keep="run_forever"))
            finally:
                kc.stop_channels()
                await client.request(ShutdownKernel(kernel_id=info.kernel_id), timeout=_START)
    finally:
        await anyio.to_thread.run_sync(daemon.stop)
        daemon.cleanup()


# ---- startup --------------------------------------------------------------------------


def _startup() -> None:
    from .bench_startup import _first_answer

    root = short_tmp_dir()
    proc = DaemonProcess(root)
    paths = resolve_paths(proc.data_dir, proc.runtime_dir)
    out = Path(tempfile.mkdtemp(prefix="hdsp-profile-")) / "startup.prof"
    plain = [sys.executable, "-m", "hdsp.daemon", "--log-format", "json"]
    profiled = [sys.executable, "-m", "cProfile", "-o", str(out), *plain[1:]]
    try:
        _first_answer(plain, proc.env, paths.control_endpoint, hdspd=True)  # warm the cache
        wall = _first_answer(plain, proc.env, paths.control_endpoint, hdspd=True)
        print(f"exec to the first answered ListTasks: {wall * 1000:.0f} ms")
        _first_answer(profiled, proc.env, paths.control_endpoint, hdspd=True)
    finally:
        proc.cleanup()
    text = io.StringIO()
    stats = pstats.Stats(str(out), stream=text).sort_stats("cumtime")
    stats.print_stats(r"(<module>|_load_engine|_warm|Database\.__init__|main)", 40)
    print(text.getvalue())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profiles")
    p.add_argument("name", choices=["journal", "status", "turns", "execute", "startup"])
    p.add_argument("--seconds", type=float, default=5.0, help="py-spy's sampling time")
    args = p.parse_args(argv)
    if args.name == "journal":
        anyio.run(_journal, 20_000, backend="asyncio")
    elif args.name == "status":
        _status(args.seconds)
    elif args.name == "turns":
        anyio.run(_turns, 50, backend="asyncio")
    elif args.name == "execute":
        anyio.run(_execute, 200, backend="asyncio")
    else:
        _startup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
