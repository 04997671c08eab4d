"""The checkpoint service with a real store, journal and git: what one diff
answer holds is bounded, and a checkpoint that cannot be written fails as one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from hdsp.daemon.checkpoints import CheckpointService, GitFailed
from hdsp.daemon.checkpoints import service as service_module
from hdsp.daemon.config import CheckpointSettings
from hdsp.daemon.store import Journal, Store


async def _drop(topic: bytes, body: bytes) -> None:
    pass


@asynccontextmanager
async def _service(tmp_path: Path) -> AsyncIterator[CheckpointService]:
    """The service over a real store and a running journal (data in tmp/data)."""
    async with Store.open(tmp_path / "db.sqlite3") as store:
        journal = Journal(store, _drop)
        async with anyio.create_task_group() as tg:
            await tg.start(journal.run)
            yield CheckpointService(
                store, journal, tmp_path / "data", lambda: CheckpointSettings(), lambda: 0
            )
            await journal.aclose()


async def test_a_diff_answer_holds_a_bounded_amount_of_diff_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_module, "DIFF_TOTAL_LIMIT", 1000)
    ws = tmp_path / "ws"
    ws.mkdir()
    names = [f"f{i}.txt" for i in range(5)]
    for name in names:
        (ws / name).write_text("")
    async with _service(tmp_path) as service:
        await service.save("t", ws, "one")
        for name in names:
            (ws / name).write_text("".join(f"line {i:04d} of {name}\n" for i in range(30)))
        diff = await service.diff("t", ws, 1, None)
    assert [f.path for f in diff.files] == names and {f.status for f in diff.files} == {"modified"}
    shown = [f for f in diff.files if "+line 0029" in f.diff]
    # Each file's diff is ~700 characters: two make the 1,000, the rest only a note.
    assert [f.path for f in shown] == names[:2]
    for f in diff.files[2:]:
        assert f.diff.startswith("[diff not shown: the files before it hold 1,000 characters")


async def test_a_checkpoint_that_cannot_be_written_fails_as_a_checkpoint_failure(
    tmp_path: Path,
) -> None:
    # (The data dir unusable: a file where its checkpoints folder should be, as a
    # full disk or a wrong permission would make it.) The caller says "no
    # checkpoint" and runs the call: it must get the error it handles, not OSError.
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "data").write_text("not a folder")
    async with _service(tmp_path) as service:
        with pytest.raises(GitFailed, match="could not be written"):
            await service.save("t", ws, "one")
        assert await service.checkpoints("t") == []
