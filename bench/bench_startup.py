"""Start-up: `hdspd` start to the first Ack, and the wall time of `hdsp tasks`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio

from hdsp.client import connect
from tests.support.daemon_process import DaemonProcess, short_tmp_dir

from .harness import Figure, Result

__all__ = ["run"]


async def _first_ack(root: Path) -> float:
    """Seconds from spawning hdspd to the first Ack of a client."""
    proc = DaemonProcess(root)
    t0 = time.perf_counter()
    proc.start()
    async with connect(proc.runtime_dir, name="bench"):
        elapsed = time.perf_counter() - t0
    proc.stop()
    return elapsed


def _cli_wall(runtime_dir: Path) -> float:
    env = os.environ | {"HDSP_RUNTIME_DIR": str(runtime_dir)}
    t0 = time.perf_counter()
    subprocess.run(
        [str(Path(sys.executable).parent / "hdsp"), "tasks"],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - t0


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    reps = 2 if quick else 7
    acks: list[float] = []
    for _ in range(reps + 1):
        root = short_tmp_dir()
        try:
            acks.append(await _first_ack(root))
        finally:
            DaemonProcess(root).cleanup()
    acks = acks[1:]  # the first start warms the file cache
    walls = [await anyio.to_thread.run_sync(_cli_wall, runtime_dir) for _ in range(reps + 1)][1:]
    ms = [a * 1000 for a in acks]
    wall_ms = [w * 1000 for w in walls]
    result = Result(
        name="start-up",
        description="hdspd spawn to first Ack; wall time of `hdsp tasks`",
        hdsp={"first_ack": Figure.of(ms, "ms"), "hdsp_tasks": Figure.of(wall_ms, "ms")},
    )
    # Absolute targets (no baseline): reported as value/target <= 1.
    result.ratios["first_ack/300ms"] = (Figure.of(ms, "ms").median / 300, 1.0, "<=")
    result.ratios["hdsp_tasks/250ms"] = (Figure.of(wall_ms, "ms").median / 250, 1.0, "<=")
    return result
