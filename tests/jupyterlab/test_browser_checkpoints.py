"""The checkpoints view of the panel in a real browser (issue 20): the agent
overwrites a file and runs code; the user restores the first checkpoint from the
panel and the file is back; a restore with the kernel is approved in the panel
and replays (the spec is clients/jupyterlab/ui-tests/tests/checkpoints.spec.ts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.jupyterlab import test_browser as browser
from tests.jupyterlab.test_browser import Spec, call, done
from tests.support.daemon_process import DaemonProcess

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# The browser tests' fixtures: JupyterLab as Galata expects it, and the spec runner.
lab_process = browser.lab_process
spec = browser.spec


def test_a_checkpoint_restored_from_the_panel_brings_the_file_back(
    daemon: DaemonProcess,
    fake_openai: FakeOpenAI,
    spec: Spec,
    workspace: Path,
) -> None:
    original = (workspace / "data.csv").read_bytes()
    fake_openai.script(
        call("write_to_file", path="data.csv", content="overwritten\n"),
        call("execute_code", code="n = 41"),
        call("execute_code", code="n += 1"),
        done("Overwrote data.csv and counted."),
    )
    spec.run("checkpoints.spec.ts")
    # The spec restored checkpoint 1 (the file came back byte for byte), then
    # checkpoint 3 with the kernel (the file as the agent left it).
    assert (workspace / "data.csv").read_bytes() == b"overwritten\n" != original
