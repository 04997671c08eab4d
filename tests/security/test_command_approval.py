"""Auto-approval of shell commands through the real daemon: a scripted model
tries commands that a string-prefix check approved, and /bin/sh (dash) would
have run them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hdsp.client import Client
from hdsp.protocol import Ask, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.support.events import collect_turn
from tests.support.model_requests import tool_results
from tests.support.scripted_turns import ask_or_end, call, done, start


@pytest.fixture
def workspace(workspace: Path) -> Path:
    """The shared workspace, with a file `keep.txt` no command may touch."""
    (workspace / "keep.txt").write_text("keep me\n")
    return workspace


async def test_ampersand_redirect_with_only_ls_allowed_asks(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    """bash reads `ls &>/dev/null touch pwn` as one `ls`; dash runs `ls &` and
    then `touch pwn`. It must ask, and nothing may run before the answer."""
    fake_openai.script(call("execute_command", command="ls &>/dev/null touch pwn"), done())
    task_id, head = await start(client, "list", workspace, allowed_commands=["ls"])
    ask = await ask_or_end(client, task_id, head)
    assert ask is not None, f"it ran unasked (pwn created: {(workspace / 'pwn').exists()})"
    assert ask.ask == Ask.COMMAND
    assert "touch pwn" in (ask.text or "")
    assert not (workspace / "pwn").exists()
    await client.respond_to_ask(task_id, ask.ts, "noButtonClicked")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert not (workspace / "pwn").exists()


async def test_a_denied_rm_spelled_with_a_backslash_is_refused(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(call("execute_command", command="\\rm keep.txt"), done())
    task_id, head = await start(
        client, "clean", workspace, allowed_commands=["*"], denied_commands=["rm"]
    )
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert (workspace / "keep.txt").read_text() == "keep me\n"
    result = tool_results(fake_openai, 1)[-1]
    assert "Denied" in result and "denied prefix 'rm'" in result
