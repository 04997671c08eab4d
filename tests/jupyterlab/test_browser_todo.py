"""The open task's mode and todo list in the panel, in a real browser (issue 21):
a workspace slash command starts the task in analyst mode, the agent's todo list
shows, the user edits it in the panel and the model is told in its next request
(the spec is clients/jupyterlab/ui-tests/tests/todo.spec.ts)."""

from __future__ import annotations

import json
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


def test_the_panel_shows_the_mode_and_todo_list_and_sends_the_user_s_edit(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, spec: Spec, workspace: Path
) -> None:
    commands = workspace / ".hdsp" / "commands"
    commands.mkdir(parents=True)
    (commands / "plan-it.md").write_text(
        "---\ndescription: Plan an analysis\nmode: analyst\n---\nPlan the analysis of $1.\n"
    )
    fake_openai.script(
        call(
            "update_todo_list",
            todos="- [x] load <b>data.csv</b>\n- [-] clean it\n- [ ] plot",
        ),
        done("planned"),
        done("plotted"),
    )
    spec.run("todo.spec.ts")
    first = fake_openai.requests[0]["messages"][-1]
    assert "Plan the analysis of data.csv." in json.dumps(first)
    names = {t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
    assert "execute_code" in names and "write_to_file" not in names  # analyst's tools
    last = json.dumps(fake_openai.requests[-1]["messages"])
    assert "The user edited the todo list" in last
    assert "- [x] clean it\\n- [-] plot y against x" in last
