"""A disk that fills up, through the real daemon: it stays up, refuses new work
with storage_unavailable, tells every client, publishes nothing it has not
committed, and takes work again by itself once there is space; started on a full
disk, it serves reads.

Two ways to fill the disk: a small tmpfs as the data dir (mount needs root; the
test is skipped without it) and RLIMIT_FSIZE on the daemon (writes past the limit
fail with EFBIG, SQLite says "disk I/O error"; Python ignores SIGXFSZ), which
works anywhere."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
from collections.abc import Callable, Iterator

import anyio
import pytest

from hdsp.client import connect
from hdsp.protocol import (
    MessageEvent,
    StorageState,
    TaskCompleted,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.storage_reports import assert_service_resumes, follow, refused

pytestmark = pytest.mark.slow


class Tmpfs:
    """The data dir on a 16 MiB tmpfs; a filler file takes what is left."""

    name = "tmpfs"

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.filler = daemon.data_dir / "filler"
        daemon.data_dir.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(daemon.data_dir)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (1 << 20, 1 << 16, 1 << 12, 1 << 9):
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC
                        break
        finally:
            os.close(fd)

    def preexec(self) -> Callable[[], object] | None:
        self.fill()
        return None

    def free(self) -> None:
        self.filler.unlink()

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.daemon.data_dir)], check=False)


class FileSizeLimit:
    """RLIMIT_FSIZE on the daemon, just above the size of every file it writes."""

    name = "rlimit"

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon

    def _limit(self) -> int:
        files = [p for p in self.daemon.root.rglob("*") if p.is_file()]
        return max(p.stat().st_size for p in files) + 64 * 1024

    def fill(self) -> None:
        assert self.daemon.proc is not None
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.prlimit(self.daemon.proc.pid, resource.RLIMIT_FSIZE, (self._limit(), hard))

    def preexec(self) -> Callable[[], object] | None:
        # No room at all: any write past the database's files' ends fails. (The
        # daemon's log is far smaller, and keeps room to grow.)
        limit = max(p.stat().st_size for p in self.daemon.data_dir.iterdir() if p.is_file())
        assert self.daemon.stderr_path.stat().st_size + 64 * 1024 < limit
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    def free(self) -> None:
        assert self.daemon.proc is not None
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.prlimit(self.daemon.proc.pid, resource.RLIMIT_FSIZE, (hard, hard))

    def close(self) -> None:
        pass


Disk = Tmpfs | FileSizeLimit


@pytest.fixture(params=[Tmpfs, FileSizeLimit], ids=["tmpfs", "rlimit"])
def disk(request: pytest.FixtureRequest, daemon_process: DaemonProcess) -> Iterator[Disk]:
    made: Disk = request.param(daemon_process)
    try:
        yield made
    finally:
        if daemon_process.proc is not None and daemon_process.proc.poll() is None:
            daemon_process.kill()
        made.close()


async def test_a_full_disk_refuses_new_work_and_service_resumes_by_itself(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI, disk: Disk
) -> None:
    daemon = daemon_process
    daemon.start()
    async with connect(daemon.runtime_dir) as c, follow(daemon.runtime_dir) as f:
        first = await c.start_task("before the disk fills")
        await collect_turn(c, first.task_id, 0, until=(TaskCompleted,))
        disk.fill()
        # Accepted (its commit is queued), then the commit fails for want of space.
        big = await c.start_task("a long task text " * 25_000)
        with anyio.fail_after(20):
            failing = await f.reports.receive()
        assert failing.state is StorageState.FAILING and failing.reason and failing.advice
        assert daemon.proc is not None and daemon.proc.poll() is None
        await c.ping()
        refusal = await refused(lambda: c.start_task("refused while the disk is full"))
        assert "Free space" in refusal.message
        await refused(lambda: c.send_message(first.task_id, "refused too"))
        status = await c.status()
        assert status.storage is not None and status.storage.state is StorageState.FAILING
        # Reads go on.
        assert (await c.get_task(first.task_id)).item.id == first.task_id
        assert first.task_id in [t.id for t in (await c.list_tasks()).tasks]
        assert (await c.replay(0)).events
        disk.free()
        _, checked = await assert_service_resumes(c, f, big.task_id, "after the disk was freed")
    print(f"disk full ({disk.name}): {checked} events seen and found in the log")


async def test_start_up_on_a_full_disk_serves_reads(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI, disk: Disk
) -> None:
    daemon = daemon_process
    daemon.start()
    fake_openai.script(FakeReply.text("done"), FakeReply.text("never finished " * 50).hang_after(5))
    async with connect(daemon.runtime_dir) as c:
        done = await c.start_task("finishes")
        await collect_turn(c, done.task_id, 0, until=(TaskCompleted,))
        cut = await c.start_task("cut off by a crash")
        await collect_turn(c, cut.task_id, 0, until=(MessageEvent,))
    daemon.kill()
    daemon.start(preexec_fn=disk.preexec())
    async with connect(daemon.runtime_dir) as c, follow(daemon.runtime_dir) as f:
        # Picking up the cut-off task needs writes, which fail: new work is refused...
        await refused(lambda: c.start_task("refused: no space"))
        status = await c.status()
        assert status.storage is not None and status.storage.state is StorageState.FAILING
        # ...and reads are served.
        snap = await c.get_task(done.task_id)
        assert snap.state == "completed"
        assert {t.id for t in (await c.list_tasks()).tasks} == {done.task_id, cut.task_id}
        assert (await c.replay(0)).events
        fake_openai.script(FakeReply.text("resumed"))
        disk.free()
        with anyio.fail_after(20):
            # (The failure may have been announced before this client followed;
            # the recovery is durable, so it comes either way.)
            while (await f.reports.receive()).state is not StorageState.OK:
                pass
        await c.resume_task(cut.task_id)
        with anyio.fail_after(30):
            await collect_turn(c, cut.task_id, 0, until=(TaskCompleted,))
