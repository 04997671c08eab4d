"""Start-up, measured from `exec` to the first answer.

Fair (`start-up, exec to first answered command`): one minimal synchronous
client (a plain pyzmq DEALER, connected before the process starts, reconnecting
every millisecond) is timed from just before the process is spawned until the
first answer comes back:

- hdspd: its `Connect`, then `ListTasks` (limit 1), a real command that needs
  the engine and the store, answered: the first moment a frontend can do work.
  On an empty store, and on one with a big event log and many tasks (1M events
  and 10k tasks; 50k and 1k in quick mode);
- baseline: `python -m bench.peers echo`, a raw pyzmq asyncio ROUTER echo process
  (the interpreter, pyzmq, anyio), sent the same `Connect` frame: what any
  Python ZeroMQ server costs from exec to its first reply.

Also timed: the wall time of `hdsp tasks` and of `hdsp show PREFIX` (an 8-digit
prefix of a task id) against the daemon with the big store; `hdsp tasks` against
its baseline, `bench/minimal_tasks.py`: the least Python script that does the same
query (discovery file, plain synchronous pyzmq DEALER, Connect, ListTasks of 20,
the stdlib's json) and prints the same lines, started the same way (process start
included in both; their outputs are checked equal); and `hdsp --help`.

Old (`start-up`): hdspd spawn to the first Ack of the async client library (the
Ack comes before commands can run), and `hdsp tasks` against an empty daemon.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import zmq

from hdsp.client import connect
from hdsp.daemon.paths import resolve_paths
from hdsp.protocol import (
    PROTOCOL_VERSION,
    Ack,
    ClientInfo,
    Connect,
    ListTasks,
    ListTasksData,
    Reply,
    TaskCommand,
    decode_server_message,
    encode,
)
from tests.support.daemon_process import DaemonProcess, short_tmp_dir

from .fill import fill_store
from .harness import Figure, Result

__all__ = ["run"]

_CONNECT = encode(
    Connect(
        protocol_version=PROTOCOL_VERSION,
        client=ClientInfo(name="bench-startup", version="0", kind="script"),
    )
)


def _first_answer(argv: list[str], env: dict[str, str], endpoint: str, *, hdspd: bool) -> float:
    """Seconds from spawning `argv` to the first answer of the minimal client (the
    ListTasks reply for hdspd, the echoed Connect for the echo); ends the process."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RECONNECT_IVL, 1)
    sock.setsockopt(zmq.RCVTIMEO, 60_000)
    sock.connect(endpoint)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        sock.send(_CONNECT)
        answer = sock.recv()
        if hdspd:
            ack = decode_server_message(answer)
            assert isinstance(ack, Ack), ack
            client_id = ack.data.client_id
            cmd = ListTasks(data=ListTasksData(limit=1))
            sock.send(encode(TaskCommand(client_id=client_id, request_id="r-1", data=cmd)))
            reply = decode_server_message(sock.recv())
            assert isinstance(reply, Reply) and reply.ok, reply
        elapsed = time.perf_counter() - t0
    finally:
        sock.close(0)
        ctx.term()
        if hdspd:
            proc.send_signal(signal.SIGTERM)
        assert proc.stdin is not None
        proc.stdin.close()  # the echo ends when its stdin does
        proc.wait(60)
    return elapsed


def _hdspd_first_answer(root: Path) -> float:
    proc = DaemonProcess(root)
    paths = resolve_paths(proc.data_dir, proc.runtime_dir)
    argv = [sys.executable, "-m", "hdsp.daemon", "--log-format", "json"]
    return _first_answer(argv, proc.env, paths.control_endpoint, hdspd=True)


def _echo_first_answer(root: Path) -> float:
    endpoint = f"ipc://{root / 'echo'}"
    argv = [sys.executable, "-m", "bench.peers", "echo", endpoint]
    return _first_answer(argv, dict(os.environ), endpoint, hdspd=False)


def _cli_wall(runtime_dir: Path, *args: str) -> float:
    return _wall(runtime_dir, [str(Path(sys.executable).parent / "hdsp"), *args])[0]


def _minimal_wall(runtime_dir: Path) -> float:
    return _wall(runtime_dir, [*_MINIMAL, str(runtime_dir)])[0]


#: The baseline of `hdsp tasks` (run as a file: no `-m`, no package of its own).
_MINIMAL = [sys.executable, str(Path(__file__).with_name("minimal_tasks.py"))]


def _wall(runtime_dir: Path, argv: list[str]) -> tuple[float, bytes]:
    env = os.environ | {"HDSP_RUNTIME_DIR": str(runtime_dir)}
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0, done.stdout


async def run_fair(*, quick: bool) -> Result:
    reps = 2 if quick else 7
    events, tasks = (50_000, 1_000) if quick else (1_000_000, 10_000)
    empty = short_tmp_dir()
    big = short_tmp_dir()
    hdsp: list[float] = []
    echo: list[float] = []
    loaded: list[float] = []
    cli_tasks: list[float] = []
    cli_show: list[float] = []
    minimal: list[float] = []
    cli_help: list[float] = []
    try:
        big_proc = DaemonProcess(big)
        big_db = resolve_paths(big_proc.data_dir, big_proc.runtime_dir).database
        ids = await anyio.to_thread.run_sync(lambda: fill_store(big_db, tasks=tasks, events=events))
        for i in range(reps + 1):  # alternate; the first round warms the file cache
            h = await anyio.to_thread.run_sync(_hdspd_first_answer, empty)
            e = await anyio.to_thread.run_sync(_echo_first_answer, empty)
            b = await anyio.to_thread.run_sync(_hdspd_first_answer, big)
            if i:
                hdsp.append(h)
                echo.append(e)
                loaded.append(b)
        await anyio.to_thread.run_sync(big_proc.start)
        try:
            run_dir = big_proc.runtime_dir
            hdsp_cli = str(Path(sys.executable).parent / "hdsp")
            said = await anyio.to_thread.run_sync(_wall, run_dir, [hdsp_cli, "tasks"])
            same = await anyio.to_thread.run_sync(_wall, run_dir, [*_MINIMAL, str(run_dir)])
            assert said[1] == same[1], "the minimal client's lines differ from hdsp tasks'"
            for i in range(reps + 1):
                t = await anyio.to_thread.run_sync(_cli_wall, run_dir, "tasks")
                m = await anyio.to_thread.run_sync(_minimal_wall, run_dir)
                s = await anyio.to_thread.run_sync(
                    _cli_wall, run_dir, "show", ids[len(ids) // 2][:8]
                )
                h = await anyio.to_thread.run_sync(_cli_wall, run_dir, "--help")
                if i:
                    cli_tasks.append(t)
                    cli_show.append(s)
                    minimal.append(m)
                    cli_help.append(h)
        finally:
            await anyio.to_thread.run_sync(big_proc.stop)
    finally:
        DaemonProcess(empty).cleanup()
        DaemonProcess(big).cleanup()
    ms = {
        k: [s * 1000 for s in v]
        for k, v in {
            "hdspd": hdsp,
            "echo": echo,
            "loaded": loaded,
            "tasks": cli_tasks,
            "show": cli_show,
            "minimal": minimal,
            "help": cli_help,
        }.items()
    }
    med = statistics.median
    result = Result(
        name="start-up, exec to first answered command",
        description=(
            "exec to the first ListTasks reply of a minimal DEALER client, vs exec to the first "
            f"reply of a raw pyzmq echo process; also with {events} events and {tasks} tasks "
            "in the store, and `hdsp tasks` / `hdsp show PREFIX` against that store; `hdsp "
            "tasks` vs a minimal pyzmq script doing the same query (process start in both); "
            "`hdsp --help`"
        ),
        hdsp={
            "first_answer_empty": Figure.of(ms["hdspd"], "ms"),
            f"first_answer_{events}_events": Figure.of(ms["loaded"], "ms"),
            f"hdsp_tasks_{tasks}_tasks": Figure.of(ms["tasks"], "ms"),
            f"hdsp_show_prefix_{tasks}_tasks": Figure.of(ms["show"], "ms"),
            "hdsp_help": Figure.of(ms["help"], "ms"),
        },
        baseline={
            "echo_first_reply": Figure.of(ms["echo"], "ms"),
            f"minimal_client_tasks_{tasks}_tasks": Figure.of(ms["minimal"], "ms"),
        },
    )
    result.ratios["first_answer/echo"] = (med(ms["hdspd"]) / med(ms["echo"]), 3.0, "<=")
    result.ratios["first_answer_big_store_ms"] = (med(ms["loaded"]), 300.0, "<=")
    result.ratios["hdsp_tasks_ms"] = (med(ms["tasks"]), 150.0, "<=")
    result.ratios["hdsp_tasks/minimal_client"] = (med(ms["tasks"]) / med(ms["minimal"]), 1.5, "<=")
    result.ratios["hdsp_help_ms"] = (med(ms["help"]), 150.0, "<=")
    return result


async def _first_ack(root: Path) -> float:
    """Seconds from spawning hdspd to the first Ack of a client."""
    proc = DaemonProcess(root)
    t0 = time.perf_counter()
    proc.start()
    async with connect(proc.runtime_dir, name="bench"):
        elapsed = time.perf_counter() - t0
    proc.stop()
    return elapsed


async def run_old(runtime_dir: Path, *, quick: bool) -> Result:
    reps = 2 if quick else 7
    acks: list[float] = []
    for _ in range(reps + 1):
        root = short_tmp_dir()
        try:
            acks.append(await _first_ack(root))
        finally:
            DaemonProcess(root).cleanup()
    acks = acks[1:]  # the first start warms the file cache
    walls = [
        await anyio.to_thread.run_sync(_cli_wall, runtime_dir, "tasks") for _ in range(reps + 1)
    ][1:]
    ms = [a * 1000 for a in acks]
    wall_ms = [w * 1000 for w in walls]
    result = Result(
        name="start-up",
        description="(old) hdspd spawn to first Ack; wall time of `hdsp tasks` on an empty daemon",
        hdsp={"first_ack": Figure.of(ms, "ms"), "hdsp_tasks": Figure.of(wall_ms, "ms")},
    )
    # Absolute targets (no baseline): reported as value/target <= 1.
    result.ratios["first_ack/300ms"] = (Figure.of(ms, "ms").median / 300, 1.0, "<=")
    result.ratios["hdsp_tasks/250ms"] = (Figure.of(wall_ms, "ms").median / 250, 1.0, "<=")
    return result


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> list[Result]:
    return [await run_fair(quick=quick), await run_old(runtime_dir, quick=quick)]
