"""The panel in a real browser: Galata (Playwright) driving Debian's chromium against a
real JupyterLab with hdsp's plugin, a real hdspd and the scripted fake model.

Python owns the processes: each test starts them, scripts the model, and runs one
spec of clients/jupyterlab/ui-tests/ (`npx playwright test <spec>`) with their
addresses in the environment; a failing spec fails the test with Playwright's
output. Without chromium or the npm packages the tests fail and say how to get
them (`make test` installs both): nothing is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import jupyterlab
import pytest

from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.jupyter_process import JupyterProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
UI_TESTS = REPO / "clients" / "jupyterlab" / "ui-tests"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: The frontend half is built on another branch; until it is merged, the scenarios
#: that need its panel are expected to fail (and say so), and pass once it is here.
FRONTEND = REPO / "clients" / "jupyterlab" / "frontend"
needs_frontend = pytest.mark.xfail(
    not FRONTEND.is_dir(),
    reason="the panel's frontend (clients/jupyterlab/frontend) is not in this tree yet",
    strict=True,
)


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


@pytest.fixture
def lab_process(
    daemon_process: DaemonProcess, workspace: Path, request: pytest.FixtureRequest
) -> Iterator[JupyterProcess]:
    """JupyterLab as Galata expects it (its in-page helpers, the app exposed), with
    the token kept: the specs send it as an Authorization header."""
    proc = JupyterProcess(
        daemon_process.root,
        hdsp_runtime_dir=daemon_process.runtime_dir,
        root_dir=workspace,
        app="lab",
        config={
            "LabServerApp": {
                "extra_labextensions_path": [str(Path(jupyterlab.__file__).parent / "galata")]
            },
            "LabApp": {
                "expose_app_in_browser": True,
                "workspaces_dir": str(daemon_process.root / "lab-workspaces"),
            },
        },
    )
    try:
        yield proc
    finally:
        proc.stop()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print(f"---- jupyter lab stderr ----\n{proc.stderr()}")


class Spec:
    """One Galata spec, run by Playwright in a subprocess."""

    def __init__(self, lab: JupyterProcess, output: Path) -> None:
        self.control = output / "control"
        self.control.mkdir(parents=True)
        self.output = output / "playwright"
        self.env = {
            **os.environ,
            "HDSP_LAB_URL": lab.url.rstrip("/"),
            "HDSP_LAB_TOKEN": lab.token,
            "HDSP_CONTROL_DIR": str(self.control),
            "HDSP_UI_OUTPUT": str(self.output),
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

    def run(self, spec: str) -> str:
        self.start(spec)
        return self.finish()


@pytest.fixture
def spec(lab_process: JupyterProcess, tmp_path: Path) -> Iterator[Spec]:
    browser_tools()
    lab_process.start()
    runner = Spec(lab_process, tmp_path)
    try:
        yield runner
    finally:
        if runner.proc is not None and runner.proc.poll() is None:
            runner.proc.kill()
            runner.proc.communicate()


def test_harness_jupyterlab_loads_and_the_page_reaches_the_extension(
    daemon: DaemonProcess, spec: Spec
) -> None:
    out = spec.run("harness.spec.ts")
    assert "1 passed" in out, out


@needs_frontend
def test_scenario_1_a_task_streams_its_text_and_completes(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec
) -> None:
    text = (
        "The file data.csv has two columns, x and y, and two rows of numbers; "
        "y is always one more than x."
    )
    spec.env["HDSP_STREAMED_TEXT"] = text
    # Streamed at reading pace (about 3 s in all), so the panel shows it part-way.
    fake_openai.script(
        (
            FakeReply.text(text, chunk_size=4)
            + FakeReply.tool_calls([ToolCall("attempt_completion", json.dumps({"result": text}))])
        ).paced(0.1)
    )
    out = spec.run("task.spec.ts")
    assert "HDSP_FIRST_TOKEN_MS=" in out, out
    # The prompt-to-first-token time on screen, for the closing note.
    print(next(line for line in out.splitlines() if "HDSP_FIRST_TOKEN_MS=" in line))


@needs_frontend
def test_scenario_6_the_panel_follows_an_hdspd_restart(daemon: DaemonProcess, spec: Spec) -> None:
    spec.start("connection.spec.ts")
    spec.wait_for_request("restart-hdspd")
    daemon.stop(signal.SIGKILL)
    daemon.start()
    spec.finish()
