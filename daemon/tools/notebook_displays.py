"""Displays shown across the cells of a notebook: a display made in one cell and
updated from another (`handle = display(x, display_id=True)`, then
`handle.update(y)` in a later cell) shows the new data where it was made.

Jupyter updates a display wherever it is shown, and nbclient applies that to a
notebook it runs: it remembers which outputs of which cells showed each display
id, and rewrites them on every later message that carries the id. The notebook
tools do the same for the cells a task runs: `NotebookDisplays` remembers, per
task and notebook, the outputs (cell id and output index) that show each display
id, and `apply` writes an execution's `display_updates` into those of other
cells before the cell's new outputs are registered. A cell that runs again
forgets what it showed before, and a remembered output that is no longer a
display (the cell was edited or cleared since) is left alone. It does so for a
notebook open in JupyterLab too (the notebook tools' live route), on the cells
of the open document.

A display id is transient: the notebook file does not keep it, so what is
remembered lasts as long as the daemon runs, as nbclient's lasts a run.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from hdsp.protocol import ExecutionResult

__all__ = ["NotebookDisplays"]

#: Output types that show a display (and so may carry a display id).
_DISPLAYS = ("display_data", "execute_result")

#: display id -> cell id -> indexes of that cell's outputs showing it.
_Shown = dict[str, dict[str, list[int]]]


class NotebookDisplays:
    """Which outputs show each display id, per task and notebook (bounded: the
    least recently run notebooks are forgotten first)."""

    def __init__(self, max_notebooks: int = 1024) -> None:
        self._notebooks: OrderedDict[tuple[str, str], _Shown] = OrderedDict()
        self._max = max_notebooks

    def apply(
        self, task_id: str, notebook: str, nb: Any, index: int, result: ExecutionResult
    ) -> int:
        """`nb`'s cell `index` has just been given `result`'s outputs: show the
        execution's display updates in the other cells of `nb` (changed in place)
        and remember the displays the cell shows now. Returns how many outputs of
        other cells were rewritten."""
        return sum(self.rewrite(task_id, notebook, nb, index, result).values())

    def rewrite(
        self, task_id: str, notebook: str, nb: Any, index: int, result: ExecutionResult
    ) -> dict[str, int]:
        """As `apply`; returns the ids of the other cells rewritten, each with how
        many of its outputs were (for a notebook open elsewhere, whose cells are
        then set one by one)."""
        key = (task_id, notebook)
        shown = self._notebooks.pop(key, {})
        self._notebooks[key] = shown
        while len(self._notebooks) > self._max:
            self._notebooks.popitem(last=False)
        cell_id = str(nb.cells[index].get("id") or "")
        for cells in shown.values():
            cells.pop(cell_id, None)
        cells_by_id = {str(c.get("id") or ""): c for c in nb.cells}
        rewritten: dict[str, int] = {}
        for update in result.display_updates:
            if update.display_id is None:
                continue
            for other, indexes in shown.get(update.display_id, {}).items():
                cell = cells_by_id.get(other)
                outputs = cell.get("outputs") if cell is not None else None
                for i in indexes:
                    if outputs and i < len(outputs) and outputs[i].get("output_type") in _DISPLAYS:
                        outputs[i]["data"] = _node(update.data or {})
                        outputs[i]["metadata"] = _node(update.metadata or {})
                        rewritten[other] = rewritten.get(other, 0) + 1
        for i, out in enumerate(result.outputs):
            if out.display_id is not None and out.output_type in _DISPLAYS and cell_id:
                shown.setdefault(out.display_id, {}).setdefault(cell_id, []).append(i)
        for display_id in [d for d, cells in shown.items() if not any(cells.values())]:
            del shown[display_id]
        return rewritten


def _node(value: dict[str, Any]) -> Any:
    """`value` as nbformat keeps a mime bundle (a NotebookNode)."""
    import nbformat

    nbf: Any = nbformat  # (nbformat's functions carry no annotations)
    return nbf.from_dict(value)
