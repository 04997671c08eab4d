"""The browser scenarios of live notebook edits (issue 17), as both routes run
them: through real-time collaboration (tests/jupyterlab/test_browser_live_edits_rtc.py)
and through the panel. What is shared is the story, not the browser steps: the
notebook the user builds, what the scripted model does, the code that holds the
kernel so a spec can look at a cell still running, and what the model must have
been told.

Scenario 1: "describe df": the agent lists the kernel's variables and describes
`df`, which only the notebook's kernel holds (the user built it there), and
answers with its real columns.
Scenario 2: "add a cell that plots df.x": the agent reads the notebook, inserts
a plot cell under the active cell (the user's first) and runs it.
Scenario 3: the agent inserts the cell, then prepares an edit of it while the
user types in it: the edit is a conflict, the user's text stays.
Scenario 4: the user closes the notebook while the agent prepares an insert: the
insert goes to the file, and the reopened notebook shows it.
Checkpoints (issue 20): the agent inserts a cell and runs it, unsaved; the
checkpoint before the insert, diffed with now, shows the cell; restored from the
panel, the open notebook shows the user's cells at once and the file matches it
(clients/jupyterlab/ui-tests/tests/live-checkpoints.spec.ts).
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import anyio
import nbformat

from hdsp.client import connect
from hdsp.protocol import KernelList, ListKernels
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply

__all__ = [
    "AGENT_EDIT",
    "CLOSED_INSERT",
    "NOTEBOOK",
    "PLOT_SOURCE",
    "SUM_SOURCE",
    "USER_CELLS",
    "USER_EDIT",
    "check_checkpoints_of_the_open_notebook",
    "check_described_in_the_notebooks_kernel",
    "checkpoint_script",
    "closed_notebook_script",
    "conflict_script",
    "describe_df_script",
    "insert_and_run_script",
    "kernel_hold",
    "tool_results",
    "write_notebook",
]

_v4: Any = nbformat.v4


def write_notebook(path: Path, *sources: str) -> None:
    """A notebook of code cells with `sources`, for the Python 3 kernel."""
    nb = _v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [_v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))


#: The notebook the user makes in the browser (in the workspace's root).
NOTEBOOK = "plots.ipynb"
#: The user's cells: the first builds `df` (the active cell when they ask), the
#: second is one of theirs the agent's cell must go above.
USER_CELLS = (
    "import pandas as pd\ndf = pd.DataFrame({'x': [3, 1, 4, 1, 5, 9, 2, 6]})\ndf.shape",
    "df.x.describe()",
)
#: The agent's plot cell (the semicolon keeps the Axes' repr out of the outputs).
PLOT_SOURCE = "df.x.plot(title='df.x');"
#: What the agent tries to make of its cell in scenario 3, and what the user
#: types into it meanwhile.
AGENT_EDIT = "df.x.plot(title='df.x', kind='bar');"
USER_EDIT = "df.x.cumsum().plot(title='mine');"
#: The cell the agent inserts in scenario 4 (after the notebook was closed).
CLOSED_INSERT = "df.x.max()"
#: The cell the agent inserts and runs before the user restores a checkpoint
#: (its output: 31).
SUM_SOURCE = "df.x.sum()"


def _call(name: str, **args: Any) -> FakeReply:
    return FakeReply.tool_calls([ToolCall(name, json.dumps(args))])


def _done(text: str) -> FakeReply:
    return _call("attempt_completion", result=text)


def describe_df_script() -> list[FakeReply]:
    """Scenario 1: list the kernel's variables, describe df, answer."""
    return [
        _call("list_variables"),
        FakeReply.tool_calls([ToolCall("describe_variable", json.dumps({"name": "df"}))]),
        _done("df is a pandas DataFrame of 8 rows and one column, x (int64)."),
    ]


def check_described_in_the_notebooks_kernel(
    fake: FakeOpenAI, hdsp_runtime_dir: Path, jupyter_runtime_dir: Path
) -> None:
    """After scenario 1: the model was told the user's df as the notebook's kernel
    holds it (its real column and values), and that kernel, Jupyter's (its
    connection file in Jupyter's runtime dir), is the only one hdsp knows: the
    task is bound to it and hdsp started none of its own."""
    listed, described = tool_results(fake, 2)
    assert "df: pandas.DataFrame, shape (8, 1)" in listed, listed
    assert "columns: x (int64)" in listed, listed
    assert "Error" not in listed and "NameError" not in described, described
    assert "3.875" in described  # df.x's mean, from describe()

    async def kernels() -> KernelList:
        async with connect(hdsp_runtime_dir) as client:
            found: KernelList = await client.request(ListKernels())
            return found

    [kernel] = anyio.run(kernels).kernels
    assert kernel.owned is False and len(kernel.task_ids) == 1, kernel
    assert kernel.connection_file is not None
    assert Path(kernel.connection_file).parent == jupyter_runtime_dir.resolve(), kernel


def insert_and_run_script() -> list[FakeReply]:
    """Scenario 2: read, insert the plot under cell 0, run it, done."""
    return [
        _call("read_notebook", path=NOTEBOOK),
        _call("insert_cell", path=NOTEBOOK, index=1, source=PLOT_SOURCE),
        _call("run_cell", path=NOTEBOOK, index=1),
        _done("Added a plot of df.x under your cell and ran it."),
    ]


def conflict_script(gate: threading.Event) -> list[FakeReply]:
    """Scenario 3: read, insert the plot under cell 0, then an edit of it held
    until `gate` (the user types meanwhile), done."""
    return [
        _call("read_notebook", path=NOTEBOOK),
        _call("insert_cell", path=NOTEBOOK, index=1, source=PLOT_SOURCE),
        _call("edit_cell", path=NOTEBOOK, index=1, source=AGENT_EDIT).held_after(0, gate),
        _done("Your version of the cell stays."),
    ]


def closed_notebook_script(gate: threading.Event) -> list[FakeReply]:
    """Scenario 4: read, then an insert at the end held until `gate` (the user
    closes the notebook meanwhile), done."""
    return [
        _call("read_notebook", path=NOTEBOOK),
        _call("insert_cell", path=NOTEBOOK, source=CLOSED_INSERT).held_after(0, gate),
        _done("Added the cell to the notebook's file."),
    ]


def checkpoint_script() -> list[FakeReply]:
    """Checkpoints: read, insert the sum under cell 0, run it, done (checkpoint 1
    is before the insert, 2 before the run)."""
    return [
        _call("read_notebook", path=NOTEBOOK),
        _call("insert_cell", path=NOTEBOOK, index=1, source=SUM_SOURCE),
        _call("run_cell", path=NOTEBOOK, index=1),
        _done("Added the sum of x under your cell."),
    ]


def check_checkpoints_of_the_open_notebook(hdsp_runtime_dir: Path, workspace: Path) -> None:
    """After the checkpoint spec: checkpoint 2 (before the run) kept the agent's
    cell and 3 (before the restore) its output, though neither was ever saved;
    the restore went through JupyterLab; the file holds the user's cells."""

    async def read() -> tuple[Any, Any, Any, str]:
        async with connect(hdsp_runtime_dir) as client:
            [task] = (await client.list_tasks()).tasks
            listed = await client.list_checkpoints(task.id)
            inserted = await client.diff_checkpoints(task.id, 1, 2)
            ran = await client.diff_checkpoints(task.id, 2, 3)
            page = await client.get_task_page(task.id)
            said = [m.text or "" for m in page.messages if m.say == "checkpoint_restored"]
            return listed, inserted, ran, said[-1]

    listed, inserted, ran, said = anyio.run(read)
    assert [c.reason for c in listed.checkpoints] == [
        "before insert_cell",
        "before run_cell",
        "before restoring checkpoint 1",
    ]
    # (Besides the notebook, JupyterLab's collaboration store may have changed.)
    [change] = [f for f in inserted.files if f.path == NOTEBOOK]
    assert change.notebook
    assert "+ cell 1 (code) added:" in change.diff and SUM_SOURCE in change.diff, change.diff
    [change] = [f for f in ran.files if f.path == NOTEBOOK]
    assert "~ cell 1 (code) changed:" in change.diff, change.diff
    assert re.search(r"^ *\+(np\.int64\()?31\)?$", change.diff, re.MULTILINE), change.diff
    assert f"restored and saved where JupyterLab has them open: {NOTEBOOK}" in said, said
    saved = json.loads((workspace / NOTEBOOK).read_text())
    assert ["".join(c["source"]) for c in saved["cells"]] == list(USER_CELLS)


def kernel_hold(release: Path, marker: str = PLOT_SOURCE) -> str:
    """Python for the notebook's kernel, run silently (no execution count, no
    history) before the task: the next cell whose source contains `marker`
    runs, its figures are displayed (matplotlib's inline backend shows them
    after the code, at `post_execute`), and then the kernel waits for the file
    `release` before it replies. Meanwhile the cell's outputs can only have come
    live. The hook takes itself off when it has held once."""
    return (
        "def _hdsp_test_hold(result):\n"
        "    import os, time\n"
        f"    if {marker!r} not in (result.info.raw_cell or ''):\n"
        "        return\n"
        "    get_ipython().events.unregister('post_run_cell', _hdsp_test_hold)\n"
        f"    while not os.path.exists({str(release)!r}):\n"
        "        time.sleep(0.05)\n"
        "get_ipython().events.register('post_run_cell', _hdsp_test_hold)\n"
    )


def tool_results(fake: FakeOpenAI, request: int | None = None) -> list[str]:
    """The tool results the model received, as of its `request`th request (0
    based; the last one by default), each as one string."""
    messages = fake.requests[-1 if request is None else request]["messages"]
    return [
        content if isinstance(content, str) else json.dumps(content)
        for content in (m["content"] for m in messages if m["role"] == "tool")
    ]
