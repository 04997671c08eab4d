"""A burst of tool calls: one model reply with 800 `read_file` calls on distinct
paths (issue 32, hole 5), and whether the daemon stays responsive meanwhile.

The benchmark starts its own `hdspd` with a ``default`` profile on the fake
OpenAI server of ``tests/fakes/openai_server.py`` (in this process, on its own
threads). The workspace holds 800 small CSV files (about 1 KB each). The fake's
script: one reply calling `read_file` on each of them; then, as a model would,
a reply asking again for the calls the daemon did not run (past its cap on
calls per reply, `tool_calls.max_per_reply`), until none are left; then
`attempt_completion`. Read-only calls are approved automatically.

Measured, all through the client library over the daemon's real sockets:

- the burst's wall time: from StartNewTask until its `taskCompleted` event
  (every one of the 800 reads done, in as many replies as the cap makes);
- a second client, connected before the burst, sends `Ping` one after another
  (5 ms apart) from StartNewTask until `taskCompleted`: p50 and p99 of their
  round trips are the `during` figures; the same client's pings on the idle
  daemon just before are the baseline;
- the daemon's resident memory (VmRSS of /proc/<pid>/status): before the burst
  (after a warm-up task), its maximum sampled every 20 ms during it, and after
  it, once the task has settled (taskCompleted, then 1 s for what follows it to
  commit).

Targets (the issue's): Ping p99 during the burst <= 50 ms, RSS after <= 1.2x
RSS before. Quick mode runs 200 calls.

`python -m bench.bench_burst [--quick]` runs it alone; `python -m bench burst`
in the suite's harness.

Figures when it was written (2 shared cores; other engineers' work made the
load average 3-9):

| | before (one reply, all 800 run) | after (cap 64: 13 replies), load 6-9 | after, load 3-4 |
|---|---|---|---|
| wall | 13.3 s (load 8) | 5.6-10.2 s | 3.9-4.1 s |
| Ping p50 / p99 | 59 ms / 2.88 s | 3.2-6.8 ms / 53-121 ms | 2.9-3.1 ms / 32-37 ms |
| RSS before / max / after | 138 / 466 / 306 MB (2.2x) | 138 / 156 / 155 MB (1.12x) | 138 / 156-158 / 155 MB (1.12x) |

Profiled before (py-spy): the loop spent ~80 % of its time in the journal's
scrubbing of turn-state writes, and most of the rest encoding them: every step
of every call saved the whole turn (800 calls with their results), O(n²)
bytes, held in the journal's queue (the RSS). Now concurrent steps share one
save per commit (tasks.turn_saves). What remains of the slow loop steps is per
model request and grows with the history: building the request (the provider's
message conversion and JSON encoding, tens of ms at a history of 800 results)
and the journal committing a batch on the loop.
"""

from __future__ import annotations

import json
import re
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from hdsp.client import Client, connect
from hdsp.protocol import TaskAborted, TaskCompleted, TaskIdle, TaskResumable
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.daemon_process import DaemonProcess, model_env, short_tmp_dir

from .harness import Figure, Result, percentile, table

__all__ = ["BurstModel", "measure", "run"]

CALLS = 800
QUICK_CALLS = 200
#: Seconds between one Ping's reply and the next Ping.
PING_GAP = 0.005
#: Seconds between two samples of the daemon's RSS.
RSS_GAP = 0.02
_ENDINGS = (TaskCompleted, TaskAborted, TaskIdle, TaskResumable)
_APPROVALS = {"always_allow_read_only": True}
#: What the daemon says of a call it did not run (past its cap on calls per reply).
_NOT_RUN = re.compile(r"not run", re.IGNORECASE)


class BurstModel:
    """The fake model's answers in the burst (a `FakeOpenAI.responder`): first a
    reply calling `read_file` on every path of `paths`, then, each time, the
    calls whose results said they were not run (a model asking again), then
    `attempt_completion`."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.replies_with_calls = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages: list[dict[str, Any]] = body.get("messages", [])
        if not any(m.get("role") == "tool" for m in messages):
            todo = list(self.paths)
        else:
            todo = _not_run(messages)
        if not todo:
            done = ToolCall("attempt_completion", json.dumps({"result": "all read"}))
            return Reply.tool_calls([done])
        self.replies_with_calls += 1
        calls = [ToolCall("read_file", json.dumps({"path": p})) for p in todo]
        return Reply.tool_calls(calls, fragment=4096)


def _not_run(messages: list[dict[str, Any]]) -> list[str]:
    """The paths of the last reply's calls whose results say they did not run."""
    last = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    paths = {
        c["id"]: json.loads(c["function"]["arguments"])["path"]
        for c in messages[last].get("tool_calls") or []
    }
    return [
        paths[m["tool_call_id"]]
        for m in messages[last + 1 :]
        if m.get("role") == "tool"
        and m.get("tool_call_id") in paths
        and _NOT_RUN.search(str(m.get("content")))
    ]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def workspace_files(root: Path, count: int) -> list[str]:
    """`count` small CSV files in `root`, on distinct paths; their names."""
    names = []
    for i in range(count):
        name = f"part_{i:04d}.csv"
        rows = "".join(f"{i},{j},{(i * j) % 97}\n" for j in range(100))
        (root / name).write_text("a,b,c\n" + rows)
        names.append(name)
    return names


async def _turn(client: Client, text: str, workspace: Path) -> tuple[str, str]:
    """Start a task and wait for the end of its turn: its id and how it ended."""
    head = (await client.status()).head_seq
    ref = await client.start_task(text, workspace=workspace, approvals=_APPROVALS)
    async with client.events(ref.task_id, since_seq=head) as events:
        async for event in events:
            if isinstance(event.data, _ENDINGS):
                return ref.task_id, type(event.data).__name__
    raise RuntimeError("the event stream ended early")


async def _pings(client: Client, until: anyio.Event, into: list[float]) -> None:
    while not until.is_set():
        started = time.perf_counter()
        await client.ping()
        into.append(time.perf_counter() - started)
        await anyio.sleep(PING_GAP)


async def _rss_samples(pid: int, until: anyio.Event, into: list[float]) -> None:
    while not until.is_set():
        into.append(rss_mb(pid))
        await anyio.sleep(RSS_GAP)


async def measure(calls: int, root: Path) -> dict[str, Any]:
    """One burst of `calls` read_file calls against a fresh daemon: its figures."""
    workspace = root / "ws"
    workspace.mkdir()
    warm = root / "warm"
    warm.mkdir()
    paths = workspace_files(workspace, calls)
    workspace_files(warm, 2)
    model = BurstModel(paths)
    with FakeOpenAI() as fake:
        fake.responder = model
        daemon = DaemonProcess(short_tmp_dir(), env=model_env(fake.base_url))
        try:
            daemon.start()
            assert daemon.proc is not None
            pid = daemon.proc.pid
            async with (
                connect(daemon.runtime_dir, name="bench-burst", timeout=600) as client,
                connect(daemon.runtime_dir, name="bench-pinger", timeout=600) as pinger,
            ):
                # Warm-up: a task of two reads (imports, the provider's client, caches).
                model.paths = ["part_0000.csv", "part_0001.csv"]
                await _turn(client, "read the parts", warm)
                model.paths = paths
                model.replies_with_calls = 0
                idle: list[float] = []
                for _ in range(200):
                    started = time.perf_counter()
                    await pinger.ping()
                    idle.append(time.perf_counter() - started)
                before = rss_mb(pid)
                during: list[float] = []
                samples: list[float] = []
                over = anyio.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_pings, pinger, over, during)
                    tg.start_soon(_rss_samples, pid, over, samples)
                    started = time.perf_counter()
                    _, ending = await _turn(client, "read every part", workspace)
                    wall = time.perf_counter() - started
                    over.set()
                await anyio.sleep(1.0)
                await pinger.ping()
                after = rss_mb(pid)
        finally:
            if daemon.proc is not None:
                daemon.stop()
            daemon.cleanup()
    return {
        "calls": calls,
        "ending": ending,
        "replies": model.replies_with_calls,
        "wall_s": wall,
        "idle_ping_s": idle,
        "ping_s": during,
        "rss_before_mb": before,
        "rss_max_mb": max([*samples, after]),
        "rss_after_mb": after,
    }


def _ms(samples: list[float]) -> Figure:
    return Figure.of([s * 1000 for s in samples], "ms", p99=True)


def result_of(got: dict[str, Any]) -> Result:
    during, idle = got["ping_s"], got["idle_ping_s"]
    one = Figure.of
    result = Result(
        name="tool-call burst",
        description=(
            f"one model reply calling read_file on {got['calls']} distinct paths (re-asking what the "
            "cap on calls per reply left out, until done): wall time StartNewTask -> "
            "taskCompleted, Ping round trips of another client throughout, the "
            "daemon's RSS before/max/after; baseline: the same client's Pings on the "
            f"idle daemon ({got['replies']} replies with calls, ended {got['ending']}; "
            f"{sum(p > 0.05 for p in during)} of {len(during)} pings over 50 ms)"
        ),
        hdsp={
            "wall": one([got["wall_s"]], "s"),
            "ping during": _ms(during),
            "rss before": one([got["rss_before_mb"]], "MB"),
            "rss max": one([got["rss_max_mb"]], "MB"),
            "rss after": one([got["rss_after_mb"]], "MB"),
        },
        baseline={"ping idle": _ms(idle)},
    )
    result.ratios["ping p99 ms"] = (percentile(during, 99) * 1000, 50.0, "<=")
    result.ratios["rss after/before"] = (got["rss_after_mb"] / got["rss_before_mb"], 1.2, "<=")
    return result


async def run(runtime_dir: Path, scratch: Path, *, quick: bool = False) -> Result:
    root = Path(short_tmp_dir())
    try:
        got = await measure(QUICK_CALLS if quick else CALLS, root)
    finally:
        DaemonProcess(root).cleanup()
    return result_of(got)


def main() -> None:
    quick = "--quick" in sys.argv
    result = anyio.run(partial(run, Path(), Path(), quick=quick))
    sys.stdout.write(table([result]))


if __name__ == "__main__":
    main()
