"""A task's first code: what its first `execute_code` costs against an execution
on a warm kernel (issue 33).

The kernel service as the daemon runs it (a real bwrap sandbox, the default
`workspace-write` settings, the daemon's environment), in-process:

- hdsp (`first_execute`): a task starts in a workspace of its own (the first
  task there: no spare waits for it yet), the service is told so
  (`prewarm_for_task`, as the task manager does when a task starts), the model
  thinks for `_MODEL_FIRST_REPLY` seconds (a first reply with a tool call is
  rarely faster), then the task's first `execute("1+1")`: `kernel_for_task`
  and the execution, timed together;
- baseline (`warm_execute`): `execute("1+1")` on that kernel afterwards, each
  after the same pause (the model's next reply), the median of three: a kernel
  that sat idle answers its next request slower than one called back to back
  (its process descheduled, its caches cold), whether it ran code before or
  not; back to back (`warm_execute_back_to_back`) is shown too;
- also (`first_execute_without_pool`): the same first execution with the pool
  off (`kernels.pool_size 0`): the kernel's start is in it, as it was before.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path

import anyio

from hdsp.daemon.config.settings import SandboxSettings
from hdsp.daemon.kernels import KernelService
from hdsp.daemon.paths import Paths
from hdsp.daemon.sandbox import Sandbox
from hdsp.protocol import Event
from tests.support.daemon_process import short_tmp_dir

from .harness import Figure, Result

__all__ = ["run"]

#: Seconds between a task's start and its first execute_code (the model's first reply).
_MODEL_FIRST_REPLY = 2.0
_CODE = "1+1"


async def _ignore(event: Event) -> None:
    pass


async def _first(
    svc: KernelService, task_id: str, workspace: Path, *, pooled: bool, pause: float
) -> float:
    if pooled:
        svc.prewarm_for_task(task_id, workspace)
    await anyio.sleep(pause)
    t0 = time.perf_counter()
    kernel = await svc.kernel_for_task(task_id, workspace)
    result = await svc.execute(kernel.kernel_id, _CODE)
    elapsed = time.perf_counter() - t0
    assert result.status == "ok", result
    return elapsed


async def run(runtime_dir: Path, scratch: Path, *, quick: bool) -> Result:
    reps = 1 if quick else 5
    pause = 0.5 if quick else _MODEL_FIRST_REPLY  # (quick: the harness runs, no more)
    root = short_tmp_dir()
    settings = SandboxSettings()
    size = [1]
    sandbox = Sandbox(
        lambda: settings,
        paths=Paths(data_dir=root / "data", runtime_dir=root / "run"),
        environ=os.environ,
    )
    svc = KernelService(
        _ignore,
        runtime_dir=root / "k",
        launcher=sandbox,
        pool_size=lambda: size[0],
        launch_profile=lambda: settings.model_dump_json(),
    )
    first: list[float] = []
    cold: list[float] = []
    warm: list[float] = []
    back: list[float] = []
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(svc.run)
            try:
                for i in range(reps + 1):  # the first round warms the file cache
                    size[0] = 0
                    other = root / f"cold-{i}"
                    other.mkdir()
                    c = await _first(svc, f"c{i}", other, pooled=False, pause=pause)
                    await svc.release_task(f"c{i}")
                    size[0] = 1
                    workspace = root / f"ws-{i}"
                    workspace.mkdir()
                    f = await _first(svc, f"p{i}", workspace, pooled=True, pause=pause)
                    kernel = await svc.kernel_for_task(f"p{i}", workspace)
                    w = []
                    for _ in range(3):
                        await anyio.sleep(pause)
                        t0 = time.perf_counter()
                        await svc.execute(kernel.kernel_id, _CODE)
                        w.append(time.perf_counter() - t0)
                    b = []
                    for _ in range(5):
                        t0 = time.perf_counter()
                        await svc.execute(kernel.kernel_id, _CODE)
                        b.append(time.perf_counter() - t0)
                    await svc.release_task(f"p{i}")
                    # The spare that replaced the one taken: started before the next round.
                    with anyio.fail_after(120):
                        while svc.pool.started < 2 * (i + 1):  # noqa: ASYNC110 (a bench: polled)
                            await anyio.sleep(0.05)
                    if i:
                        first.append(f)
                        warm.append(statistics.median(w))
                        back.append(statistics.median(b))
                        cold.append(c)
            finally:
                with anyio.move_on_after(60, shield=True):
                    await svc.aclose()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    samples = {"f": first, "w": warm, "c": cold, "b": back}
    ms = {k: [s * 1000 for s in v] for k, v in samples.items()}
    med = statistics.median
    result = Result(
        name="first execution of a task",
        description=(
            "a new task's first execute('1+1') (kernel_for_task + execute) in a sandboxed "
            f"kernel, {pause:g} s after the task started (a spare kernel started "
            "then), vs execute('1+1') on that warm kernel after the same pause; also the first "
            "execution with the pool off (the kernel's start in it)"
        ),
        hdsp={
            "first_execute": Figure.of(ms["f"], "ms"),
            "first_execute_without_pool": Figure.of(ms["c"], "ms"),
        },
        baseline={
            "warm_execute": Figure.of(ms["w"], "ms"),
            "warm_execute_back_to_back": Figure.of(ms["b"], "ms"),
        },
    )
    result.ratios["first/warm"] = (med(ms["f"]) / med(ms["w"]), 1.5, "<=")
    result.ratios["without_pool/warm"] = (med(ms["c"]) / med(ms["w"]), float("inf"), "<=")
    return result
