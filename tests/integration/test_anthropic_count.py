"""Anthropic's count_tokens through the real daemon and the real anthropic SDK,
against the wire-level fake: each request is counted as it is then sent (same
model, system, tools and messages), and a count that fails falls back to the
estimate without failing the turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.client import Client
from hdsp.protocol import TaskCompleted
from tests.fakes.anthropic_server import FakeAnthropic, ToolUse
from tests.fakes.anthropic_server import Reply as AnthropicReply
from tests.support.events import collect_turn, texts

pytestmark = pytest.mark.timeout(90)

#: What both bodies carry (the request adds `max_tokens` and `stream`).
COUNTED_KEYS = ("model", "system", "tools", "messages", "thinking")


def counted_part(body: dict[str, Any]) -> dict[str, Any]:
    return {key: body[key] for key in COUNTED_KEYS if key in body}


async def claude_task(client: Client, fake: FakeAnthropic, workspace: Path) -> list[Any]:
    """A two-request task (a read, then the answer) on an Anthropic profile."""
    await client.set_secret("anthropic-count", "sk-ant-test-secret-value")
    await client.save_profile(
        "claude",
        provider="anthropic",
        model="claude-test",
        base_url=fake.base_url,
        secret="anthropic-count",
    )
    (workspace / "data.csv").write_text("x,y\n1,2\n3,4\n")
    fake.script(
        AnthropicReply.tool_use([ToolUse("read_file", json.dumps({"path": "data.csv"}))]),
        AnthropicReply.tool_use(
            [ToolUse("attempt_completion", json.dumps({"result": "y = x + 1"}))]
        ),
    )
    head = (await client.status()).head_seq
    ref = await client.start_task(
        "Describe data.csv",
        profile="claude",
        workspace=workspace,
        approvals={"alwaysAllowReadOnly": True},
    )
    with anyio.fail_after(60):
        return await collect_turn(client, ref.task_id, head)


async def test_each_request_is_counted_exactly_as_it_is_then_sent(
    client: Client, tmp_path: Path
) -> None:
    with FakeAnthropic() as fake:
        events = await claude_task(client, fake, tmp_path)
        assert isinstance(events[-1].data, TaskCompleted)
        sent = fake.requests
        counted = fake.count_requests
    assert len(sent) == 2
    # Each count is the body of the request that followed it, less `max_tokens` and
    # `stream`. (On a loaded machine the first count of a daemon's life may wait
    # out COUNT_TIMEOUT behind the SDK's import, and the estimate stands in.)
    assert 1 <= len(counted) <= 2
    for before, request in zip(counted[::-1], sent[::-1], strict=False):
        assert set(before) == {k for k in COUNTED_KEYS if k in request}
        assert before == counted_part(request)
        assert request["stream"] is True and "max_tokens" in request
    # The second request carries the read's result, and was counted with it.
    assert "x,y" in json.dumps(counted[-1]["messages"])


async def test_a_failing_count_falls_back_to_the_estimate_and_the_turn_goes_on(
    client: Client, tmp_path: Path
) -> None:
    with FakeAnthropic() as fake:
        fake.count_status = 500
        events = await claude_task(client, fake, tmp_path)
        assert isinstance(events[-1].data, TaskCompleted), texts(events)
        assert len(fake.requests) == 2
        # A failure (unlike a missing endpoint) is asked again next time.
        assert len(fake.count_requests) >= 1
