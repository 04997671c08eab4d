"""Spare kernels (daemon/kernels/pool.py) with real sandboxed ipykernels: a task
takes a spare started when it started, a spare never carries anything from one
task to the next, and one started under other sandbox settings is never used."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from hdsp.daemon.config.settings import SandboxSettings
from hdsp.daemon.kernels import KernelService
from hdsp.daemon.memory import memory_short
from hdsp.daemon.paths import Paths
from hdsp.daemon.sandbox import Sandbox
from hdsp.protocol import KernelStarted
from tests.support.daemon_process import short_tmp_dir
from tests.support.kernel_helpers import EventRecorder, kernel_dir, running_service

pytestmark = pytest.mark.timeout(120)


def sandbox(tmp_path: Path, settings: list[SandboxSettings]) -> Sandbox:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    root = short_tmp_dir()
    return Sandbox(
        lambda: settings[0],
        paths=Paths(data_dir=root / "data", runtime_dir=root / "run"),
        environ={"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
    )


def _pooled(
    tmp_path: Path, settings: list[SandboxSettings]
) -> AbstractAsyncContextManager[tuple[KernelService, EventRecorder]]:
    """A kernel service that keeps one spare, sandboxed under `settings[0]`
    (a spare started under other settings is not taken)."""
    return running_service(
        launcher=sandbox(tmp_path, settings),
        pool_size=lambda: 1,
        launch_profile=lambda: settings[0].model_dump_json(),
    )


async def test_a_spare_kernel_carries_nothing_from_one_task_to_the_next(tmp_path: Path) -> None:
    settings = [SandboxSettings()]
    work = kernel_dir(tmp_path)
    async with _pooled(tmp_path, settings) as (svc, recorder):
        svc.prewarm_for_task("t1", work)
        first = await svc.kernel_for_task("t1", work)
        assert svc.pool.taken == 1
        r = await svc.execute(first.kernel_id, "x = 42\nopen('/tmp/left', 'w').write('x')")
        assert r.status == "ok", r
        await svc.release_task("t1")
        # The spare started when t1 took its own; t2 gets it, a kernel that ran nothing.
        second = await svc.kernel_for_task("t2", work)
        assert svc.pool.taken == 2
        assert second.kernel_id != first.kernel_id
        code = "import os\n('x' in dir(), os.path.exists('/tmp/left'))"
        r = await svc.execute(second.kernel_id, code)
        assert r.outputs[-1].data == {"text/plain": "(False, False)"}, r
        assert r.execution_count == 1, "a spare must never have run code"
        # A spare is hidden until a task takes it; once taken it is announced
        # with its task, as a kernel started for the task is.
        listed = [k.kernel_id for k in svc.list_kernels()]
        assert listed == [second.kernel_id]
        started = recorder.of_type(KernelStarted)
        assert [(e.payload[0].kernel_id, e.payload[0].task_ids) for e in started] == [
            (first.kernel_id, ["t1"]),
            (second.kernel_id, ["t2"]),
        ]


async def test_a_spare_started_under_other_sandbox_settings_is_not_used(tmp_path: Path) -> None:
    settings = [SandboxSettings()]
    work = kernel_dir(tmp_path)
    async with _pooled(tmp_path, settings) as (svc, _):
        svc.prewarm_for_task("t1", work)
        settings[0] = SandboxSettings(network=True)
        task = await svc.kernel_for_task("t1", work)
        assert svc.pool.taken == 0
        assert [k.kernel_id for k in svc.list_kernels()] == [task.kernel_id]
        other = tmp_path / "elsewhere"
        other.mkdir()
        elsewhere = await svc.kernel_for_task("t2", other)  # another workspace: its own
        assert svc.pool.taken == 0 and elsewhere.cwd == str(other)


async def test_no_spare_is_started_when_the_pool_is_off(tmp_path: Path) -> None:
    settings = [SandboxSettings()]
    async with running_service(launcher=sandbox(tmp_path, settings)) as (svc, _):
        svc.prewarm_for_task("t1", kernel_dir(tmp_path))
        await svc.kernel_for_task("t1", kernel_dir(tmp_path))
        assert (svc.pool.started, svc.pool.taken) == (0, 0)
        assert svc.statistics()["kernels"] == 1


def test_memory_is_short_below_a_gigabyte_or_a_tenth(tmp_path: Path) -> None:
    def meminfo(total_kb: int, available_kb: int) -> str:
        path = tmp_path / f"meminfo-{total_kb}-{available_kb}"
        path.write_text(
            f"MemTotal:       {total_kb} kB\nMemFree:  1 kB\nMemAvailable:   {available_kb} kB\n"
        )
        return str(path)

    gib = 1024 * 1024
    assert not memory_short(meminfo(16 * gib, 8 * gib))
    assert memory_short(meminfo(16 * gib, gib // 2))  # under 1 GiB
    assert memory_short(meminfo(64 * gib, 5 * gib))  # under a tenth
    assert not memory_short(str(tmp_path / "absent"))  # not Linux: unknown, not short
