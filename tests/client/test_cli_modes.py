"""`hdsp modes`, `mode`, `prompt`, `todo`, `commands`, `run --mode`, the todo
list in `show`, and slash-command completion, as a user runs them: the real
`hdsp` against a real `hdspd` with the scripted fake model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hdsp.client import Client
from hdsp.protocol import TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.scripted_turns import call, done


@pytest.fixture
def workspace(workspace: Path) -> Path:
    (workspace / ".hdsp" / "commands").mkdir(parents=True)
    (workspace / ".hdsp" / "commands" / "profile.md").write_text(
        "---\ndescription: Profile a data set\nargument-hint: <csv>\n---\nProfile $ARGUMENTS\n"
    )
    (workspace / "AGENTS.md").write_text("Be brief.\x1b[31m\n")
    return workspace


@pytest.mark.slow
@pytest.mark.timeout(180)  # a dozen `hdsp` processes, each a Python start
async def test_modes_prompt_and_commands_from_the_cli(
    daemon: DaemonProcess, workspace: Path
) -> None:
    run_dir = daemon.runtime_dir
    r = await run_hdsp(run_dir, "modes", "--workspace", str(workspace))
    assert r.returncode == 0, r.stderr
    slugs = [line.split()[0] for line in r.stdout.splitlines() if not line.startswith(" ")]
    assert slugs == ["ask", "plan", "analyst", "code", "orchestrator"]

    r = await run_hdsp(run_dir, "prompt", "--workspace", str(workspace), "--mode", "ask")
    assert r.returncode == 0, r.stderr
    assert "- Mode: ask (Ask)" in r.stdout and "# AGENTS.md (source: AGENTS.md)" in r.stdout
    # Workspace text reaches the terminal escaped.
    assert "\x1b" not in r.stdout and "Be brief.\\x1b[31m" in r.stdout

    r = await run_hdsp(run_dir, "commands", "--workspace", str(workspace))
    assert "/profile <csv>  Profile a data set  (project)" in r.stdout


@pytest.mark.slow
@pytest.mark.timeout(180)  # a dozen `hdsp` processes, each a Python start
async def test_run_mode_todo_show_attach_from_the_cli(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    run_dir = daemon.runtime_dir
    fake_openai.script(call("update_todo_list", todos="- [ ] load\n- [ ] plot"), done())
    head = (await client.status()).head_seq
    r = await run_hdsp(
        run_dir, "run", "--detach", "--mode", "analyst", "--workspace", str(workspace), "go"
    )
    assert r.returncode == 0, r.stderr
    task_id = r.stdout.strip()
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert (await client.get_task(task_id)).item.mode == "analyst"

    r = await run_hdsp(run_dir, "todo", task_id[:8], "--set", "- [x] load\n- [-] plot")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["- [x] load", "- [-] plot"]
    r = await run_hdsp(run_dir, "todo", task_id[:8], "--file", "-", stdin="nonsense\n")
    assert r.returncode != 0 and "line 1 is not a checklist item" in r.stderr

    r = await run_hdsp(run_dir, "show", task_id[:8])
    assert "todo list (analyst mode):\n- [x] load\n- [-] plot" in r.stdout

    r = await run_hdsp(run_dir, "attach", task_id[:8])
    assert "analyst mode" in r.stderr and "todo list:\n- [x] load\n- [-] plot" in r.stderr

    r = await run_hdsp(run_dir, "mode", task_id[:8], "plan")
    assert r.returncode == 0 and "now in plan mode" in r.stdout
    r = await run_hdsp(run_dir, "prompt", task_id[:8], "--json")
    assert json.loads(r.stdout)["mode"] == "plan"


async def test_run_completes_slash_commands(
    daemon: DaemonProcess, workspace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "completions"

    async def complete(line: str) -> list[str]:
        r = await run_hdsp(
            daemon.runtime_dir,
            _ARGCOMPLETE="1",
            _ARGCOMPLETE_SHELL="bash",
            COMP_LINE=line,
            COMP_POINT=str(len(line)),
            _ARGCOMPLETE_STDOUT_FILENAME=str(out),
        )
        assert r.returncode == 0 and r.stderr == "", r.stderr
        return [w.strip() for w in out.read_text().split("\x0b") if w.strip()]

    assert await complete(f"hdsp run --workspace {workspace} /pr") == ["/profile"]
    assert await complete(f"hdsp run --workspace {workspace} pr") == []
