"""Live edits through real-time collaboration in the real browser (issue 17,
scenarios 1-4): Galata on Debian's chromium against JupyterLab with
jupyter-collaboration on and hdsp's plugin, a real hdspd and the scripted model.
"describe df" lists the variables of the notebook's own kernel and answers with
df's real columns. The agent's notebook tools change the open notebook's shared document: its cell
appears under the user's active cell, highlighted, a run's outputs stream into
it, no "file changed on disk" dialog comes, and the saved file matches the page;
a cell the user changed is a conflict the model is told about; a notebook the
user closed is edited in its file. The story is shared with the panel route's
tests (tests/support/live_edit_scenarios.py); the browser steps are in
clients/jupyterlab/ui-tests/tests/live-edits-rtc.spec.ts. Checkpoints (issue
20): a checkpoint keeps the shared document, and a restore from the panel goes
into it and the room's save (live-checkpoints.spec.ts, shared with the panel
route), with the rooms' autosave and without.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.jupyterlab.test_browser import UI_TESTS, Spec, browser_tools, galata_lab
from tests.support.daemon_process import DaemonProcess, call_failed
from tests.support.jupyter_process import JupyterProcess
from tests.support.live_edit_scenarios import (
    AGENT_EDIT,
    CLOSED_INSERT,
    NOTEBOOK,
    PLOT_SOURCE,
    SUM_SOURCE,
    USER_CELLS,
    USER_EDIT,
    check_checkpoints_of_the_open_notebook,
    check_described_in_the_notebooks_kernel,
    checkpoint_script,
    closed_notebook_script,
    conflict_script,
    describe_df_script,
    insert_and_run_script,
    kernel_hold,
    tool_results,
    write_notebook,
)

# Slow: the story of the panel route's tests, which `make test` runs; CI runs
# this route too (`make test-slow`).
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]

SPEC = "live-edits-rtc.spec.ts"


@pytest.fixture
def room_autosave(request: pytest.FixtureRequest) -> bool:
    """Whether the collaboration rooms save their documents a second after each
    change (jupyter-collaboration's default), or only when the user saves."""
    return bool(getattr(request, "param", True))


@pytest.fixture
def rtc_lab_process(
    daemon_process: DaemonProcess,
    workspace: Path,
    request: pytest.FixtureRequest,
    room_autosave: bool,
) -> Iterator[JupyterProcess]:
    """JupyterLab as test_browser's `lab_process`, with real-time collaboration on."""
    config = {} if room_autosave else {"YDocExtension": {"document_save_delay": None}}
    proc = galata_lab(daemon_process, workspace, config, rtc=True)
    try:
        yield proc
    finally:
        proc.finish(show_log=call_failed(request))


class ScenarioSpec(Spec):
    """One test of the spec file, chosen by its title."""

    def start_test(self, title: str) -> None:
        self.proc = subprocess.Popen(
            ["npx", "--no-install", "playwright", "test", f"tests/{SPEC}", "-g", title],
            cwd=UI_TESTS,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def finish_test(self) -> str:
        out = self.finish()
        assert "1 passed" in out, out
        return out


@pytest.fixture
def spec(
    daemon: DaemonProcess, rtc_lab_process: JupyterProcess, tmp_path: Path, workspace: Path
) -> Iterator[ScenarioSpec]:
    browser_tools()
    write_notebook(workspace / NOTEBOOK, *USER_CELLS)
    rtc_lab_process.start()
    runner = ScenarioSpec(rtc_lab_process, tmp_path, workspace)
    runner.env |= {
        "HDSP_NOTEBOOK": NOTEBOOK,
        "HDSP_USER_CELLS": json.dumps(USER_CELLS),
        "HDSP_PLOT_SOURCE": PLOT_SOURCE,
        "HDSP_USER_EDIT": USER_EDIT,
        "HDSP_CLOSED_INSERT": CLOSED_INSERT,
    }
    try:
        yield runner
    finally:
        runner.kill()


def _wait(condition: object, what: str, proc: ScenarioSpec, timeout: float = 60) -> None:
    """Wait for state another process changes (the model's requests, Lab's log,
    a file), failing with the spec's output if the spec ends first."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.proc is not None and proc.proc.poll() is not None:
            proc.finish()
            raise AssertionError(f"the spec ended before {what}")
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)  # (nothing to wait on but the state itself)


def _declared(lab: JupyterProcess, count: int) -> bool:
    """Whether the extension's last declaration of open notebooks was `count`."""
    lines = [
        line for line in lab.stderr().splitlines() if "open notebook(s) are edited live" in line
    ]
    return bool(lines) and f"hdsp: {count} open notebook(s)" in lines[-1]


def _notebook_context(fake: FakeOpenAI) -> dict[str, Any]:
    """The <notebook_context> the user's first message carried, parsed."""
    user = next(m for m in fake.requests[0]["messages"] if m["role"] == "user")
    text = next(b["text"] for b in user["content"] if "<notebook_context>" in b["text"])
    found: dict[str, Any] = json.loads(text.split("\n")[2])
    return found


def test_scenario_1_describe_df_lists_the_notebook_kernels_variables(
    daemon: DaemonProcess,
    fake_openai: FakeOpenAI,
    spec: ScenarioSpec,
    rtc_lab_process: JupyterProcess,
) -> None:
    fake_openai.script(*describe_df_script())
    spec.run("notebook-variables.spec.ts")
    assert _notebook_context(fake_openai)["notebook"] == NOTEBOOK
    check_described_in_the_notebooks_kernel(
        fake_openai, daemon.runtime_dir, rtc_lab_process.runtime_dir
    )


def test_scenario_2_an_inserted_plot_cell_runs_live_in_the_open_notebook(
    fake_openai: FakeOpenAI, spec: ScenarioSpec, tmp_path: Path, workspace: Path
) -> None:
    release = tmp_path / "release-kernel"
    spec.env["HDSP_KERNEL_HOLD"] = kernel_hold(release)
    spec.env["HDSP_RELEASE_KERNEL"] = str(release)
    fake_openai.script(*insert_and_run_script())
    spec.start_test("scenario 2")
    spec.finish_test()

    # The prompt carried the open notebook and its active cell (the first).
    context = _notebook_context(fake_openai)
    assert context["notebook"] == NOTEBOOK and context["cell"]["index"] == 0, context
    read, inserted, ran = tool_results(fake_openai, 3)
    assert "open in JupyterLab (the shared document)" in read
    assert "Inserted a code cell at index 1 of plots.ipynb, open in JupyterLab" in inserted
    assert "are in cell 1 of plots.ipynb, open in JupyterLab" in ran
    # The run was in the notebook's own kernel (where the user built df): no error.
    assert "Error" not in ran and "NameError" not in ran, ran
    saved = nbformat.read(str(workspace / NOTEBOOK), as_version=4)
    assert saved.cells[1].metadata["hdsp"]["editedBy"] == "agent"
    assert saved.cells[1].execution_count == 2


def test_scenario_3_a_cell_the_user_edits_meanwhile_is_a_conflict_for_the_agent(
    fake_openai: FakeOpenAI, spec: ScenarioSpec, workspace: Path
) -> None:
    gate = threading.Event()
    fake_openai.script(*conflict_script(gate))
    spec.start_test("scenario 3")

    def user_edited(body: str) -> str:
        # The user's keystrokes reached the shared document on the server when
        # the room has saved them (its autosave): only then may the agent edit.
        _wait(lambda: body in (workspace / NOTEBOOK).read_text(), "the user's edit saved", spec)
        gate.set()
        return ""

    spec.serve("release-edit", user_edited)
    spec.finish_test()

    conflict = tool_results(fake_openai, 3)[-1]
    assert "Conflict: cell 1 of plots.ipynb was changed in JupyterLab" in conflict, conflict
    assert USER_EDIT in conflict and "your change was not made" in conflict
    saved = nbformat.read(str(workspace / NOTEBOOK), as_version=4)
    assert [c.source for c in saved.cells] == [USER_CELLS[0], USER_EDIT, USER_CELLS[1]]
    assert AGENT_EDIT not in (workspace / NOTEBOOK).read_text()


def test_scenario_4_a_notebook_closed_mid_task_gets_the_edit_in_its_file(
    fake_openai: FakeOpenAI, spec: ScenarioSpec, rtc_lab_process: JupyterProcess, workspace: Path
) -> None:
    gate = threading.Event()
    fake_openai.script(*closed_notebook_script(gate))
    spec.start_test("scenario 4")

    def agent_read(body: str) -> str:
        _wait(lambda: len(fake_openai.requests) >= 2, "the agent's read", spec)
        assert "open in JupyterLab (the shared document)" in tool_results(fake_openai, 1)[0]
        return ""

    def closed(body: str) -> str:
        # The window closed: the extension no longer declares the notebook open.
        _wait(lambda: _declared(rtc_lab_process, 0), "the notebook withdrawn", spec)
        gate.set()
        return ""

    spec.serve("agent-read", agent_read)
    spec.serve("release-insert", closed)
    spec.finish_test()

    inserted = tool_results(fake_openai, 2)[-1]
    assert "Inserted a code cell at index 2 of plots.ipynb (now 3 cells)" in inserted, inserted
    saved = nbformat.read(str(workspace / NOTEBOOK), as_version=4)
    assert [c.source for c in saved.cells] == [*USER_CELLS, CLOSED_INSERT]
    assert saved.cells[2].metadata["hdsp"]["editedBy"] == "agent"


@pytest.mark.parametrize(
    "room_autosave", [True, False], indirect=True, ids=["autosave", "saved-by-the-user"]
)
def test_checkpoints_keep_the_shared_document_and_a_restore_shows_in_it_at_once(
    daemon: DaemonProcess,
    fake_openai: FakeOpenAI,
    spec: ScenarioSpec,
    workspace: Path,
    room_autosave: bool,
) -> None:
    # (Issue 20.) A checkpoint keeps the shared document, and a restore from the
    # panel goes into the shared document and the room's save
    # (clients/jupyterlab/ui-tests/tests/live-checkpoints.spec.ts): with the
    # rooms' autosave (its save of the agent's cell and the restore's own), and
    # without, where the agent's cell is in the shared document only until the
    # restore.
    fake_openai.script(*checkpoint_script())
    spec.env |= {
        "HDSP_AGENT_SOURCE": SUM_SOURCE,
        "HDSP_AUTOSAVE": "1" if room_autosave else "",
    }
    spec.run("live-checkpoints.spec.ts")
    check_checkpoints_of_the_open_notebook(daemon.runtime_dir, workspace)
