"""hdsp as a Jupyter AI 3 persona, in a real browser: Jupyter AI (in a venv of
its own, without hdsp) loads the persona file `hdsp acp --jupyter-ai-persona`
wrote into `.jupyter/personas/`, its own ACP client starts this tree's `hdsp
acp` from hdsp's venv, and the persona's answer, from a real hdspd and the
scripted model, shows in Jupyter AI's chat."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.jupyter_ai_env import jupyter_ai_python
from tests.support.jupyter_process import JupyterProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

HERE = Path(__file__).resolve().parent
UI_TESTS = HERE.parents[1] / "clients" / "jupyterlab" / "ui-tests"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def _browser() -> None:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"No browser at {CHROMIUM}: `apt-get install -y chromium`, or CHROMIUM=/path.")
    if not (UI_TESTS / "node_modules" / "playwright-core").is_dir():
        pytest.fail(f"playwright-core is not installed in {UI_TESTS}: run `npm ci` there.")


async def test_the_hdsp_persona_answers_in_jupyter_ais_chat(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    _browser()
    python = await anyio.to_thread.run_sync(jupyter_ai_python)
    root = tmp_path / "lab"
    personas = root / ".jupyter" / "personas"
    personas.mkdir(parents=True)
    (root / "hdsp.chat").write_text("")
    # As a user does it: `hdsp acp --jupyter-ai-persona > .jupyter/personas/hdsp_persona.py`.
    written = await run_hdsp(daemon.runtime_dir, "acp", "--jupyter-ai-persona")
    assert written.returncode == 0, written.stderr
    (personas / "hdsp_persona.py").write_text(written.stdout)
    fake_openai.script(FakeReply.text("Hello from hdsp, answering in Jupyter AI."))
    lab = JupyterProcess.beside(
        daemon,
        root,
        app="lab",
        python=python,
        hdsp_extension=False,
        # Jupyter AI's MCP server takes port 3001 unless told to pick a free one.
        config={"MCPExtensionApp": {"mcp_port": 0}},
        env={"XDG_STATE_HOME": str(tmp_path / "state")},
    )
    await anyio.to_thread.run_sync(lab.start)
    try:
        with anyio.fail_after(300):
            done = await anyio.run_process(
                ["node", str(HERE / "jupyter_ai_chat.js")],
                env={
                    **os.environ,
                    "NODE_PATH": str(UI_TESTS / "node_modules"),
                    "LAB_URL": lab.url,
                    "LAB_TOKEN": lab.token,
                    "CHAT": "hdsp.chat",
                    "PROMPT": "@hdsp Say hello",
                    "EXPECT": "Hello from hdsp, answering in Jupyter AI.",
                    "CHROMIUM": CHROMIUM,
                    "SCREENSHOT": str(tmp_path / "jupyter-ai.png"),
                },
                check=False,
            )
        assert done.returncode == 0, (
            f"{done.stderr.decode()}\n--- chat ---\n{done.stdout.decode()}\n"
            f"--- lab ---\n{lab.stderr()[-6000:]}"
        )
    finally:
        await anyio.to_thread.run_sync(lab.stop)
    # The chat's question is an ordinary hdsp task in the chat's directory, which
    # every hdsp client sees.
    (item,) = (await client.list_tasks()).tasks
    assert item.workspace == str(root)
    snapshot = await client.get_task(item.id)
    assert snapshot.state == "completed"
    assert any("Say hello" in (m.text or "") for m in snapshot.messages if m.say == "text")
