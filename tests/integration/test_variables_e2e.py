"""Kernel variables through the real daemon: the scripted model builds a frame
with execute_code, then calls list_variables and describe_variable (read tools:
no ask), and a client lists the same with ListVariables and `hdsp vars`. The
inspections leave the kernel's execution count alone."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from hdsp.client import Client
from hdsp.daemon.tools import DescribeVariableTool, ListVariablesTool, ToolCategory
from hdsp.protocol import CellOutput, MessageEvent, TaskCompleted, TaskInteractive
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.model_requests import tool_results
from tests.support.scripted_turns import call, done, start

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

BUILD = """
import pandas as pd
df = pd.DataFrame({"x": range(1000), "y": [i * 0.5 for i in range(1000)]})
label = "\\x1b]52;c;aGk=\\x07 \\x1b[2Kfake"
class Unprintable:
    def __repr__(self):
        raise RuntimeError("nope")
bad = Unprintable()
"""


def describe(name: str) -> FakeReply:
    return FakeReply.tool_calls([ToolCall("describe_variable", json.dumps({"name": name}))])


def test_the_variable_tools_only_read() -> None:
    assert ListVariablesTool.category is ToolCategory.READ
    assert DescribeVariableTool.category is ToolCategory.READ


async def test_the_agent_lists_and_describes_variables_and_clients_see_them(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        call("execute_code", code=BUILD),
        call("list_variables"),
        describe("df"),
        describe("df; import os"),
        call("execute_code", code="1 + 1"),
        done("described"),
    )
    task_id, head = await start(client, "describe df", tmp_path, always_allow_execute=True)
    events = await collect_turn(client, task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    assert not any(isinstance(e.data, TaskInteractive) for e in events)  # nothing asked

    listing = tool_results(fake_openai, 2)[-1]
    assert "df: pandas.DataFrame, shape (1000, 2)" in listing
    assert "columns: x (int64), y (float64)" in listing
    assert "bad: Unprintable" in listing and "raised RuntimeError" in listing
    described = tool_results(fake_openai, 3)[-1]
    assert "-- describe()" in described and "mean" in described
    assert "-- null counts" in described
    refused = tool_results(fake_openai, 4)[-1]
    assert "not a variable name" in refused

    # The inspections took no execution count: the second cell is number 2.
    cells = [
        msgspec.json.decode(e.data.payload[0].message.text or "", type=CellOutput)
        for e in events
        if isinstance(e.data, MessageEvent)
        and e.data.payload[0].message.say == "cell_output"
        and not e.data.payload[0].message.partial
    ]
    assert [c.execution_count for c in cells] == [1, 2]

    # A client reads the same list (the panel's and `hdsp vars`'s command).
    found = await client.list_variables(task_id)
    assert found.status == "ok"
    names = {v.name: v for v in found.variables}
    assert names["df"].shape == [1000, 2]
    assert [c.name for c in names["df"].columns] == ["x", "y"]

    r = await run_hdsp(daemon.runtime_dir, "vars", task_id[:8])
    assert r.returncode == 0, r.stderr
    assert "df  pandas.DataFrame  shape (1000, 2)" in r.stdout
    assert "columns: x: int64, y: float64" in r.stdout
    # The user's values are escaped for the terminal.
    assert "\x1b" not in r.stdout and "\\x1b]52;c;aGk=\\x07" in r.stdout
    r = await run_hdsp(daemon.runtime_dir, "--json", "vars", task_id[:8])
    assert '"name":"df"' in r.stdout and "\x1b" not in r.stdout


async def test_a_task_that_ran_no_code_has_no_kernel_and_none_is_started(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(done("nothing"))
    task_id, head = await start(client, "hi", tmp_path)
    await collect_turn(client, task_id, head)
    found = await client.list_variables(task_id)
    assert found.status == "no_kernel"
    assert (await client.list_kernels()).kernels == []
    r = await run_hdsp(daemon.runtime_dir, "vars", task_id[:8])
    assert r.returncode == 0 and "no kernel yet" in r.stdout
