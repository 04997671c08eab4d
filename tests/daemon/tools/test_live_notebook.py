"""The notebook tools' route to a notebook open in JupyterLab, without a browser:
the daemon's half (NotebookHosts, the tools' routing, conflicts, the fall back to
the file) against a host that applies the edits with the server extension's
own code (`apply_edit`) to a real shared notebook (jupyter_ydoc's YNotebook on a
pycrdt document), answering through the same request/reply the daemon uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import anyio
import nbformat
import pytest
from anyio.abc import TaskGroup
from jupyter_ydoc import YNotebook

from hdsp.client.jupyterlab.shared_notebooks import apply_edit
from hdsp.daemon.conversation import TextBlock
from hdsp.daemon.tools import ToolError
from hdsp.daemon.tools.notebook_hosts import NotebookHosts
from hdsp.daemon.tools.notebook_tools import (
    DeleteCell,
    EditCell,
    InsertCell,
    MoveCell,
    NotebookTracker,
    ReadNotebook,
    RunCell,
)
from hdsp.protocol import DocumentEdit, DocumentEditAnswer, DocumentEditRequested, Event
from tests.support.kernel_helpers import running_service
from tests.support.shared_notebook_host import SharedNotebookHost
from tests.support.tool_context import RecordingContext

pytestmark = pytest.mark.timeout(60)

_v4: Any = nbformat.v4


class Tools:
    def __init__(self, hosts: NotebookHosts) -> None:
        tracker = NotebookTracker()
        self.read = ReadNotebook(tracker, hosts)
        self.insert = InsertCell(tracker, hosts)
        self.edit = EditCell(tracker, hosts)
        self.delete = DeleteCell(tracker, hosts)
        self.move = MoveCell(tracker, hosts)
        self.run = RunCell(tracker, hosts)


def _text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


def _notebook(path: Path, *sources: str) -> bytes:
    nb = _v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [_v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))
    return path.read_bytes()


class _Read(NamedTuple):
    host: SharedNotebookHost
    on_disk: bytes
    tools: Tools
    ctx: RecordingContext
    listing: str


async def _open_and_read(
    tmp_path: Path, tg: TaskGroup, *sources: str, kernels: Any = None
) -> _Read:
    """`open.ipynb` of `sources` open in a host (served in `tg`), and read
    through the tools by a task whose kernels are `kernels` (none when not given)."""
    path = tmp_path / "open.ipynb"
    on_disk = _notebook(path, *sources)
    host = SharedNotebookHost(path)
    absolute = str(path.resolve())
    host.hosts.declare("rtc-1", "rtc", [absolute], 60.0)
    tg.start_soon(host.serve)
    tools = Tools(host.hosts)
    ctx = RecordingContext(tmp_path, services=None if kernels is None else {"kernels": kernels})
    listing = _text(await tools.read.execute(ctx, {"path": "open.ipynb"}))
    return _Read(host, on_disk, tools, ctx, listing)


async def test_edits_go_to_the_open_document_and_never_to_the_file(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        host, on_disk, tools, ctx, listing = await _open_and_read(
            tmp_path, tg, "import pandas as pd", "df = pd.DataFrame()"
        )
        assert "open in JupyterLab (the shared document)" in listing
        assert "## Cell 1 [code]\ndf = pd.DataFrame()" in listing

        done = await tools.insert.execute(
            ctx, {"path": "open.ipynb", "index": 2, "source": "df.x.plot()"}
        )
        assert "Inserted a code cell at index 2 of open.ipynb, open in JupyterLab" in _text(done)
        assert host.sources() == ["import pandas as pd", "df = pd.DataFrame()", "df.x.plot()"]
        marker = host.ynb.get_cell(2)["metadata"]["hdsp"]
        assert marker["editedBy"] == "agent" and marker["task"] == ctx.task_id

        await tools.edit.execute(ctx, {"path": "open.ipynb", "index": 2, "source": "df.x.hist()"})
        await tools.move.execute(ctx, {"path": "open.ipynb", "index": 2, "to_index": 0})
        assert host.sources() == ["df.x.hist()", "import pandas as pd", "df = pd.DataFrame()"]
        await tools.delete.execute(ctx, {"path": "open.ipynb", "index": 2})
        assert host.sources() == ["df.x.hist()", "import pandas as pd"]
        # The file is the user's to save: nothing wrote it.
        assert (tmp_path / "open.ipynb").read_bytes() == on_disk
        tg.cancel_scope.cancel()


async def test_a_notebook_older_than_nbformat_4_5_is_edited_by_its_cells_ids(
    tmp_path: Path,
) -> None:
    """A file of nbformat 4.4 or older keeps no cell ids; the shared document
    gives its cells ids all the same, and those are what the agent's edits name."""
    path = tmp_path / "open.ipynb"
    nb = _v4.new_notebook()
    nb.nbformat_minor = 4
    nb.cells = [_v4.new_code_cell("a = 1"), _v4.new_markdown_cell("# b"), _v4.new_code_cell("c")]
    for cell in nb.cells:
        del cell["id"]
    nbformat.write(nb, str(path))
    on_disk = path.read_bytes()
    host = SharedNotebookHost(path)
    host.hosts.declare("rtc-1", "rtc", [str(path.resolve())], 60.0)
    ids = [str(c["id"]) for c in host.ynb.ycells]
    async with running_service() as (svc, _), anyio.create_task_group() as tg:
        tg.start_soon(host.serve)
        tools = Tools(host.hosts)
        ctx = RecordingContext(tmp_path, services={"kernels": svc})
        await tools.read.execute(ctx, {"path": "open.ipynb"})
        await tools.edit.execute(ctx, {"path": "open.ipynb", "index": 0, "source": "a = 2"})
        await tools.edit.execute(
            ctx, {"path": "open.ipynb", "index": 1, "source": "b = 3", "cell_type": "code"}
        )
        await tools.move.execute(ctx, {"path": "open.ipynb", "index": 2, "to_index": 0})
        ran = await tools.run.execute(ctx, {"path": "open.ipynb", "index": 1})
        assert "open in JupyterLab" in _text(ran)
        await tools.delete.execute(ctx, {"path": "open.ipynb", "index": 0})
        assert host.sources() == ["a = 2", "b = 3"]
        # The cells kept their ids through the edit of a type and the move.
        assert [str(c["id"]) for c in host.ynb.ycells] == ids[:2]
        assert host.ynb.get_cell(0)["execution_count"] == 1
        assert path.read_bytes() == on_disk
        tg.cancel_scope.cancel()


async def test_a_display_updated_from_a_later_cell_changes_where_it_was_made(
    tmp_path: Path,
) -> None:
    """Jupyter's rule (as the file route and nbclient keep it) in the open
    document: `h.update(...)` in a later cell rewrites the display where `h`
    was made, and leaves that cell's execution count."""
    async with running_service() as (svc, _), anyio.create_task_group() as tg:
        host, on_disk, tools, ctx, _ = await _open_and_read(
            tmp_path,
            tg,
            "h = display('first', display_id=True)\nprint('made')",
            "h.update('second')",
            kernels=svc,
        )
        await tools.run.execute(ctx, {"path": "open.ipynb", "index": 0})
        made = host.ynb.get_cell(0)
        assert made["outputs"][0]["data"]["text/plain"] == "'first'"
        result = await tools.run.execute(ctx, {"path": "open.ipynb", "index": 1})
        assert "updated 1 display output(s) of other cells there too" in _text(result)
        updated = host.ynb.get_cell(0)
        assert updated["outputs"][0]["data"]["text/plain"] == "'second'"
        assert updated["outputs"][1]["output_type"] == "stream"  # the rest as it was
        assert updated["execution_count"] == 1
        assert host.ynb.get_cell(1)["outputs"] == []
        assert (tmp_path / "open.ipynb").read_bytes() == on_disk
        tg.cancel_scope.cancel()


async def test_a_cell_the_user_changed_since_the_read_is_a_conflict(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        host, _, tools, ctx, _ = await _open_and_read(tmp_path, tg, "df.x.plot()")
        # The user types into the cell while the agent prepares its edit.
        host.ynb.set_cell(0, source="df.x.plot(kind='bar')  # mine")
        with pytest.raises(ToolError) as caught:
            await tools.edit.execute(
                ctx, {"path": "open.ipynb", "index": 0, "source": "df.x.plot(color='red')"}
            )
        assert str(caught.value).startswith("Conflict: cell 0 of open.ipynb was changed")
        assert "df.x.plot(kind='bar')  # mine" in str(caught.value)
        assert host.sources() == ["df.x.plot(kind='bar')  # mine"]  # not overwritten
        # The conflict showed the model the live source: a change it makes now is
        # made on what it has seen.
        await tools.edit.execute(ctx, {"path": "open.ipynb", "index": 0, "source": "df.x.plot()"})
        assert host.sources() == ["df.x.plot()"]
        # A cell the user deleted is a conflict too; one they added is not the agent's.
        del host.ynb.ycells[0]
        with pytest.raises(ToolError, match="was deleted in JupyterLab"):
            await tools.edit.execute(ctx, {"path": "open.ipynb", "index": 0, "source": "x"})
        tg.cancel_scope.cancel()


async def test_a_notebook_closed_mid_task_is_edited_in_its_file(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        host, _, tools, ctx, _ = await _open_and_read(tmp_path, tg, "a = 1")
        await tools.insert.execute(ctx, {"path": "open.ipynb", "source": "b = 2"})
        host.save(tmp_path / "open.ipynb")
        host.open = False  # the user closes it; the host has not withdrawn it yet
        done = await tools.insert.execute(ctx, {"path": "open.ipynb", "source": "c = 3"})
        assert "so the file was changed instead" in _text(done)
        saved = nbformat.read(str(tmp_path / "open.ipynb"), as_version=4)
        assert [c.source for c in saved.cells] == ["a = 1", "b = 2", "c = 3"]
        assert saved.cells[2].metadata["hdsp"]["editedBy"] == "agent"
        # The host said it is not open: the next edit goes to the file at once.
        asked = len(host.requests)
        await tools.edit.execute(ctx, {"path": "open.ipynb", "index": 0, "source": "a = 10"})
        assert len(host.requests) == asked
        assert nbformat.read(str(tmp_path / "open.ipynb"), as_version=4).cells[0].source == (
            "a = 10"
        )
        tg.cancel_scope.cancel()


async def test_a_host_that_does_not_answer_is_forgotten(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        host, _, tools, ctx, _ = await _open_and_read(tmp_path, tg, "a = 1")
        host.silent = True
        tools.insert.answer_limit = 0.5
        done = await tools.insert.execute(ctx, {"path": "open.ipynb", "source": "b = 2"})
        assert "JupyterLab did not answer within 0.5 s" in _text(done)
        assert "so the file was changed instead" in _text(done)
        assert host.hosts.hosts() == []
        assert host.hosts.statistics()["pending"] == 0
        # An answer that comes too late is not taken.
        late = host.requests[-1]
        assert not host.hosts.answer(
            DocumentEditAnswer(request_id=late.request_id, host_id="rtc-1", status="ok")
        )
        tg.cancel_scope.cancel()


async def test_run_cell_streams_its_outputs_into_the_open_document(tmp_path: Path) -> None:
    async with running_service() as (svc, _), anyio.create_task_group() as tg:
        code = "print('one')\nimport time; time.sleep(0.3)\nprint('two')\n6 * 7"
        host, on_disk, tools, ctx, _ = await _open_and_read(tmp_path, tg, code, kernels=svc)
        result = await tools.run.execute(ctx, {"path": "open.ipynb", "index": 0})
        assert "are in cell 0 of open.ipynb, open in JupyterLab" in _text(result)
        cell = host.ynb.get_cell(0)
        assert cell["execution_count"] == 1
        kinds = [o["output_type"] for o in cell["outputs"]]
        assert kinds == ["stream", "execute_result"]
        assert "one" in str(cell["outputs"][0]["text"]) and "two" in str(cell["outputs"][0]["text"])
        assert cell["outputs"][1]["data"] == {"text/plain": "42"}
        outputs_sent = [r for r in host.requests if r.edit.op == "outputs"]
        assert len(outputs_sent) >= 2  # streamed while it ran, then the final ones
        # While it ran, the cell showed as running, with no execution count (as a
        # cell the user runs does); the final outputs brought the count.
        assert host.runs[0] == ("run", None, "running")
        assert set(host.runs[1:-1]) == {("outputs", None, "running")}
        assert host.runs[-1] == ("outputs", 1, "idle")
        assert (tmp_path / "open.ipynb").read_bytes() == on_disk

        # A cell the user changed is not run.
        host.ynb.set_cell(0, source="print('mine')")
        with pytest.raises(ToolError, match="Conflict"):
            await tools.run.execute(ctx, {"path": "open.ipynb", "index": 0})
        tg.cancel_scope.cancel()


async def test_a_run_stopped_midway_keeps_its_outputs_and_ends_running(tmp_path: Path) -> None:
    async with running_service() as (svc, _), anyio.create_task_group() as tg:
        code = "print('started', flush=True)\nimport time\ntime.sleep(60)"
        host, _, tools, ctx, _ = await _open_and_read(tmp_path, tg, code, kernels=svc)
        stop = anyio.CancelScope()

        async def run() -> None:
            with stop:
                await tools.run.execute(ctx, {"path": "open.ipynb", "index": 0})

        tg.start_soon(run)

        def outputs() -> str:
            return str(host.ynb.get_cell(0)["outputs"])

        with anyio.fail_after(30):
            await host.wait_until(lambda: "started" in outputs())
            assert host.runs[-1][2] == "running"
            stop.cancel()  # the user pressed Stop
            await host.wait_until(lambda: host.runs[-1][2] == "idle")
        assert "started" in outputs()  # what came stays
        # The host was not to blame: the next edit still goes to the open document.
        assert [h.host_id for h in host.hosts.hosts()] == ["rtc-1"]
        done = await tools.insert.execute(ctx, {"path": "open.ipynb", "source": "x = 1"})
        assert "open in JupyterLab" in _text(done)
        tg.cancel_scope.cancel()


async def test_a_run_that_fails_is_a_tool_error_and_ends_running(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        # (a daemon that runs no kernels)
        host, _, tools, ctx, _ = await _open_and_read(tmp_path, tg, "x = 1")
        # The model is told what happened (not an exception group from inside).
        with pytest.raises(ToolError, match="runs no kernels"):
            await tools.run.execute(ctx, {"path": "open.ipynb", "index": 0})
        assert host.runs[0] == ("run", None, "running")
        assert host.runs[-1][2] == "idle"
        tg.cancel_scope.cancel()


def test_only_a_code_cell_is_run_or_given_outputs() -> None:
    ynb = YNotebook()
    nb = _v4.new_notebook()
    nb.cells = [_v4.new_markdown_cell("# Title")]
    ynb.set(nb)
    cell_id = ynb.get_cell(0)["id"]
    status, _, cells = apply_edit(ynb, DocumentEdit(op="run", cell_id=cell_id))
    assert status == "ok" and cells is not None and cells[0].cell_type == "markdown"
    edit = DocumentEdit(op="outputs", cell_id=cell_id, outputs=[], execution_count=1)
    assert apply_edit(ynb, edit)[0] == "invalid"
    # The markdown cell got no outputs or execution count (nbformat would refuse them).
    assert ynb.get_cell(0) == {
        "id": cell_id,
        "cell_type": "markdown",
        "source": "# Title",
        "metadata": {},
    }


def test_declarations_expire_and_the_shared_document_is_preferred() -> None:
    now = [100.0]

    async def emit(event: Event) -> None:
        raise AssertionError("nothing is requested here")

    hosts = NotebookHosts(emit, clock=lambda: now[0])
    hosts.declare("panel-1", "panel", ["/w/a.ipynb"], 30.0)
    hosts.declare("rtc-1", "rtc", ["/w/a.ipynb", "/w/b.ipynb"], 10.0)
    chosen = hosts.host_for("/w/a.ipynb")
    assert chosen is not None and chosen.host_id == "rtc-1"
    now[0] += 11  # the rtc host's lease ran out
    chosen = hosts.host_for("/w/a.ipynb")
    assert chosen is not None and chosen.host_id == "panel-1"
    assert hosts.host_for("/w/b.ipynb") is None
    hosts.declare("panel-1", "panel", [], 30.0)  # withdrawn
    assert hosts.host_for("/w/a.ipynb") is None
    with pytest.raises(ValueError, match="not an absolute path"):
        hosts.declare("panel-2", "panel", ["relative.ipynb"], 30.0)


def test_of_two_windows_the_one_that_declared_last_is_chosen() -> None:
    """Two browser windows (panels) hold the same notebook: exactly one is asked,
    the one whose declaration is freshest (a window closed without a word stops
    renewing, so the other takes over before its lease ends)."""
    now = [100.0]

    async def emit(event: Event) -> None:
        raise AssertionError("nothing is requested here")

    hosts = NotebookHosts(emit, clock=lambda: now[0])
    hosts.declare("panel-a", "panel", ["/w/a.ipynb"], 30.0)
    now[0] += 5
    hosts.declare("panel-b", "panel", ["/w/a.ipynb"], 30.0)
    chosen = hosts.host_for("/w/a.ipynb")
    assert chosen is not None and chosen.host_id == "panel-b"
    now[0] += 5
    hosts.declare("panel-a", "panel", ["/w/a.ipynb"], 30.0)  # a renews; b went quiet
    chosen = hosts.host_for("/w/a.ipynb")
    assert chosen is not None and chosen.host_id == "panel-a"


async def test_a_host_names_notebooks_as_the_daemon_shows_names() -> None:
    """A notebook whose name is not UTF-8: the host declares it by its shown
    spelling (hdsp.protocol.file_names), the daemon finds it by its OS name and
    asks the host for it by the shown spelling again."""
    asked: list[Event] = []

    class Asked(Exception):
        pass

    async def emit(event: Event) -> None:
        asked.append(event)
        raise Asked

    hosts = NotebookHosts(emit, clock=lambda: 100.0)
    hosts.declare("rtc-1", "rtc", ["/w/nb\\xff two\\x0alines.ipynb"], 30.0)
    host = hosts.host_for("/w/nb\udcff two\nlines.ipynb")
    assert host is not None and host.host_id == "rtc-1"
    with pytest.raises(Asked):
        await hosts.request(
            host, "/w/nb\udcff two\nlines.ipynb", DocumentEdit(op="read"), expires_in=5
        )
    (request,) = [e.payload[0] for e in asked if isinstance(e, DocumentEditRequested)]
    assert request.path == "/w/nb\\xff two\\x0alines.ipynb"
