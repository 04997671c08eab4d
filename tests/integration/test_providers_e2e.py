"""The engine's side of the provider work, through the real daemon: retries that
every client sees, broken streams replaced rather than doubled, the forced
context reduction, several tool calls in one reply, cancel during a backoff, and
`hdsp run --profile` against the fake Anthropic API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client, connect
from hdsp.protocol import MessageEvent, Say, TaskAborted, TaskCompleted, TaskEvent
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.anthropic_server import Reply as AnthropicReply
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, texts


def says(events: list[TaskEvent], say: str) -> list[str]:
    return texts(events, say)


async def test_a_rate_limit_is_retried_after_retry_after_and_everyone_sees_it(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.status(429, retry_after=1), FakeReply.text("after the wait"))
    head = (await client.status()).head_seq
    ref = await client.start_task("busy model")
    with anyio.fail_after(20):
        events = await collect_turn(client, ref.task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    assert texts(events)[-1] == "after the wait"
    delayed = says(events, Say.API_REQ_RETRY_DELAYED)
    assert len(delayed) == 1 and "Retried (attempt 1)" in delayed[0]
    assert json.loads(says(events, Say.API_REQ_RETRIED)[0])["delay"] >= 1
    assert len(fake_openai.requests) == 2


async def test_a_server_error_and_a_cut_stream_are_retried_without_doubling_text(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        FakeReply.status(500),
        FakeReply.text("The answer is forty-two.", chunk_size=3).cut_after(4),
        FakeReply.text("The answer is forty-two.", chunk_size=3),
    )
    head = (await client.status()).head_seq
    ref = await client.start_task("flaky network")
    with anyio.fail_after(30):
        events = await collect_turn(client, ref.task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    # The cut attempt's text was replaced by the retry's, in the same message.
    final = texts(events)
    assert final.count("The answer is forty-two.") == 1
    assert [t for t in final if t and t != "flaky network"] == ["The answer is forty-two."]
    snap = await client.get_task(ref.task_id)
    shown = [m.text for m in snap.messages if m.say == "text" and m.text]
    assert shown == ["flaky network", "The answer is forty-two."]


async def test_cancel_during_a_backoff_ends_the_task_at_once(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.status(429, retry_after=300))
    head = (await client.status()).head_seq
    ref = await client.start_task("wait a long time")
    async with client.events(ref.task_id, since_seq=head) as events:
        async for event in events:
            data = event.data
            if isinstance(data, MessageEvent) and data.payload[0].message.say == (
                Say.API_REQ_RETRY_DELAYED
            ):
                break
    with anyio.fail_after(5):
        stopped = await client.cancel_task(ref.task_id)
    assert stopped.state == "aborted"
    events_after = await collect_turn(client, ref.task_id, head)
    assert isinstance(events_after[-1].data, TaskAborted)


async def test_a_context_overflow_hides_old_messages_and_retries(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(*(FakeReply.text(f"answer {i}") for i in range(4)))
    head = (await client.status()).head_seq
    ref = await client.start_task("first question")
    await collect_turn(client, ref.task_id, head)
    for i in range(1, 4):
        head = (await client.status()).head_seq
        await client.send_message(ref.task_id, f"question {i}")
        await collect_turn(client, ref.task_id, head)
    fake_openai.script(FakeReply.context_length_exceeded(), FakeReply.text("fits now"))
    head = (await client.status()).head_seq
    await client.send_message(ref.task_id, "one more")
    events = await collect_turn(client, ref.task_id, head)
    assert texts(events)[-1] == "fits now"
    (note,) = says(events, Say.SLIDING_WINDOW_TRUNCATION)
    assert json.loads(note)["messagesRemoved"] > 0
    before, after = fake_openai.requests[-2]["messages"], fake_openai.requests[-1]["messages"]
    assert len(after) < len(before)
    assert after[1] == before[1]  # the task's first message is never hidden
    # Non-destructive: the full history is still there.
    snap = await client.get_task(ref.task_id)
    assert [m.text for m in snap.messages if m.say == "user_feedback"] == [
        "question 1",
        "question 2",
        "question 3",
        "one more",
    ]


async def test_several_tool_calls_in_one_reply_each_get_a_result(
    client: Client, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("beta")
    fake_openai.script(
        FakeReply.tool_calls(
            [
                ToolCall("read_file", '{"path": "a.txt"}'),
                ToolCall("read_file", '{"path": "b.txt"}'),
                ToolCall("read_file", '{"path": '),  # malformed: an error, not a crash
            ],
            fragment=3,
            interleave=True,
        ),
        FakeReply.text("read both"),
    )
    head = (await client.status()).head_seq
    ref = await client.start_task("read two files", workspace=tmp_path)
    events = await collect_turn(client, ref.task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    results = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == 3
    assert "alpha" in results[0]["content"] and "beta" in results[1]["content"]
    assert "not valid JSON" in results[2]["content"]


@pytest.mark.timeout(90)
async def test_hdsp_run_with_an_anthropic_profile(daemon: DaemonProcess) -> None:
    with FakeAnthropic() as fake:
        fake.script(AnthropicReply.thinking("hmm") + AnthropicReply.text("Bonjour from Claude."))
        async with connect(daemon.runtime_dir) as c:
            await c.set_secret("anthropic-test", "sk-ant-test-secret-value")
            await c.save_profile(
                "claude",
                provider="anthropic",
                model="claude-test",
                base_url=fake.base_url,
                secret="anthropic-test",
            )
        r = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                [sys.executable, "-m", "hdsp.client", "run", "--profile", "claude", "Say hi"],
                env={"HDSP_RUNTIME_DIR": str(daemon.runtime_dir), "NO_COLOR": "1"},
                capture_output=True,
                text=True,
                timeout=60,
            )
        )
        assert r.returncode == 0, r.stderr
        assert "Bonjour from Claude." in r.stdout and "thinking: hmm" in r.stdout
        assert fake.requests[0]["model"] == "claude-test"
