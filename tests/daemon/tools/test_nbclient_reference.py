"""nbclient's own test notebooks as the reference of hdsp's output rules.

Each notebook in scope runs in this test through nbclient (its
`NotebookClient`, in a kernel of its own), and through hdsp's kernel path (the
notebook tools' `run_cell` on every code cell in order, with the kernel service
and a real ipykernel), by both of the tools' routes: the outputs written to the
file, and the outputs put into the notebook open in JupyterLab (a shared
document edited with the server extension's own code, tests/support/
shared_notebook_host.py). Then every cell's final outputs in hdsp's file, and in
the open document, must equal nbclient's. What must differ between two runs
is normalised: execution counts, the time a cell printed, tracebacks' colours
and file names, memory addresses; and consecutive stream outputs of one name are
joined (nbclient keeps one output per stream message by default, JupyterLab and
hdsp join them).

The notebooks come from nbclient's sdist, downloaded with pip into the virtual
environment (tests/support/nbclient_files.py); if that cannot work the test
fails with the reason.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest

from hdsp.daemon.tools.kernel_output import strip_ansi
from hdsp.daemon.tools.notebook_tools import NotebookTracker, ReadNotebook, RunCell
from tests.daemon.tools.nbclient_runs import run_with_nbclient
from tests.support.daemon_process import short_tmp_dir
from tests.support.kernel_helpers import running_service
from tests.support.nbclient_files import NbclientFilesUnavailable, nbclient_test_files
from tests.support.shared_notebook_host import SharedNotebookHost
from tests.support.tool_context import RecordingContext

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

_nbf: Any = nbformat

#: The notebooks compared, with the seconds a cell may run (nbclient's timeout
#: and run_cell's alike).
IN_SCOPE: dict[str, float] = {
    "Clear Output.ipynb": 30,
    "Empty Cell.ipynb": 30,
    "Error.ipynb": 30,
    "Factorials.ipynb": 30,
    "HelloWorld.ipynb": 30,
    "Inline Image.ipynb": 30,
    "Interrupt.ipynb": 2,  # a `while True` both interrupt at the time limit
    "Other Comms.ipynb": 30,
    "SVG.ipynb": 30,
    "Skip Exceptions with Cell Tags.ipynb": 30,
    "Skip Exceptions.ipynb": 30,
    "Skip Execution with Cell Tag.ipynb": 30,
    "Sleep1s.ipynb": 30,
    "Unicode.ipynb": 30,
    "UnicodePy3.ipynb": 30,
    "update-display-id.ipynb": 30,
}

#: The others, and why they are not compared.
EXCLUDED: dict[str, str] = {
    "Autokill.ipynb": "the kernel kills itself: no outputs to compare (a kernel that "
    "dies is tested in tests/daemon/kernels/test_kernels.py)",
    "Check History in Memory.ipynb": "checks nbclient's own kernel option (history in "
    "memory), not outputs",
    "Disable Stdin.ipynb": "input() fails under nbclient (stdin off) and becomes a "
    "question to the user in hdsp, by design",
    "JupyterWidgets.ipynb": "needs ipywidgets and a widget frontend; hdsp keeps no widget state",
    "Output.ipynb": "routes outputs into ipywidgets Output widgets, which only a widget "
    "frontend (or nbclient's imitation of one) keeps",
    "Parallel Execute A.ipynb": "tests nbclient running two notebooks at once (needs "
    "NBEXECUTE_TEST_PARALLEL_TMPDIR and its twin B)",
    "Parallel Execute B.ipynb": "the twin of Parallel Execute A",
}


@pytest.fixture(scope="session")
def nbclient_files() -> Path:
    try:
        return nbclient_test_files()
    except NbclientFilesUnavailable as exc:
        pytest.fail(f"nbclient's test notebooks are unavailable: {exc}", pytrace=False)


def test_every_nbclient_notebook_is_compared_or_excluded_with_a_reason(
    nbclient_files: Path,
) -> None:
    names = {p.name for p in nbclient_files.glob("*.ipynb")}
    assert names == set(IN_SCOPE) | set(EXCLUDED), (
        "nbclient's test notebooks changed: compare the new ones or exclude them with a reason",
        names ^ (set(IN_SCOPE) | set(EXCLUDED)),
    )


_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z?")
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+")
# Lines of a traceback that name a file of this run (a cell's temporary file).
_RUN_FILE = re.compile(r"ipykernel_\d+|/tmp/|File .*\.py")


def _text(value: Any) -> str:
    text = "".join(value) if isinstance(value, list) else str(value)
    return _ADDRESS.sub("at 0x…", _TIME.sub("<time>", text))


def _normalised(outputs: list[Any]) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for node in outputs:
        out = dict(node)
        out.pop("transient", None)
        out.pop("execution_count", None)
        if out["output_type"] == "stream":
            out["text"] = _text(out["text"])
            if (
                merged
                and merged[-1]["output_type"] == "stream"
                and merged[-1]["name"] == out["name"]
            ):
                merged[-1]["text"] += out["text"]
                continue
        elif out["output_type"] == "error":
            lines = strip_ansi("\n".join(out["traceback"])).splitlines()
            out["traceback"] = [_text(line) for line in lines if not _RUN_FILE.search(line)]
        else:
            out["data"] = {
                mime: value.replace("\n", "") if mime.startswith("image/") else _text(value)
                for mime, value in out.get("data", {}).items()
            }
            out["metadata"] = dict(out.get("metadata", {}))
        merged.append(out)
    return merged


def _skipped(cell: Any) -> bool:
    """nbclient does not run a cell tagged skip-execution; run_cell runs what it
    is asked to, so the test does not ask."""
    return "skip-execution" in cell.get("metadata", {}).get("tags", [])


async def _run_with_hdsp(name: str, workspace: Path, cell_limit: float, route: str) -> Any:
    """The notebook after run_cell ran its code cells in order: its file (route
    "file"), or the open document (route "open"), which leaves the file alone."""
    tracker = NotebookTracker()
    host = SharedNotebookHost(workspace / name) if route == "open" else None
    hosts = host.hosts if host is not None else None
    read, run = ReadNotebook(tracker, hosts), RunCell(tracker, hosts)
    before = (workspace / name).read_bytes()
    async with running_service() as (svc, _), anyio.create_task_group() as tg:
        if host is not None:
            host.hosts.declare("rtc-ref", "rtc", [str((workspace / name).resolve())], 600.0)
            tg.start_soon(host.serve)
        ctx = RecordingContext(workspace, services={"kernels": svc}, task_id=f"ref-{name}")
        await read.execute(ctx, {"path": name})
        nb = _nbf.read(str(workspace / name), as_version=4)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and not _skipped(cell):
                await run.execute(ctx, {"path": name, "index": index, "timeout": cell_limit})
        tg.cancel_scope.cancel()
    if host is None:
        return _nbf.read(str(workspace / name), as_version=4)
    assert (workspace / name).read_bytes() == before  # (the open document only)
    return _nbf.from_dict(host.ynb.get())


@pytest.mark.parametrize("route", ["file", "open"])
@pytest.mark.parametrize("name", sorted(IN_SCOPE))
async def test_every_cell_ends_with_the_outputs_nbclient_gives(
    name: str, route: str, nbclient_files: Path, tmp_path: Path
) -> None:
    timeout = IN_SCOPE[name]
    theirs_dir, ours_dir = tmp_path / "nbclient", tmp_path / "hdsp"
    for folder in (theirs_dir, ours_dir):
        shutil.copytree(nbclient_files, folder)
        # The notebooks are saved with outputs: both runs start without any, so
        # that an output hdsp fails to write cannot pass for the one saved.
        blank = _nbf.read(str(folder / name), as_version=4)
        for cell in blank.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        _nbf.write(blank, str(folder / name))
    root = short_tmp_dir()
    try:
        theirs = _nbf.read(str(theirs_dir / name), as_version=4)
        await run_with_nbclient(theirs, theirs_dir, root, cell_limit=timeout)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ours = await _run_with_hdsp(name, ours_dir, timeout, route)

    assert len(ours.cells) == len(theirs.cells)
    ran = 0
    for index, (mine, reference) in enumerate(zip(ours.cells, theirs.cells, strict=True)):
        if reference.cell_type != "code":
            continue
        ran += bool(reference.outputs)
        assert _normalised(mine.outputs) == _normalised(reference.outputs), (
            f"{name}, cell {index}: {reference.source!r}"
        )
    assert ran or name in _WITHOUT_OUTPUTS, f"{name}: nbclient gave no output at all"


#: Notebooks in scope whose cells print nothing (what they test is that nothing
#: shows: an empty cell, comms that have no frontend).
_WITHOUT_OUTPUTS = {"Other Comms.ipynb"}
