"""Live edits through the panel (issue 17, without real-time collaboration), in a
real browser: JupyterLab as if jupyter-collaboration were not installed (its
server extension not loaded, its JupyterLab extensions disabled), so the server
extension is no document host and each window's panel is: it declares the notebooks open in its window and applies the
agent's edits to their notebook models. A real hdspd runs the task against the
scripted model; the specs are clients/jupyterlab/ui-tests/tests/live-edits-panel-*.

Scenarios (the issue's numbers): (1) "describe df" lists the variables of the
notebook's own kernel, where the user built df, and answers with its real
columns (the spec and the story are shared with the RTC route's test); (2) a cell inserted under the active cell and
run shows its plot in the open notebook, with no "file changed on disk" dialog,
and the saved file matches; (3) a cell the user edits while the agent prepares
an edit of it is a conflict the model is told of; (4) a notebook closed mid-task
is edited in its file, and opening it again shows the edit. Checkpoints (issue
20): a checkpoint keeps the agent's unsaved cell, and a restore from the panel
shows in the open notebook at once and is saved by the window.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.jupyterlab.test_browser import Spec, call, done, galata_lab, spec
from tests.support.daemon_process import DaemonProcess, call_failed
from tests.support.jupyter_process import JupyterProcess
from tests.support.live_edit_scenarios import (
    NOTEBOOK,
    SUM_SOURCE,
    USER_CELLS,
    check_checkpoints_of_the_open_notebook,
    check_described_in_the_notebooks_kernel,
    checkpoint_script,
    describe_df_script,
    kernel_hold,
    write_notebook,
)

__all__ = ["spec"]  # the fixture, shared with test_browser (with this lab_process)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture
def lab_process(
    daemon_process: DaemonProcess, workspace: Path, request: pytest.FixtureRequest
) -> Iterator[JupyterProcess]:
    """test_browser's JupyterLab, as if jupyter-collaboration were not installed."""
    proc = galata_lab(daemon_process, workspace, collaboration=False)
    try:
        yield proc
        # (Nothing of jupyter-collaboration ran.)
        assert "jupyter_server_ydoc | extension was successfully loaded" not in proc.stderr()
        assert "through their shared documents" not in proc.stderr()
    finally:
        proc.finish(show_log=call_failed(request))


BUILD_DF = "import pandas as pd\ndf = pd.DataFrame({'x': range(50), 'y': range(50)})\ndf.shape"


def tool_results(fake: FakeOpenAI, request: int) -> list[str]:
    """The tool results the model's request `request` (0-based) carried."""
    messages = fake.requests[request]["messages"]
    return [json.dumps(m["content"]) for m in messages if m["role"] == "tool"]


def test_scenario_1_describe_df_lists_the_notebook_kernels_variables(
    daemon: DaemonProcess,
    fake_openai: FakeOpenAI,
    spec: Spec,
    lab_process: JupyterProcess,
    workspace: Path,
) -> None:
    write_notebook(workspace / NOTEBOOK, *USER_CELLS)
    fake_openai.script(*describe_df_script())
    spec.env |= {"HDSP_NOTEBOOK": NOTEBOOK, "HDSP_USER_CELLS": json.dumps(USER_CELLS)}
    spec.run("notebook-variables.spec.ts")
    check_described_in_the_notebooks_kernel(
        fake_openai, daemon.runtime_dir, lab_process.runtime_dir
    )


def test_scenario_2_an_inserted_cell_runs_and_plots_in_the_open_notebook(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path, tmp_path: Path
) -> None:
    write_notebook(workspace / "plots.ipynb", BUILD_DF, "print('below')")
    release = tmp_path / "release-kernel"
    spec.env["HDSP_KERNEL_HOLD"] = kernel_hold(release, marker="ax = df.x.plot()")
    spec.env["HDSP_RELEASE_KERNEL"] = str(release)
    before = (workspace / "plots.ipynb").stat().st_mtime_ns
    fake_openai.script(
        call("read_notebook", path="plots.ipynb"),
        call("insert_cell", path="plots.ipynb", index=1, source="ax = df.x.plot()"),
        call("run_cell", path="plots.ipynb", index=1),
        done("Plotted df.x under your cell."),
    )
    spec.run("live-edits-panel-plot.spec.ts")

    # The prompt named the notebook and its active cell (index 0): the agent
    # inserted under it, through the window's notebook model.
    user = [m for m in fake_openai.requests[0]["messages"] if m["role"] == "user"][-1]
    context = json.dumps(user["content"])
    assert "plots.ipynb" in context and '\\"cell\\":{\\"index\\":0' in context, context
    read, inserted, ran = tool_results(fake_openai, 3)[-3:]
    assert "open in JupyterLab (the notebook's window)" in read, read
    assert "df = pd.DataFrame" in read  # the open document's cells
    assert "Inserted a code cell at index 1 of plots.ipynb, open in JupyterLab" in inserted
    assert "are in cell 1 of plots.ipynb, open in JupyterLab" in ran, ran
    # It ran in the notebook's own kernel (the user's df) and plotted.
    assert "image/png" in ran or "Figure" in ran or "image" in ran, ran

    # The saved file (the user's save, the only write) is what Lab showed.
    saved = nbformat.read(str(workspace / "plots.ipynb"), as_version=4)
    assert (workspace / "plots.ipynb").stat().st_mtime_ns != before
    assert [c.source for c in saved.cells] == [BUILD_DF, "ax = df.x.plot()", "print('below')"]
    cell = saved.cells[1]
    assert cell.metadata["hdsp"]["editedBy"] == "agent"
    assert cell.execution_count == 2
    assert any("image/png" in o.get("data", {}) for o in cell.outputs), cell.outputs


def test_scenario_3_a_cell_the_user_edits_meanwhile_is_a_conflict(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    write_notebook(workspace / "conflict.ipynb", BUILD_DF, "ax = df.x.plot()")
    gate = threading.Event()
    fake_openai.script(
        call("read_notebook", path="conflict.ipynb"),
        call(
            "edit_cell",
            path="conflict.ipynb",
            index=1,
            source="ax = df.x.plot(title='x')",
        ).held_after(0, gate),
        done("You changed the cell; I left it as it is."),
    )
    spec.start("live-edits-panel-conflict.spec.ts")
    spec.serve("wait-read", lambda body: fake_openai.wait_for_requests(2, timeout=60))
    spec.serve("release-edit", lambda body: gate.set())
    spec.finish()

    result = tool_results(fake_openai, 2)[-1]
    assert "Conflict: cell 1 of conflict.ipynb was changed in JupyterLab" in result, result
    assert "color='red'" in result  # the model was shown the user's text
    # Nothing was written behind Lab's back.
    saved = nbformat.read(str(workspace / "conflict.ipynb"), as_version=4)
    assert [c.source for c in saved.cells] == [BUILD_DF, "ax = df.x.plot()"]


def test_scenario_4_a_notebook_closed_mid_task_is_edited_in_its_file(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    write_notebook(workspace / "closing.ipynb", "a = 1")
    gate = threading.Event()
    fake_openai.script(
        call("read_notebook", path="closing.ipynb"),
        call("insert_cell", path="closing.ipynb", source="b = 2").held_after(0, gate),
        done(),
    )
    spec.start("live-edits-panel-closed.spec.ts")
    spec.serve("wait-read", lambda body: fake_openai.wait_for_requests(2, timeout=60))
    spec.serve("release-insert", lambda body: gate.set())
    spec.finish()

    read, inserted = tool_results(fake_openai, 2)[-2:]
    assert "open in JupyterLab (the notebook's window)" in read, read
    assert "Inserted a code cell at index 1 of closing.ipynb (now 2 cells)" in inserted, inserted
    saved = nbformat.read(str(workspace / "closing.ipynb"), as_version=4)
    assert [c.source for c in saved.cells] == ["a = 1", "b = 2"]


def test_checkpoints_keep_the_windows_notebook_and_a_restore_shows_in_it_at_once(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    # (Issue 20.) The agent's cell is in this window's notebook model only; a
    # checkpoint keeps it, and a restore from the panel goes into the model and
    # the window's own save (clients/jupyterlab/ui-tests/tests/live-checkpoints.spec.ts).
    write_notebook(workspace / NOTEBOOK, *USER_CELLS)
    fake_openai.script(*checkpoint_script())
    spec.env |= {
        "HDSP_NOTEBOOK": NOTEBOOK,
        "HDSP_USER_CELLS": json.dumps(USER_CELLS),
        "HDSP_AGENT_SOURCE": SUM_SOURCE,
        "HDSP_AUTOSAVE": "",
    }
    spec.run("live-checkpoints.spec.ts")
    check_checkpoints_of_the_open_notebook(daemon.runtime_dir, workspace)
