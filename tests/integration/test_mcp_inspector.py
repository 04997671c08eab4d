"""`hdsp mcp serve` driven by a second, independent MCP client: the MCP
Inspector's CLI mode (`@modelcontextprotocol/inspector`, Node.js), which starts
the server over stdio as a host does. `npm ci` installs it into
tests/js-inspector/node_modules from the committed lockfile, once per lockfile
(tests/support/npm_locked.py); without Node.js and npm the test fails and says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.events import next_unanswered_ask
from tests.support.npm_locked import TESTS_DIR, install_locked

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

JS_DIR = TESTS_DIR / "js-inspector"


def install_inspector() -> Path:
    """The Inspector's launcher, installed from the lockfile if need be."""
    modules = install_locked(JS_DIR, "this test runs the MCP Inspector")
    return modules / ".bin" / "mcp-inspector"


async def inspector(
    daemon: DaemonProcess, workspace: Path, *method: str
) -> subprocess.CompletedProcess[bytes]:
    """One `mcp-inspector --cli` run against `hdsp mcp serve` started in `workspace`."""
    launcher = await anyio.to_thread.run_sync(install_inspector)
    command = [
        str(launcher),
        "--cli",
        "-e",
        f"HDSP_RUNTIME_DIR={daemon.runtime_dir}",
        sys.executable,
        "-m",
        "hdsp.client",
        "mcp",
        "serve",
        *method,
    ]
    with anyio.fail_after(120):
        return await anyio.run_process(command, cwd=workspace, check=False)


async def test_the_inspector_lists_and_calls_hdsps_tools(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    listed = await inspector(daemon, workspace, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr.decode()
    tools = {t["name"]: t for t in json.loads(listed.stdout)["tools"]}
    assert "code" in tools["execute_code"]["inputSchema"]["properties"]
    assert {"read_notebook", "edit_cell", "list_variables", "start_task"} <= set(tools)

    # A run waits for hdsp's approval (the Inspector offers no elicitation):
    # another hdsp client gives it.
    head = (await client.status()).head_seq
    result: list[subprocess.CompletedProcess[bytes]] = []
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            result.append(
                await inspector(
                    daemon,
                    workspace,
                    "--method",
                    "tools/call",
                    "--tool-name",
                    "execute_code",
                    "--tool-arg",
                    "code=6*7",
                )
            )

        tg.start_soon(call)
        task_id, ask = await next_unanswered_ask(client, head)
        await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
    done = result[0]
    assert done.returncode == 0, done.stderr.decode()
    answer = json.loads(done.stdout)
    assert not answer.get("isError")
    assert answer["content"][0]["text"].splitlines()[-1] == "Out[1]: 42"
