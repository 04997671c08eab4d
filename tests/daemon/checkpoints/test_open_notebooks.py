"""Checkpoints of notebooks open in JupyterLab, with the real service, store,
journal and git, and a document host that holds the notebook as the server
extension does (a jupyter_ydoc shared document, the extension's own code
answering): a checkpoint keeps what the open document shows, unsaved changes
included, and leaves the file alone; a restore replaces the open document and
has the host save it; a host that does not answer or save leaves the file to the
daemon, said in a note; and whatever a model makes of the workspace (links, a
notebook outside it), no notebook's content reaches another's document."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest

from hdsp.daemon.checkpoints import CheckpointService
from hdsp.daemon.checkpoints import open_notebooks as open_module
from hdsp.daemon.checkpoints.service import RestoredFiles
from hdsp.daemon.config import CheckpointSettings
from hdsp.daemon.store import Journal, Store
from hdsp.protocol import CheckpointInfo, DocumentEdit
from tests.support.live_edit_scenarios import write_notebook
from tests.support.shared_notebook_host import SharedNotebookHost

_v4: Any = nbformat.v4


async def _drop(topic: bytes, body: bytes) -> None:
    pass


def _write(path: Path, *sources: str, trusted: bool = False) -> None:
    write_notebook(path, *sources)
    if trusted:
        # (What a model could write: a file claiming its cells are trusted. nbformat
        # drops the flag as it writes, so it is set in the JSON.)
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            cell["metadata"]["trusted"] = True
        path.write_text(json.dumps(nb))


def _sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(str(path), as_version=4).cells]


@dataclass
class Setup:
    service: CheckpointService
    host: SharedNotebookHost
    workspace: Path

    def declare(self, *paths: str | Path) -> None:
        self.host.hosts.declare("rtc-test", "rtc", [str(p) for p in paths], 60)

    def ops(self) -> list[tuple[str, str]]:
        return [(r.edit.op, r.path) for r in self.host.requests]

    async def restore(self, info: CheckpointInfo) -> RestoredFiles:
        """Restore the files of task "t" to checkpoint `info`."""
        return await self.service.restore_files("t", self.workspace, info, None)


@asynccontextmanager
async def _open(tmp_path: Path, notebook: str = "plots.ipynb") -> AsyncIterator[Setup]:
    """The service over a real store, with a host holding `notebook` (of the
    workspace tmp/ws, written first by the caller) open and declared."""
    ws = (tmp_path / "ws").resolve()
    host = SharedNotebookHost(ws / notebook)
    async with Store.open(tmp_path / "db.sqlite3") as store:
        journal = Journal(store, _drop)
        async with anyio.create_task_group() as tg:
            await tg.start(journal.run)
            tg.start_soon(host.serve)
            service = CheckpointService(
                store,
                journal,
                tmp_path / "data",
                lambda: CheckpointSettings(),
                lambda: 0,
                documents=host.hosts,
            )
            setup = Setup(service, host, ws)
            setup.declare(ws / notebook)
            with anyio.fail_after(60):
                yield setup
            await journal.aclose()
            tg.cancel_scope.cancel()


def _agent_inserts(host: SharedNotebookHost, source: str) -> None:
    """An edit the agent made live: in the open document, not in the file."""
    host.ynb.ycells.append(host.ynb.create_ycell({"cell_type": "code", "source": source}))


@asynccontextmanager
async def _checkpoint_then_saved_agent_cell(
    tmp_path: Path, ws: Path
) -> AsyncIterator[tuple[Setup, CheckpointInfo]]:
    """plots.ipynb (`a = 1`) open, its checkpoint "one", then a cell the agent
    inserted in the open document, which the user saved."""
    _write(ws / "plots.ipynb", "a = 1")
    async with _open(tmp_path) as s:
        first = await s.service.save("t", ws, "one")
        _agent_inserts(s.host, "x = 2")
        s.host.save(ws / "plots.ipynb")
        yield s, first


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


async def test_a_checkpoint_keeps_the_open_document_and_leaves_the_file_alone(
    tmp_path: Path, ws: Path
) -> None:
    _write(ws / "plots.ipynb", "a = 1")
    async with _open(tmp_path) as s:
        first = await s.service.save("t", ws, "one")
        before = (ws / "plots.ipynb").read_bytes(), (ws / "plots.ipynb").stat().st_mtime_ns
        _agent_inserts(s.host, "df.x.plot()")
        second = await s.service.save("t", ws, "two")
        # The file is as it was: saving stays the user's business.
        after = (ws / "plots.ipynb").read_bytes(), (ws / "plots.ipynb").stat().st_mtime_ns
        assert after == before
        assert second.changed == ["plots.ipynb"] and second.commit != first.commit
        diff = await s.service.diff("t", ws, 1, 2)
        [change] = diff.files
        assert change.notebook and "+ cell 1 (code) added:" in change.diff
        assert "df.x.plot()" in change.diff
        # Nothing changed since: no new commit, however the file differs.
        third = await s.service.save("t", ws, "three")
        assert third.changed == [] and third.commit == second.commit
        assert [op for op, _ in s.ops()] == ["snapshot"] * 3  # (a diff of 1 to 2 asks none)


async def test_a_restore_replaces_the_open_document_and_the_host_saves_it(
    tmp_path: Path, ws: Path
) -> None:
    _write(ws / "plots.ipynb", "a = 1", "b = 2")
    (ws / "data.csv").write_text("x\n1\n")
    async with _open(tmp_path) as s:
        first = await s.service.save("t", ws, "before the agent")
        _agent_inserts(s.host, "df.x.plot()")
        (ws / "data.csv").write_text("overwritten\n")
        await s.service.save("t", ws, "after the agent")

        restored = await s.restore(first)
        assert restored.files == ["data.csv", "plots.ipynb"]
        assert restored.open_notebooks == ["plots.ipynb"] and restored.notes == []
        # The open document shows the checkpoint's cells, and its save wrote them.
        assert s.host.sources() == ["a = 1", "b = 2"]
        assert _sources(ws / "plots.ipynb") == ["a = 1", "b = 2"]
        assert (ws / "data.csv").read_text() == "x\n1\n"
        assert [op for op, _ in s.ops()][-1] == "replace"
        # The undo checkpoint kept the agent's unsaved cell: restoring it brings it back.
        undo = await s.restore(restored.undo)
        assert undo.open_notebooks == ["plots.ipynb"]
        assert s.host.sources() == ["a = 1", "b = 2", "df.x.plot()"]
        assert _sources(ws / "plots.ipynb") == ["a = 1", "b = 2", "df.x.plot()"]


async def test_an_open_notebook_whose_file_lags_behind_is_saved_by_a_restore(
    tmp_path: Path, ws: Path
) -> None:
    # The open document is the checkpoint's already, its file is not (the user
    # undid the agent's cell by hand, unsaved): the restore has the host save it.
    async with _checkpoint_then_saved_agent_cell(tmp_path, ws) as (s, first):
        del s.host.ynb.ycells[1]  # (and then took it out, unsaved)
        restored = await s.restore(first)
        assert restored.open_notebooks == ["plots.ipynb"]
        assert _sources(ws / "plots.ipynb") == ["a = 1"] == s.host.sources()


async def test_a_host_that_does_not_save_leaves_the_file_to_the_daemon_with_a_note(
    tmp_path: Path, ws: Path
) -> None:
    async with _checkpoint_then_saved_agent_cell(tmp_path, ws) as (s, first):
        s.host.saves = False
        restored = await s.restore(first)
        assert restored.open_notebooks == []
        [note] = restored.notes
        assert (
            "plots.ipynb is open in JupyterLab, which showed the restore but did not save" in note
        )
        # The file holds the checkpoint all the same.
        assert _sources(ws / "plots.ipynb") == ["a = 1"]


async def test_a_host_that_does_not_answer_costs_one_wait_and_the_file_is_used(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(open_module, "SNAPSHOT_ANSWER_LIMIT", 0.5)
    _write(ws / "plots.ipynb", "a = 1")
    async with _open(tmp_path) as s:
        s.host.silent = True
        info = await s.service.save("t", ws, "one")
        [note] = info.notes
        assert "plots.ipynb is open in JupyterLab, which did not give its cells" in note
        assert "its file was kept instead" in note
        # The host was forgotten: the next checkpoint asks nobody.
        asked = len(s.host.requests)
        _write(ws / "plots.ipynb", "a = 2")
        second = await s.service.save("t", ws, "two")
        assert second.notes == [] and len(s.host.requests) == asked
        restored = await s.restore(info)
        assert restored.open_notebooks == [] and _sources(ws / "plots.ipynb") == ["a = 1"]


async def test_a_notebook_not_open_is_checkpointed_and_restored_in_its_file(
    tmp_path: Path, ws: Path
) -> None:
    _write(ws / "plots.ipynb", "a = 1")
    _write(ws / "closed.ipynb", "c = 1")
    async with _open(tmp_path) as s:
        first = await s.service.save("t", ws, "one")
        _write(ws / "closed.ipynb", "c = 2")
        second = await s.service.save("t", ws, "two")
        assert second.changed == ["closed.ipynb"]
        restored = await s.restore(first)
        assert restored.files == ["closed.ipynb"] and restored.open_notebooks == []
        assert _sources(ws / "closed.ipynb") == ["c = 1"]
        assert all(path != str(ws / "closed.ipynb") for _, path in s.ops())


async def test_a_restore_sends_no_notebook_into_another_notebooks_document(
    tmp_path: Path, ws: Path
) -> None:
    # The host holds b.ipynb open. A model makes a.ipynb a link to b.ipynb: a
    # restore of a.ipynb writes a.ipynb (the link replaced by the file), and
    # never sends a.ipynb's cells to b's document.
    _write(ws / "a.ipynb", "secret = 'a'")
    _write(ws / "b.ipynb", "b = 1")
    async with _open(tmp_path, "b.ipynb") as s:
        first = await s.service.save("t", ws, "one")
        (ws / "a.ipynb").unlink()
        os.symlink("b.ipynb", ws / "a.ipynb")
        await s.service.save("t", ws, "two")
        restored = await s.restore(first)
        assert restored.files == ["a.ipynb"] and restored.open_notebooks == []
        assert not (ws / "a.ipynb").is_symlink()
        assert _sources(ws / "a.ipynb") == ["secret = 'a'"]
        assert s.host.sources() == ["b = 1"] and _sources(ws / "b.ipynb") == ["b = 1"]
        assert "replace" not in [op for op, _ in s.ops()]


async def test_notebooks_declared_outside_the_workspace_or_through_a_link_are_left_alone(
    tmp_path: Path, ws: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    _write(outside / "theirs.ipynb", "theirs = 1")
    (ws / "sub").mkdir()
    _write(ws / "sub" / "plots.ipynb", "a = 1")
    os.symlink("sub", ws / "link")
    os.symlink(outside, ws / "out")
    async with _open(tmp_path, "sub/plots.ipynb") as s:
        # Declared as a host may: a notebook outside the workspace, and paths that
        # go through links (into the workspace and out of it) or that are not
        # the notebook's own.
        s.declare(
            outside / "theirs.ipynb",
            ws / "out" / "theirs.ipynb",
            ws / "link" / "plots.ipynb",
            f"{ws}/sub/../sub/plots.ipynb",
        )
        first = await s.service.save("t", ws, "one")
        _write(outside / "theirs.ipynb", "changed = 1")
        await s.service.save("t", ws, "two")
        await s.restore(first)
        # Nothing of these was read or written, through the host or on disk.
        assert s.ops() == []
        assert _sources(outside / "theirs.ipynb") == ["changed = 1"]


async def test_restored_cells_reach_jupyterlab_untrusted_and_checkpoints_keep_no_trust(
    tmp_path: Path, ws: Path
) -> None:
    # A model wrote a notebook claiming its cells are trusted (JupyterLab would
    # render their HTML and run their JavaScript), checkpointed closed; the user
    # opened it since.
    _write(ws / "plots.ipynb", "a = 1", trusted=True)
    async with _open(tmp_path) as s:
        s.declare()  # (not open yet)
        first = await s.service.save("t", ws, "one")
        repo = s.service._repo(ws)[0]
        assert b'"trusted": true' in (await repo.show(first.commit, "plots.ipynb") or b"")
        s.declare(ws / "plots.ipynb")
        _agent_inserts(s.host, "x = 2")
        await s.restore(first)
        [replace] = [r for r in s.host.requests if r.edit.op == "replace"]
        assert replace.edit.notebook is not None
        assert all("trusted" not in c["metadata"] for c in replace.edit.notebook["cells"])
        assert not any(c.get("metadata", {}).get("trusted") for c in s.host.ynb.get()["cells"])
        # A document with trusted cells (as JupyterLab marks the ones its server
        # trusts) gives a checkpoint no trust: it is kept as a file is written.
        s.host.ynb.ycells[0]["metadata"]["trusted"] = True
        _agent_inserts(s.host, "y = 3")
        third = await s.service.save("t", ws, "three")
        assert b"trusted" not in (await repo.show(third.commit, "plots.ipynb") or b"trusted")


async def test_a_snapshot_and_a_replace_are_the_whole_notebook(tmp_path: Path, ws: Path) -> None:
    # (The server extension's own answers, as the daemon reads them.)
    _write(ws / "plots.ipynb", "a = 1")
    async with _open(tmp_path) as s:
        host = s.host.hosts.host_for(str(ws / "plots.ipynb"))
        assert host is not None
        answer = await s.host.hosts.request(
            host, str(ws / "plots.ipynb"), DocumentEdit(op="snapshot"), expires_in=10
        )
        assert answer.status == "ok" and answer.notebook is not None
        assert answer.notebook["metadata"]["kernelspec"]["name"] == "python3"
        bad = await s.host.hosts.request(
            host, str(ws / "plots.ipynb"), DocumentEdit(op="replace"), expires_in=10
        )
        assert bad.status == "invalid" and s.host.sources() == ["a = 1"]


async def test_a_host_older_than_checkpoints_leaves_the_notebook_to_its_file(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server extension from before `snapshot` and `replace` answers them as
    # it answers any edit of a cell it cannot find: a conflict.
    from hdsp.client.jupyterlab import shared_notebooks
    from tests.support import shared_notebook_host

    async def older(ynb: Any, edit: DocumentEdit, save: Any) -> Any:
        return (*shared_notebooks.apply_edit(ynb, edit), None)

    monkeypatch.setattr(shared_notebook_host, "serve_edit", older)
    _write(ws / "plots.ipynb", "a = 1")
    async with _open(tmp_path) as s:
        first = await s.service.save("t", ws, "one")
        assert any("which gave no notebook for it: its file was kept" in n for n in first.notes)
        _write(ws / "plots.ipynb", "a = 2")
        restored = await s.restore(first)
        assert restored.open_notebooks == [] and _sources(ws / "plots.ipynb") == ["a = 1"]
        [note] = restored.notes
        assert "plots.ipynb is open in JupyterLab, which did not take the restore" in note


async def test_an_open_notebook_the_restore_removes_is_said_to_be_still_open(
    tmp_path: Path, ws: Path
) -> None:
    # The notebook did not exist at the checkpoint: the restore removes its file
    # (the host cannot close a window), and says JupyterLab still shows it.
    (ws / "data.csv").write_text("x\n")
    _write(ws / "new.ipynb", "n = 1")
    async with _open(tmp_path, "new.ipynb") as s:
        s.declare()
        (ws / "new.ipynb").unlink()
        first = await s.service.save("t", ws, "before the notebook")
        _write(ws / "new.ipynb", "n = 1")
        s.declare(ws / "new.ipynb")
        await s.service.save("t", ws, "with it")
        restored = await s.restore(first)
        assert restored.files == ["new.ipynb"] and restored.open_notebooks == []
        assert not (ws / "new.ipynb").exists()
        [note] = restored.notes
        assert "new.ipynb was no notebook file at checkpoint 1" in note
        assert "JupyterLab still shows it open (close it there without saving)" in note
        assert "replace" not in [op for op, _ in s.ops()]
