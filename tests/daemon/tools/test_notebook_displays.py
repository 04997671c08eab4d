"""Displays across the cells of a notebook: what `NotebookDisplays` rewrites and
what it forgets (the whole path, with nbclient as the reference, is in
test_nbclient_reference.py)."""

from __future__ import annotations

from typing import Any

import nbformat

from hdsp.daemon.tools.notebook_displays import NotebookDisplays
from hdsp.daemon.tools.notebook_tools import notebook_output
from hdsp.protocol import ExecutionResult, KernelOutput

_v4: Any = nbformat.v4


def _display(value: str, display_id: str | None, kind: str = "display_data") -> KernelOutput:
    return KernelOutput(
        output_type=kind,  # type: ignore[arg-type]
        data={"text/plain": value},
        metadata={},
        display_id=display_id,
    )


def _result(*outputs: KernelOutput, updates: tuple[KernelOutput, ...] = ()) -> ExecutionResult:
    return ExecutionResult(
        kernel_id="k",
        execution_id="e",
        status="ok",
        outputs=list(outputs),
        display_updates=list(updates),
    )


def _run(displays: NotebookDisplays, nb: Any, index: int, result: ExecutionResult) -> int:
    """What run_cell does: the cell gets the outputs, then the displays apply."""
    nb.cells[index].outputs = [notebook_output(o) for o in result.outputs]
    return displays.apply("task", "a.ipynb", nb, index, result)


def _shown(nb: Any, index: int) -> list[str]:
    return [o["data"]["text/plain"] for o in nb.cells[index].outputs]


def _notebook(cells: int) -> Any:
    nb = _v4.new_notebook()
    nb.cells = [_v4.new_code_cell(f"cell {i}") for i in range(cells)]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    return nb


def test_an_update_from_a_later_cell_rewrites_the_display_where_it_was_made() -> None:
    nb, displays = _notebook(3), NotebookDisplays()
    assert _run(displays, nb, 0, _result(_display("Hello", "id1"), _display("x", None))) == 0
    rewritten = _run(
        displays, nb, 1, _result(updates=(_display("world", "id1", "update_display_data"),))
    )
    assert rewritten == 1
    assert _shown(nb, 0) == ["world", "x"]
    # An execute_result shows a display too, and keeps its type.
    _run(displays, nb, 2, _result(_display("9", "result", "execute_result")))
    _run(displays, nb, 1, _result(updates=(_display("10", "result", "update_display_data"),)))
    assert nb.cells[2].outputs[0]["output_type"] == "execute_result"
    assert _shown(nb, 2) == ["10"]
    nbformat.validate(nb)


def test_a_cell_run_again_forgets_what_it_showed_before() -> None:
    nb, displays = _notebook(2), NotebookDisplays()
    _run(displays, nb, 0, _result(_display("a", "id1"), _display("b", "id2")))
    # Run again: now only a plain display, at the index the old id1 had.
    _run(displays, nb, 0, _result(_display("plain", None)))
    update = _result(updates=(_display("new", "id1", "update_display_data"),))
    assert _run(displays, nb, 1, update) == 0
    assert _shown(nb, 0) == ["plain"]


def test_outputs_gone_since_are_left_alone() -> None:
    nb, displays = _notebook(2), NotebookDisplays()
    _run(displays, nb, 0, _result(_display("a", "id1")))
    nb.cells[0].outputs = []  # edited: edit_cell clears a code cell's outputs
    update = _result(updates=(_display("new", "id1", "update_display_data"),))
    assert _run(displays, nb, 1, update) == 0
    del nb.cells[0]  # deleted: its id is nowhere
    assert displays.apply("task", "a.ipynb", nb, 0, update) == 0


def test_tasks_and_notebooks_do_not_share_displays() -> None:
    nb, displays = _notebook(2), NotebookDisplays()
    _run(displays, nb, 0, _result(_display("a", "id1")))
    update = _result(updates=(_display("new", "id1", "update_display_data"),))
    nb.cells[1].outputs = []
    assert displays.apply("other task", "a.ipynb", nb, 1, update) == 0
    assert displays.apply("task", "b.ipynb", nb, 1, update) == 0
    assert _shown(nb, 0) == ["a"]
