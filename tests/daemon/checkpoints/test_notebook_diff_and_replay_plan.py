"""A notebook's changes cell by cell, and which executions a replay runs."""

from __future__ import annotations

import nbformat

from hdsp.daemon.checkpoints import ExecutionRecord, notebook_diff, replay_plan


def _nb(*sources: str, outputs: str | None = None) -> bytes:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    if outputs is not None:
        nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=outputs)]
    return nbformat.writes(nb).encode()


def test_cells_added_removed_and_changed_read_as_cells() -> None:
    old = _nb("a = 1", "b = 2", "c = 3")
    new_nb = nbformat.reads(old.decode(), as_version=4)
    new_nb.cells[0].source = "a = 10"
    new_nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="10\n")]
    del new_nb.cells[1]
    new_nb.cells.append(nbformat.v4.new_code_cell("d = 4"))
    text = notebook_diff(old, nbformat.writes(new_nb).encode())
    assert text is not None
    assert "~ cell 0 (code) changed:" in text and "-a = 1" in text and "+a = 10" in text
    assert "outputs:" in text and "+10" in text
    assert "- cell 1 (code) removed:" in text and "- b = 2" in text
    assert "+ cell 2 (code) added:" in text and "+ d = 4" in text
    assert "execution_count" not in text and '"id"' not in text


def test_a_new_notebook_and_a_broken_one() -> None:
    assert "+ cell 0 (code) added:" in (notebook_diff(None, _nb("x = 1")) or "")
    assert notebook_diff(b"{not json", _nb("x")) is None


def _r(seq: int, count: int | None, status: str = "ok", kernel: str = "k1") -> ExecutionRecord:
    return ExecutionRecord(
        seq=seq, kernel_id=kernel, code=f"c{seq}", status=status, execution_count=count
    )


def test_the_replay_is_the_last_kernel_session() -> None:
    assert [r.seq for r in replay_plan([_r(1, 1), _r(2, 2), _r(3, 3)])] == [1, 2, 3]
    # A restart (the count starts over), a death, a new kernel, a replay's marker.
    assert [r.seq for r in replay_plan([_r(1, 1), _r(2, 2), _r(3, 1)])] == [3]
    assert [r.seq for r in replay_plan([_r(1, 1), _r(2, None, "died"), _r(3, 1)])] == [3]
    assert [r.seq for r in replay_plan([_r(1, 1), _r(2, 2, kernel="k2")])] == [2]
    assert [r.seq for r in replay_plan([_r(1, 5), _r(2, None, "session_start"), _r(3, 1)])] == [3]
    marked = ExecutionRecord(seq=1, kernel_id="k", code="# hdsp: no-replay\nx", status="ok")
    assert not marked.replayable and _r(1, 1).replayable
