"""Live edits through real-time collaboration, without a browser: a real hdspd
running a task against the scripted model, a real Jupyter server with hdsp's
extension and jupyter-collaboration, and a Yjs client (pycrdt's Provider over the
collaboration WebSocket) holding the notebook open as JupyterLab does. The
agent's edits appear in that client's copy of the shared document, a run's
outputs land in the cell, a cell the user changed is a conflict, and a notebook
closed mid-task is edited in its file. The same task with the collaboration
extension switched off writes the file (no host holds the notebook)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import nbformat
import pytest
from jupyter_ydoc import YNotebook
from pycrdt import Doc, Provider
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.jupyterlab.conftest import Lab
from tests.support.daemon_process import DaemonProcess
from tests.support.jupyter_process import JupyterProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
async def rtc_lab(daemon: DaemonProcess, jupyter_process: JupyterProcess) -> AsyncIterator[Lab]:
    """The Jupyter server with real-time collaboration on."""
    jupyter_process.rtc = True
    jupyter_process.start()
    lab = Lab(jupyter_process)
    try:
        yield lab
    finally:
        lab.close()


_v4: Any = nbformat.v4
NOTEBOOK = "analysis.ipynb"


def call(name: str, **args: Any) -> FakeReply:
    return FakeReply.tool_calls([ToolCall(name, json.dumps(args))])


def done(text: str = "done") -> FakeReply:
    return call("attempt_completion", result=text)


class _Channel:
    """pycrdt's Channel over a tornado WebSocket."""

    def __init__(self, ws: WebSocketClientConnection, path: str) -> None:
        self._ws = ws
        self._path = path

    @property
    def path(self) -> str:
        return self._path

    def __aiter__(self) -> _Channel:
        return self

    async def __anext__(self) -> bytes:
        message = await self._ws.read_message()
        if message is None:
            raise StopAsyncIteration
        return message if isinstance(message, bytes) else message.encode()

    async def send(self, message: bytes) -> None:
        await self._ws.write_message(message, binary=True)

    async def recv(self) -> bytes:
        return await self.__anext__()


@asynccontextmanager
async def open_in_lab(lab: Lab, path: str) -> AsyncIterator[YNotebook]:
    """Hold the notebook open as a JupyterLab window does: a collaboration session,
    and the room's shared document synced into a local copy."""
    response = await lab.http.fetch(
        lab.server.url + f"api/collaboration/session/{path}",
        method="PUT",
        body=json.dumps({"format": "json", "type": "notebook"}),
        headers=lab.headers(True),
    )
    session = json.loads(response.body)
    room = f"json:notebook:{session['fileId']}"
    url = lab.server.ws_url + f"api/collaboration/room/{room}?sessionId={session['sessionId']}"
    ws = await websocket_connect(HTTPRequest(url, headers=lab.headers(True)))
    doc: Doc[Any] = Doc()
    ynb = YNotebook(doc)
    try:
        async with Provider(doc, _Channel(ws, room)):
            yield ynb
    finally:
        ws.close()


async def until(condition: Any, what: str) -> None:
    """Wait (within the test's timeout) for a condition on state another process
    changes and announces nowhere we can listen (the file, the shared document)."""
    with anyio.fail_after(60):
        while not condition():  # noqa: ASYNC110 (nothing to wait on but the state)
            await anyio.sleep(0.05)


def _write_notebook(path: Path, *sources: str) -> None:
    nb = _v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [_v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))


def _tool_results(fake: FakeOpenAI) -> list[str]:
    last = fake.requests[-1]["messages"]
    return [str(m["content"]) for m in last if m["role"] == "tool"]


async def _start_task(lab: Lab, text: str) -> str:
    code, body = await lab.command(
        {
            "commandName": "StartNewTask",
            "data": {
                "text": text,
                "configuration": {
                    "approvals": {"alwaysAllowWrite": True, "alwaysAllowExecute": True}
                },
            },
        }
    )
    assert code == 200, body
    return str(body["result"]["taskId"])


async def _wait_declared(jupyter: JupyterProcess, count: int) -> None:
    line = f"hdsp: {count} open notebook(s) are edited live"
    await until(lambda: line in jupyter.stderr(), line)


async def _requests(fake: FakeOpenAI, count: int) -> None:
    """Wait for the model's `count`th request (what the task did before it is
    in the tool results)."""
    try:
        await until(lambda: len(fake.requests) >= count, f"request {count}")
    except TimeoutError:
        raise AssertionError(
            f"the model got {len(fake.requests)} requests, not {count}; the last tool "
            f"results: {_tool_results(fake) if fake.requests else None}"
        ) from None


def _script_held_edit(fake: FakeOpenAI, edit: FakeReply) -> threading.Event:
    """Script the model to read the notebook, then `edit` it, held until the
    gate returned is set, then finish."""
    gate = threading.Event()
    fake.script(call("read_notebook", path=NOTEBOOK), edit.held_after(0, gate), done())
    return gate


async def _agent_has_read(
    lab: Lab, jupyter: JupyterProcess, ynb: YNotebook, fake: FakeOpenAI, text: str
) -> None:
    """Once the open one-cell notebook has synced and is declared, start a task
    with `text`, and wait until the agent has read the notebook."""
    await until(lambda: len(ynb.ycells) == 1, "the document synced")
    await _wait_declared(jupyter, 1)
    await _start_task(lab, text)
    await _requests(fake, 2)


def _sources(ynb: YNotebook) -> list[str]:
    return [str(c["source"]) for c in ynb.ycells]


async def test_an_inserted_cell_runs_in_the_open_notebook_and_the_saved_file_matches(
    rtc_lab: Lab, jupyter_process: JupyterProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    lab, jupyter = rtc_lab, jupyter_process
    _write_notebook(workspace / NOTEBOOK, "xs = [3, 1, 2]", "print('below')")
    fake_openai.script(
        call("read_notebook", path=NOTEBOOK),
        call("insert_cell", path=NOTEBOOK, index=1, source="print(sorted([3, 1, 2]))\n7 * 6"),
        call("run_cell", path=NOTEBOOK, index=1),
        done(),
    )
    async with open_in_lab(lab, NOTEBOOK) as ynb:
        await until(lambda: len(ynb.ycells) == 2, "the document synced")
        await _wait_declared(jupyter, 1)
        await _start_task(lab, "add a cell under the first that sorts the list")
        await _requests(fake_openai, 4)
        results = _tool_results(fake_openai)
        assert "open in JupyterLab (the shared document)" in results[0]
        assert (
            "Inserted a code cell at index 1 of analysis.ipynb, open in JupyterLab" in (results[1])
        )
        assert "are in cell 1 of analysis.ipynb, open in JupyterLab" in results[2]
        # The window's copy has the cell under the first one, run, and marked.
        await until(lambda: len(ynb.ycells) == 3 and ynb.get_cell(1)["outputs"], "outputs")
        cell = ynb.get_cell(1)
        assert _sources(ynb) == [
            "xs = [3, 1, 2]",
            "print(sorted([3, 1, 2]))\n7 * 6",
            "print('below')",
        ]
        assert cell["metadata"]["hdsp"]["editedBy"] == "agent"
        assert cell["execution_count"] == 1
        assert [o["output_type"] for o in cell["outputs"]] == ["stream", "execute_result"]
        assert cell["outputs"][1]["data"]["text/plain"] == "42"
        # The room saves the document (autosave): the file then matches it.
        await until(
            lambda: (
                "7 * 6" in (workspace / NOTEBOOK).read_text()
                and '"execution_count": 1' in (workspace / NOTEBOOK).read_text()
            ),
            "the autosave",
        )
        saved = nbformat.read(str(workspace / NOTEBOOK), as_version=4)
        assert [c.source for c in saved.cells] == _sources(ynb)
        assert saved.cells[1].outputs[1]["data"]["text/plain"] == "42"


async def test_a_cell_the_user_edits_while_the_agent_prepares_is_a_conflict(
    rtc_lab: Lab, jupyter_process: JupyterProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    _write_notebook(workspace / NOTEBOOK, "df_x = [1, 2]\nprint(df_x)")
    gate = _script_held_edit(
        fake_openai, call("edit_cell", path=NOTEBOOK, index=0, source="print('agent')")
    )
    async with open_in_lab(rtc_lab, NOTEBOOK) as ynb:
        await _agent_has_read(rtc_lab, jupyter_process, ynb, fake_openai, "change the cell")
        ynb.set_cell(0, source="print('mine')")  # the user types meanwhile
        await anyio.lowlevel.checkpoint()  # (the change goes out with the provider's next turn)
        gate.set()
        await _requests(fake_openai, 3)
        result = _tool_results(fake_openai)[-1]
        assert "Conflict: cell 0 of analysis.ipynb was changed in JupyterLab" in result
        assert "print('mine')" in result
        assert _sources(ynb) == ["print('mine')"]


async def test_a_notebook_closed_mid_task_is_edited_in_its_file(
    rtc_lab: Lab, jupyter_process: JupyterProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    _write_notebook(workspace / NOTEBOOK, "a = 1")
    gate = _script_held_edit(fake_openai, call("insert_cell", path=NOTEBOOK, source="b = 2"))
    async with open_in_lab(rtc_lab, NOTEBOOK) as ynb:
        await _agent_has_read(rtc_lab, jupyter_process, ynb, fake_openai, "add a cell")
    # The window closed; the extension withdraws the notebook.
    await _wait_declared(jupyter_process, 0)
    gate.set()
    await _requests(fake_openai, 3)
    result = _tool_results(fake_openai)[-1]
    assert "Inserted a code cell at index 1 of analysis.ipynb (now 2 cells)" in result
    saved = nbformat.read(str(workspace / NOTEBOOK), as_version=4)
    assert [c.source for c in saved.cells] == ["a = 1", "b = 2"]
    # Opened again, the notebook shows the agent's cell.
    async with open_in_lab(rtc_lab, NOTEBOOK) as ynb:
        await until(lambda: _sources(ynb) == ["a = 1", "b = 2"], "the reopened notebook")


@pytest.fixture
def jupyter_without_rtc(daemon: DaemonProcess, jupyter_process: JupyterProcess) -> JupyterProcess:
    jupyter_process.start()  # (RTC off: jupyter_server_ydoc's disable_rtc)
    return jupyter_process


async def test_without_collaboration_the_file_is_edited(
    jupyter_without_rtc: JupyterProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    lab = Lab(jupyter_without_rtc)
    _write_notebook(workspace / NOTEBOOK, "a = 1")
    fake_openai.script(
        call("read_notebook", path=NOTEBOOK),
        call("insert_cell", path=NOTEBOOK, source="b = 2"),
        done(),
    )
    with anyio.fail_after(60):  # the link to hdspd is up (the status says when)
        while (await lab.status())["daemon"] != "running":  # noqa: ASYNC110
            await anyio.sleep(0.1)
    await _start_task(lab, "add a cell")
    await _requests(fake_openai, 3)
    results = _tool_results(fake_openai)
    assert "kernelspec python3" in results[0]  # the file's listing, no open document
    assert "Inserted a code cell at index 1 of analysis.ipynb (now 2 cells)." in results[1]
    assert "edited live" not in jupyter_without_rtc.stderr()
    saved = nbformat.read(str(workspace / NOTEBOOK), as_version=4)
    assert [c.source for c in saved.cells] == ["a = 1", "b = 2"]
    lab.close()
