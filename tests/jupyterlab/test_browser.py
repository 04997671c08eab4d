"""The panel in a real browser: Galata (Playwright) driving Debian's chromium against a
real JupyterLab with hdsp's plugin, a real hdspd and the scripted fake model.

Python owns the processes: each test starts them, scripts the model, and runs one
spec of clients/jupyterlab/ui-tests/ (`npx playwright test <spec>`) with their
addresses in the environment; a failing spec fails the test with Playwright's
output. Without chromium or the npm packages the tests fail and say how to get
them (`make test` installs both): nothing is skipped.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jupyterlab
import pytest
from PIL import Image

from hdsp.daemon.tasks.budget import SUMMARY_PROMPT
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import cli_env
from tests.support.daemon_process import DaemonProcess, call_failed
from tests.support.jupyter_process import JupyterProcess
from tests.support.terminal import Terminal

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
UI_TESTS = REPO / "clients" / "jupyterlab" / "ui-tests"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def browser_tools() -> None:
    """Fail, saying what is missing, unless chromium and the npm packages are here."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"No browser at {CHROMIUM}: the browser tests need Debian's chromium "
            "(`apt-get install -y chromium`; `make test` installs it), or CHROMIUM=/path."
        )
    if not (UI_TESTS / "node_modules" / "@jupyterlab" / "galata").is_dir():
        pytest.fail(
            f"Galata is not installed in {UI_TESTS}: run `npm ci` there "
            "(with PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1; `make test` does it)."
        )


def galata_lab(
    daemon: DaemonProcess, root_dir: Path, config: Mapping[str, Any] | None = None, **options: Any
) -> JupyterProcess:
    """JupyterLab beside `daemon` as Galata expects it (its in-page helpers, the
    app exposed), with the token kept: the specs send it as an Authorization
    header. `config` adds sections; `options` as for JupyterProcess."""
    return JupyterProcess.beside(
        daemon,
        root_dir,
        app="lab",
        config={
            "LabServerApp": {
                "extra_labextensions_path": [str(Path(jupyterlab.__file__).parent / "galata")]
            },
            "LabApp": {
                "expose_app_in_browser": True,
                "workspaces_dir": str(daemon.root / "lab-workspaces"),
            },
            **(config or {}),
        },
        **options,
    )


@pytest.fixture
def lab_process(
    daemon_process: DaemonProcess, workspace: Path, request: pytest.FixtureRequest
) -> Iterator[JupyterProcess]:
    """JupyterLab for the specs."""
    proc = galata_lab(daemon_process, workspace)
    try:
        yield proc
    finally:
        proc.finish(show_log=call_failed(request))


class Spec:
    """One Galata spec, run by Playwright in a subprocess."""

    def __init__(self, lab: JupyterProcess, output: Path, workspace: Path) -> None:
        self.control = output / "control"
        self.control.mkdir(parents=True)
        self.output = output / "playwright"
        self.env = {
            **os.environ,
            "HDSP_LAB_URL": lab.url.rstrip("/"),
            "HDSP_LAB_TOKEN": lab.token,
            "HDSP_CONTROL_DIR": str(self.control),
            "HDSP_UI_OUTPUT": str(self.output),
            "HDSP_WORKSPACE": str(workspace),
            "CHROMIUM": CHROMIUM,
            "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
            "CI": "1",
        }
        self.proc: subprocess.Popen[str] | None = None

    def start(self, spec: str) -> None:
        self.proc = subprocess.Popen(
            ["npx", "--no-install", "playwright", "test", f"tests/{spec}"],
            cwd=UI_TESTS,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait_for_request(self, name: str, timeout: float = 120) -> None:
        """Wait until the spec asks for `name` (a file in the control dir)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while not (self.control / name).exists():
            if self.proc.poll() is not None:
                self.finish()  # fails, with the spec's output
                raise AssertionError(f"the spec ended without asking for {name}")
            assert time.monotonic() < deadline, f"the spec did not ask for {name}"
            time.sleep(0.05)  # the spec writes the file when it is ready

    def serve(self, name: str, action: Callable[[str], object] = lambda body: "") -> None:
        """Wait until the spec asks for `name` (control.ts's `request`), do
        `action(body)` and tell the spec it is done, with what it returned."""
        self.wait_for_request(name)
        result = action((self.control / name).read_text())
        (self.control / f"{name}.tmp").write_text(str(result))
        (self.control / f"{name}.tmp").rename(self.control / f"{name}.done")

    def finish(self, timeout: float = 240) -> str:
        assert self.proc is not None
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            raise AssertionError(f"the spec ran over {timeout} s:\n{out}") from None
        assert self.proc.returncode == 0, f"the spec failed:\n{out}"
        return out

    def kill(self) -> None:
        """End Playwright if it still runs (a test that failed mid-spec)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()

    def run(self, spec: str) -> str:
        self.start(spec)
        return self.finish()


@pytest.fixture
def spec(lab_process: JupyterProcess, tmp_path: Path, workspace: Path) -> Iterator[Spec]:
    browser_tools()
    lab_process.start()
    runner = Spec(lab_process, tmp_path, workspace)
    try:
        yield runner
    finally:
        runner.kill()


def test_harness_jupyterlab_loads_and_the_page_reaches_the_extension(
    daemon: DaemonProcess, spec: Spec
) -> None:
    out = spec.run("harness.spec.ts")
    assert "1 passed" in out, out


def call(name: str, **args: object) -> FakeReply:
    return FakeReply.tool_calls([ToolCall(name, json.dumps(args))])


def done(text: str = "Done.") -> FakeReply:
    return call("attempt_completion", result=text)


def printed(out: str, key: str) -> str:
    """A `KEY=value` line the spec printed, printed again for pytest -s."""
    line = next((line for line in out.splitlines() if f"{key}=" in line), None)
    assert line is not None, f"the spec printed no {key}:\n{out}"
    value = line.split(f"{key}=", 1)[1].strip()
    print(f"{key}={value}")
    return value


STREAMED = (
    "The file data.csv has two columns, x and y, and two rows of numbers; "
    "y is always one more than x."
)


def streamed_reply(gate: threading.Event) -> FakeReply:
    """STREAMED in small chunks, held after the role chunk and a dozen pieces of
    text (about half of it) until `gate` is set, then a completion."""
    return (FakeReply.text(STREAMED, chunk_size=4) + done(STREAMED)).held_after(13, gate)


def test_scenario_1_a_task_streams_its_text_and_completes(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    gate = threading.Event()
    spec.env["HDSP_STREAMED_TEXT"] = STREAMED
    spec.env["HDSP_HELD_TEXT"] = STREAMED[:40]  # what shows while the stream is held
    fake_openai.script(streamed_reply(gate))
    spec.start("task.spec.ts")
    spec.serve("release-stream", lambda body: gate.set())
    out = spec.finish()
    panel_ms = float(printed(out, "HDSP_FIRST_TOKEN_MS"))

    # The CLI's equivalent, same model script: `hdsp run` on a terminal, from its
    # start to the first streamed text on the screen.
    gate = threading.Event()
    fake_openai.script(streamed_reply(gate))
    started = time.monotonic()
    with Terminal(
        daemon.runtime_dir, "run", "--workspace", str(workspace), "Describe data.csv"
    ) as term:
        # (It draws whole words of a reply still streaming: the first is enough.)
        term.wait_for(
            lambda: any(line.startswith("The") for line in term.lines), "the streamed text"
        )
        cli_ms = (time.monotonic() - started) * 1000
        gate.set()
        assert term.finish() == 0, term.text
    print(f"HDSP_CLI_FIRST_TOKEN_MS={cli_ms:.0f}")
    print(f"first streamed token on screen: panel {panel_ms:.0f} ms, CLI {cli_ms:.0f} ms")


def test_scenario_2_a_write_is_approved_and_another_denied_with_a_reason(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    reason = "Keep that file, it is the only copy"
    spec.env["HDSP_DENY_REASON"] = reason
    fake_openai.script(
        call("write_to_file", path="summary.md", content="# Summary\n\nx and y, y = x + 1.\n"),
        call("write_to_file", path="delete-me.txt", content="gone\n"),
        done("Wrote summary.md; left delete-me.txt alone."),
    )
    spec.run("approvals.spec.ts")
    assert (workspace / "summary.md").read_text().startswith("# Summary")
    assert not (workspace / "delete-me.txt").exists()
    # The model received the reason with the denial.
    results = [m for m in fake_openai.requests[2]["messages"] if m["role"] == "tool"]
    assert reason in str(results[-1]["content"]), results[-1]


def tiny_png() -> str:
    image = Image.new("RGB", (40, 20), (200, 40, 40))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_scenario_3_live_output_an_image_and_stop_interrupts_a_long_cell(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    loop = (
        "import os, time\n"
        "for i in range(3):\n"
        "    print(f'tick {i}', flush=True)\n"
        "    time.sleep(0.4)\n"
        "while not os.path.exists('release-loop'):  # the browser test writes it\n"
        "    time.sleep(0.05)\n"
        "print('loop done')\n"
    )
    image = (
        "import base64\n"
        "from IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode({tiny_png()!r})))\n"
    )
    long = "import time\nprint('long cell started', flush=True)\ntime.sleep(600)\n"
    fake_openai.script(
        call("execute_code", code=loop),
        call("execute_code", code=image),
        call("execute_code", code=long),
        done(),
    )
    out = spec.run("kernel.spec.ts")
    printed(out, "HDSP_STOP_MS")


def test_the_variables_view_lists_the_frame_the_agent_built(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec
) -> None:
    build = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'x': range(1000), 'y': [i / 2 for i in range(1000)]})\n"
    )
    fake_openai.script(
        call("execute_code", code=build),
        call("execute_code", code="later = len(df)"),
        done(),
    )
    spec.run("variables.spec.ts")


def test_scenario_4_a_reload_mid_task_loses_nothing_and_resumes_live(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec
) -> None:
    gate = threading.Event()
    spec.env["HDSP_STREAMED_TEXT"] = STREAMED
    fake_openai.script(
        FakeReply.text("Looking at the data first.")
        + FakeReply.tool_calls([ToolCall("read_file", json.dumps({"path": "data.csv"}))]),
        streamed_reply(gate),
    )
    spec.start("reload.spec.ts")
    spec.serve("release-stream", lambda body: gate.set())
    spec.finish()


def test_scenario_5_two_windows_and_the_cli_the_first_answer_wins(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    held = threading.Event()
    fake_openai.script(
        call("write_to_file", path="first.txt", content="one\n"),
        call("write_to_file", path="second.txt", content="two\n"),
        (FakeReply.text("Leaving second.txt out.") + done()).held_after(2, held),
    )

    def hdsp_answer(task_id: str) -> int:
        return subprocess.run(
            [sys.executable, "-m", "hdsp.client", "answer", task_id, "--yes"],
            env=cli_env(daemon.runtime_dir),
            capture_output=True,
            timeout=60,
            check=False,
        ).returncode

    def late_answer(task_id: str) -> int:
        # The denial went first: this --yes finds no ask (the model's next
        # reply is held, so the task waits on nothing), and writes nothing.
        code = hdsp_answer(task_id)
        held.set()
        return code

    spec.start("two-windows.spec.ts")
    spec.serve("cli-approve", hdsp_answer)
    spec.serve("cli-approve-late", late_answer)
    spec.finish()
    assert (workspace / "first.txt").read_text() == "one\n"
    assert not (workspace / "second.txt").exists()


def test_scenario_6_the_panel_follows_an_hdspd_restart(daemon: DaemonProcess, spec: Spec) -> None:
    spec.start("connection.spec.ts")
    spec.wait_for_request("restart-hdspd")
    daemon.stop(signal.SIGKILL)
    daemon.start()
    spec.finish()


def test_scenario_7_edit_and_resend_fork_and_delete_in_the_panel(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec
) -> None:
    fake_openai.script(done("first answer"), done("old reply"), done("new reply"))
    spec.run("history.spec.ts")
    # The model was sent the edited message, not the one it replaced.
    resent = json.dumps(fake_openai.requests[2]["messages"])
    assert "Now plot x" in resent and "Now plot y" not in resent and "old reply" not in resent
    assert len(fake_openai.requests) == 3


def test_scenario_8_a_message_steers_the_running_turn(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec
) -> None:
    gate = threading.Event()
    fake_openai.script(
        (
            FakeReply.text("Reading the data first.")
            + FakeReply.tool_calls([ToolCall("read_file", json.dumps({"path": "data.csv"}))])
        ).held_after(2, gate),
        done("steered answer"),
    )
    spec.start("steer.spec.ts")
    spec.serve("release-turn", lambda body: gate.set())
    spec.finish()
    # The steered message went in the same turn's next request, after the read.
    assert len(fake_openai.requests) == 2
    roles = [(m["role"], json.dumps(m.get("content"))) for m in fake_openai.requests[1]["messages"]]
    read = next(i for i, (role, _) in enumerate(roles) if role == "tool")
    steered = next(i for i, (_, text) in enumerate(roles) if "Use column y only" in text)
    assert read < steered


def test_scenario_9_condense_rewind_across_the_summary_and_delete_a_tool_call(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec
) -> None:
    fake_openai.script(
        call("read_file", path="data.csv"),
        done("first answer"),
        done("second answer"),
        done("third answer"),
        FakeReply.text("Task: describe data.csv. Decisions: plot y, then x."),
        done("fourth answer"),
        done("fifth answer"),
    )
    spec.run("condense-rewind.spec.ts")
    requests = [json.dumps(body["messages"]) for body in fake_openai.requests]
    assert len(requests) == 7
    assert SUMMARY_PROMPT[:60] in requests[4]
    # After the rewind across the summary: what it had condensed is sent again,
    # the summary and the rewound turn are not.
    assert "[Summary of the earlier conversation" not in requests[5]
    assert "Now plot y" in requests[5] and "first answer" in requests[5]
    assert "And x?" not in requests[5] and "third answer" not in requests[5]
    # After the deletion: the read and its result are never sent again.
    assert '"read_file"' in requests[5] and '"read_file"' not in requests[6]
    assert "x,y" in requests[5] and "x,y" not in requests[6]
    assert "Then z" in requests[6]


def test_scenario_nbctx_describe_df_runs_in_the_notebooks_own_kernel(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec
) -> None:
    """nbctx (issue 17): the user's `df`, built in a notebook, is what the agent's
    code sees: the prompt carried the notebook and cell (chips), the server
    extension attached the notebook's kernel, the task ran there."""
    fake_openai.script(
        call("execute_code", code="print(list(df.columns))"),
        done("df has two columns: region and sales."),
    )
    spec.run("notebook-context.spec.ts")
    # The model read the context: the notebook and the active cell, not the
    # outline the user removed.
    user = [m for m in fake_openai.requests[0]["messages"] if m["role"] == "user"][-1]
    text = json.dumps(user["content"])
    assert "<notebook_context>" in text and "sales.ipynb" in text, text
    assert '\\"cell\\"' in text and "outline" not in text.split("</notebook_context>")[0]
    # Its code ran in the notebook's kernel: the real columns came back.
    tool = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert "['region', 'sales']" in json.dumps(tool["content"])


def test_scenario_agents_the_tree_and_its_agents_asks_in_the_panel(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    """lead calls writer and reviewer in one reply; writer writes two files in
    one reply (both ask at once). The panel shows the tree and answers one ask
    from lead's view, the other from writer's (agents.spec.ts)."""

    def hdsp(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "hdsp.client", *args],
            env=cli_env(daemon.runtime_dir),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    hdsp("agent", "add", "lead", "Leads.", "--groups", "read,agents")
    hdsp("agent", "add", "writer", "Writes files.", "--groups", "read,edit")
    hdsp("agent", "add", "reviewer", "Reviews.", "--groups", "read")

    def agent_of(body: dict[str, object]) -> str:
        system = str(body["messages"][0]["content"])  # type: ignore[index]
        return system.split('"')[1]  # You are "NAME". ...

    def results(body: dict[str, object]) -> list[str]:
        return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]  # type: ignore[attr-defined,index]

    def respond(body: dict[str, object]) -> FakeReply | None:
        name, got = agent_of(body), results(body)
        if name == "lead":
            if not got:
                return FakeReply.tool_calls(
                    [
                        ToolCall(
                            "call_agent",
                            json.dumps(
                                {"agent_name": "writer", "message": "Write a.txt and b.txt"}
                            ),
                        ),
                        ToolCall(
                            "call_agent",
                            json.dumps({"agent_name": "reviewer", "message": "Review data.csv"}),
                        ),
                    ]
                )
            return done("lead: " + " | ".join(got))
        if name == "reviewer":
            return call("finish", message="looks fine")
        if not got:
            return FakeReply.tool_calls(
                [
                    ToolCall("write_to_file", json.dumps({"path": "a.txt", "content": "A\n"})),
                    ToolCall("write_to_file", json.dumps({"path": "b.txt", "content": "B\n"})),
                ]
            )
        written = sorted(p.name for p in workspace.glob("*.txt"))
        return call("finish", message="wrote " + ", ".join(written))

    fake_openai.responder = respond
    spec.start("agents.spec.ts")
    spec.serve(
        "start-tree",
        lambda body: hdsp(
            "run",
            "Write two files and have them reviewed",
            "--agent",
            "lead",
            "--workspace",
            str(workspace),
            "--auto-approve",
            "subtasks",
            "--detach",
        ).strip(),
    )
    spec.finish()
    assert (workspace / "a.txt").read_text() == "A\n"
    assert not (workspace / "b.txt").exists()
