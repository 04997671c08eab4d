"""The CLI of agents (seed 002) as a user runs it against a real `hdspd` with the
scripted model: `hdsp agent add/list/remove`, `hdsp run --agent`, `hdsp tasks
--tree` and `hdsp show` of a parent with its children and their results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.client import Client
from hdsp.client.exit_codes import ExitCode
from hdsp.protocol import TaskCompleted
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.integration.test_agents_e2e import agent_of, calls, finish, results_in, wait_item
from tests.integration.test_parallel_tools_e2e import open_asks
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn


@pytest.mark.slow
async def test_agents_are_added_listed_run_and_removed_and_a_tree_shows(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    r = await run_hdsp(
        daemon.runtime_dir,
        "agent",
        "add",
        "lead",
        "Leads the work.\x1b[31m",
        "--groups",
        "read,agents",
    )
    assert r.returncode == ExitCode.OK, r.stderr
    r = await run_hdsp(daemon.runtime_dir, "agent", "add", "helper", "Helps.")
    assert r.returncode == ExitCode.OK, r.stderr
    r = await run_hdsp(daemon.runtime_dir, "agent", "list")
    assert r.returncode == ExitCode.OK, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines() if not line.startswith(" ")]
    assert {"analyst", "reviewer", "lead", "helper"} <= set(names)
    assert "\x1b" not in r.stdout  # instructions are shown escaped
    listed = {a.name: a for a in (await client.list_agents()).agents}
    assert listed["lead"].source == "settings" and listed["lead"].groups == ["read", "agents"]
    assert listed["analyst"].source == "built-in"

    def respond(body: dict[str, Any]) -> Reply | None:
        if agent_of(body) == "lead":
            if not results_in(body):
                return calls(("call_agent", {"agent_name": "helper", "message": "count rows"}))
            return finish("lead: " + results_in(body)[0])
        return finish("there are 2 rows")

    fake_openai.responder = respond
    head = (await client.status()).head_seq
    as_lead = ("--agent", "lead", "--workspace", str(tmp_path), "--auto-approve", "subtasks")
    r = await run_hdsp(daemon.runtime_dir, "run", "count the rows", *as_lead, "--detach")
    assert r.returncode == ExitCode.OK, r.stderr
    root = r.stdout.strip()
    with anyio.fail_after(30):
        await collect_turn(client, root, head, until=(TaskCompleted,))
    child = ((await client.get_task(root)).item.child_ids or [""])[0]

    r = await run_hdsp(daemon.runtime_dir, "tasks", "--tree")
    assert r.returncode == ExitCode.OK, r.stderr
    lines = r.stdout.splitlines()
    (root_line,) = [line for line in lines if line.startswith(root[:8])]
    (child_line,) = [line for line in lines if child[:8] in line]
    assert lines.index(child_line) == lines.index(root_line) + 1
    assert child_line.startswith("  " + child[:8]) and "[helper]" in child_line
    assert "[lead]" in root_line and "completed" in root_line

    r = await run_hdsp(daemon.runtime_dir, "show", root[:8])
    assert r.returncode == ExitCode.OK, r.stderr
    assert "children (1):" in r.stdout
    assert child[:8] in r.stdout and "returned: there are 2 rows" in r.stdout

    # Followed live, the run says when an agent takes a part and when it returns.
    r = await run_hdsp(daemon.runtime_dir, "run", "count again", *as_lead)
    assert r.returncode == ExitCode.OK, r.stderr
    assert "an agent works on a part: task" in r.stderr and "returned" in r.stderr
    assert "lead: there are 2 rows" in r.stdout

    r = await run_hdsp(daemon.runtime_dir, "agent", "remove", "helper")
    assert r.returncode == ExitCode.OK, r.stderr
    r = await run_hdsp(daemon.runtime_dir, "agent", "remove", "analyst")
    assert r.returncode == ExitCode.USAGE and "built-in" in r.stderr
    settings = (await client.get_settings()).settings
    assert [a["name"] for a in settings["agents"]] == ["lead"]
    r = await run_hdsp(daemon.runtime_dir, "run", "x", "--agent", "nobody", "--detach")
    assert r.returncode == ExitCode.USAGE and "no agent named 'nobody'" in r.stderr
    assert json.loads((await run_hdsp(daemon.runtime_dir, "agent", "list", "--json")).stdout)


@pytest.mark.slow
async def test_a_childs_concurrent_asks_are_listed_with_its_agent_and_answered_one_by_one(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    """lead calls writer, whose one reply writes two files: both approvals wait
    at once in writer's task; `hdsp asks` lists both, labelled with the agent,
    and `hdsp answer` answers them one by one."""
    writer = {"name": "writer", "instructions": "Writes.", "groups": ["read", "edit"]}
    lead = {"name": "lead", "instructions": "Leads.", "groups": ["read", "agents"]}
    await client.update_settings({"agents": [lead, writer]})

    def respond(body: dict[str, Any]) -> Reply | None:
        if agent_of(body) == "lead":
            if not results_in(body):
                return calls(("call_agent", {"agent_name": "writer", "message": "write"}))
            return finish("lead: " + results_in(body)[0])
        if not results_in(body):
            return calls(
                ("write_to_file", {"path": "a.txt", "content": "A"}),
                ("write_to_file", {"path": "b.txt", "content": "B"}),
            )
        return finish("wrote " + ", ".join(sorted(p.name for p in tmp_path.glob("*.txt"))))

    fake_openai.responder = respond
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "write through an agent",
        workspace=tmp_path,
        agent="lead",
        approvals={"always_allow_subtasks": True},
    )
    with anyio.fail_after(30):
        item = await wait_item(client, ref.task_id, lambda i: bool(i.child_ids))
        (child,) = item.child_ids or []
        await open_asks(client, child, head, 2)

    r = await run_hdsp(daemon.runtime_dir, "asks")
    assert r.returncode == ExitCode.OK, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith(child[:8])]
    assert len(lines) == 2, r.stdout
    assert all("[writer] allow write_to_file" in line for line in lines), lines
    # (The calls ask in whichever order they get to it: oldest first.)
    first, second = ("a.txt", "b.txt") if "a.txt" in lines[0] else ("b.txt", "a.txt")
    assert second in lines[1]

    # One by one: the oldest first.
    r = await run_hdsp(daemon.runtime_dir, "answer", child[:8], "--yes")
    assert r.returncode == ExitCode.OK, r.stderr
    r = await run_hdsp(daemon.runtime_dir, "asks")
    lines = [line for line in r.stdout.splitlines() if line.startswith(child[:8])]
    assert len(lines) == 1 and second in lines[0], r.stdout
    r = await run_hdsp(daemon.runtime_dir, "answer", child[:8], "--no")
    assert r.returncode == ExitCode.OK, r.stderr
    with anyio.fail_after(30):
        await collect_turn(client, ref.task_id, head, until=(TaskCompleted,))
    assert (await client.get_task(ref.task_id)).item.result == f"lead: wrote {first}"
