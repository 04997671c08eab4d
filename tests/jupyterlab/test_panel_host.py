"""The panel as a document host through the server extension (issue 17, RTC off),
without a browser: this test plays the panel's part on the extension's HTTP
surface (`HostDocuments` and `AnswerDocumentEdit` through `POST hdsp/command`,
`documentEditRequested` from the events socket), against a real Jupyter server
and a real hdspd running a task on the scripted model. What a page may declare is
checked; a panel that stops answering costs the agent one bounded wait, then its
edit goes to the file."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from tornado.websocket import WebSocketClientConnection

from hdsp.daemon.tools.live_notebook import HOST_ANSWER_LIMIT
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.jupyterlab.conftest import Lab
from tests.support.jupyter_process import JupyterProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

_v4: Any = nbformat.v4
HOST = "panel-test-window"


def call(name: str, **args: Any) -> FakeReply:
    return FakeReply.tool_calls([ToolCall(name, json.dumps(args))])


def write_notebook(path: Path, *sources: str) -> None:
    nb = _v4.new_notebook()
    nb.cells = [_v4.new_code_cell(s, id=f"c{i}") for i, s in enumerate(sources)]
    nbformat.write(nb, str(path))


async def declare(
    lab: Lab, paths: list[str], changed: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    command = {"commandName": "HostDocuments", "hostId": HOST, "route": "panel", "paths": paths}
    return await lab.command(command | (changed or {}))


async def connected_socket(lab: Lab) -> WebSocketClientConnection:
    ws = await lab.events()
    while True:
        text = await ws.read_message()
        assert text is not None
        frame = json.loads(text)
        if frame["kind"] == "connection" and frame["state"] == "connected":
            return ws


async def next_request(ws: WebSocketClientConnection) -> dict[str, Any]:
    """The next documentEditRequested the socket brings (the test's timeout bounds it)."""
    while True:
        text = await ws.read_message()
        assert text is not None, "the events socket closed"
        frame = json.loads(text)
        if (
            frame["kind"] == "event"
            and frame["event"]["data"]["eventName"] == "documentEditRequested"
        ):
            return dict(frame["event"]["data"]["payload"][0])


async def start_task(lab: Lab) -> str:
    code, body = await lab.command(
        {
            "commandName": "StartNewTask",
            "data": {
                "text": "add a cell",
                "configuration": {"approvals": {"alwaysAllowWrite": True}},
            },
        }
    )
    assert code == 200, body
    return str(body["result"]["taskId"])


def tool_results(fake: FakeOpenAI) -> list[str]:
    return [str(m["content"]) for m in fake.requests[-1]["messages"] if m["role"] == "tool"]


async def test_a_page_declares_only_as_a_panel_and_only_notebooks_below_the_root(
    lab: Lab, workspace: Path, tmp_path: Path
) -> None:
    await connected_socket(lab)
    write_notebook(workspace / "a.ipynb", "x = 1")
    (tmp_path / "outside.ipynb").write_text("{}")
    os.symlink(tmp_path / "outside.ipynb", workspace / "escape.ipynb")
    for fields, status in (
        ({"route": "rtc"}, 403),  # never the extension's own route
        ({"hostId": "rtc-123"}, 403),  # nor its host
        ({"paths": ["../outside.ipynb"]}, 400),
        ({"paths": ["escape.ipynb"]}, 400),  # a symlink that leads out
    ):
        code, body = await declare(lab, ["a.ipynb"], fields)
        assert code == status, (fields, body)
        assert body["error"]["code"] == "invalid_request"
    # A page answers only for a panel.
    code, body = await lab.command(
        {
            "commandName": "AnswerDocumentEdit",
            "data": {"requestId": "r", "hostId": "rtc-123", "status": "ok"},
        }
    )
    assert code == 403, body

    code, body = await declare(lab, ["a.ipynb", "/a.ipynb"], {"leaseSeconds": 30})
    assert code == 200, body
    real = str((workspace / "a.ipynb").resolve())
    assert body["result"] == {"hostId": HOST, "paths": 1}
    assert body["paths"] == {"a.ipynb": real, "/a.ipynb": real}
    assert abs(body["serverTime"] - time.time()) < 60


async def test_the_agent_edits_the_panels_notebook_and_its_file_when_the_panel_is_silent(
    lab: Lab, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    write_notebook(workspace / "a.ipynb", "x = 1")
    ws = await connected_socket(lab)
    code, body = await declare(lab, ["a.ipynb"])
    assert code == 200, body
    absolute = body["paths"]["a.ipynb"]
    fake_openai.script(
        call("read_notebook", path="a.ipynb"),
        call("insert_cell", path="a.ipynb", index=1, source="y = 2"),
        call("attempt_completion", result="done"),
    )
    await start_task(lab)

    # The read comes to this "panel", which answers it.
    read = await next_request(ws)
    assert (read["hostId"], read["path"], read["edit"]["op"]) == (HOST, absolute, "read")
    cells = [{"id": "c0", "cellType": "code", "source": "x = 1"}]
    answer = {"requestId": read["requestId"], "hostId": HOST, "status": "ok", "cells": cells}
    code, body = await lab.command({"commandName": "AnswerDocumentEdit", "data": answer})
    assert (code, body["result"]) == (200, {"taken": True})

    # The checkpoint before the insert keeps the notebook as the window shows it.
    snapshot = await next_request(ws)
    assert (snapshot["path"], snapshot["edit"]["op"]) == (absolute, "snapshot")
    shown = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", id="c0")])
    answer = {
        "requestId": snapshot["requestId"],
        "hostId": HOST,
        "status": "ok",
        "notebook": json.loads(nbformat.writes(shown)),
    }
    code, body = await lab.command({"commandName": "AnswerDocumentEdit", "data": answer})
    assert (code, body["result"]) == (200, {"taken": True})

    # Then the window goes away without a word: the insert waits for it at most
    # HOST_ANSWER_LIMIT seconds, then goes to the file.
    silent = await next_request(ws)
    assert silent["edit"]["op"] == "insert" and silent["edit"]["afterId"] == "c0"
    assert silent["edit"]["marker"]["editedBy"] == "agent"
    started = anyio.current_time()
    await fake_openai.wait_for_requests_async(3)
    waited = anyio.current_time() - started
    assert HOST_ANSWER_LIMIT - 1 <= waited < HOST_ANSWER_LIMIT + 20, waited
    results = tool_results(fake_openai)
    assert "open in JupyterLab (the notebook's window)" in results[0]
    assert (
        "Inserted a code cell at index 1 of a.ipynb (now 2 cells) (JupyterLab did not answer "
        "within 10 s, so the file was changed instead)." in results[1]
    ), results[1]
    saved = nbformat.read(str(workspace / "a.ipynb"), as_version=4)
    assert [c.source for c in saved.cells] == ["x = 1", "y = 2"]
    # A late answer is not taken.
    late = {"requestId": silent["requestId"], "hostId": HOST, "status": "ok"}
    code, body = await lab.command({"commandName": "AnswerDocumentEdit", "data": late})
    assert (code, body["result"]) == (200, {"taken": False})


@pytest.fixture
def jupyter_without_live_edits(jupyter_process: JupyterProcess) -> JupyterProcess:
    jupyter_process.extra_config["HdspExtension"] = {"live_edits": False}
    jupyter_process.start()
    return jupyter_process


async def test_with_live_edits_off_a_panel_holds_nothing(
    daemon: Any,
    jupyter_without_live_edits: JupyterProcess,
    fake_openai: FakeOpenAI,
    workspace: Path,
) -> None:
    lab = Lab(jupyter_without_live_edits)
    try:
        write_notebook(workspace / "a.ipynb", "x = 1")
        await connected_socket(lab)
        code, body = await declare(lab, ["a.ipynb"])
        assert code == 200, body
        assert body["result"]["paths"] == 0 and body["paths"] == {}
        fake_openai.script(
            call("read_notebook", path="a.ipynb"),
            call("insert_cell", path="a.ipynb", source="y = 2"),
            call("attempt_completion", result="done"),
        )
        await start_task(lab)
        await fake_openai.wait_for_requests_async(3)
        assert (
            "Inserted a code cell at index 1 of a.ipynb (now 2 cells)."
            in tool_results(fake_openai)[1]
        )
    finally:
        lab.close()
