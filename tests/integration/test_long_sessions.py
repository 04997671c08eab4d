"""Long sessions through the real daemon: a model with a small context window
(the fake counts each request as OpenAI does and refuses one that does not fit),
a session of 200 turns with large outputs, and the daemon reducing the context
before each request instead of after a refusal."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.daemon.conversation import ApiMessage, TextBlock
from hdsp.daemon.llm.models import lookup_model
from hdsp.daemon.llm.openai_compat import to_chat_messages
from hdsp.daemon.llm.tokens import count_chat_tokens, encoding_for_model
from hdsp.daemon.tasks.budget import SUMMARY_PROMPT
from hdsp.protocol import Say, TaskCompleted, TaskMessagesDeleted, TaskSnapshot
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess, call_failed, model_env, short_tmp_dir
from tests.support.events import collect_turn

MODEL = "gpt-4o-small-window"
WINDOW = 8000
MAX_OUTPUT = 1000
FILES = 3
TURNS = int(os.environ.get("HDSP_LONG_SESSION_TURNS", "200"))


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body["messages"]):
        if message["role"] == "user":
            content = message["content"]
            return content if isinstance(content, str) else json.dumps(content)
        if message["role"] == "tool":
            return ""
    return ""


def session_model(body: dict[str, Any]) -> FakeReply:
    """Summarises when asked to; reads the data file when the user speaks; says
    what it saw when the file's content comes back."""
    last = body["messages"][-1]
    if SUMMARY_PROMPT[:60] in _last_user_text(body):
        return FakeReply.text(
            "Task: analyse sales.csv turn by turn. Decisions: read the file each turn. "
            "Names: sales.csv. Latest outputs: the last read showed region rows."
        )
    if last["role"] == "tool":
        return FakeReply.text("Read it: the regions add up as before.")
    # A different file each turn: the same call again and again is a loop the
    # daemon stops.
    step = _last_user_text(body).removeprefix("Step ").split(":", 1)[0]
    path = f"sales_{int(step) % FILES if step.isdigit() else 0}.csv"
    return FakeReply.tool_calls([ToolCall("read_file", json.dumps({"path": path}))])


@pytest.fixture
def small_model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(context_window=WINDOW) as fake:
        fake.responder = session_model
        yield fake


@pytest.fixture
def long_daemon(small_model: FakeOpenAI, request: pytest.FixtureRequest) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(short_tmp_dir(), env=model_env(small_model.base_url, MODEL))
    proc.start()
    try:
        yield proc
    finally:
        proc.finish(show_log=call_failed(request))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The task's workspace: the sales files it reads."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for n in range(FILES):
        rows = "\n".join(f"region_{r},{1000 * r + n},{r * 3.5:.2f}" for r in range(40))
        (ws / f"sales_{n}.csv").write_text("region,units,price\n" + rows + "\n")
    return ws


async def _small_window(client: Client) -> None:
    await client.update_settings(
        {"models": {MODEL: {"context_window": WINDOW, "max_output": MAX_OUTPUT}}}
    )


def _api_history(daemon: DaemonProcess, task_id: str) -> list[ApiMessage]:
    db = sqlite3.connect(daemon.data_dir / "hdsp.sqlite3")
    try:
        rows = db.execute(
            "SELECT body FROM api_messages WHERE task_id = ? ORDER BY idx", (task_id,)
        ).fetchall()
    finally:
        db.close()
    return [msgspec.json.decode(body, type=ApiMessage) for (body,) in rows]


def _step_of(messages: list[Any]) -> int:
    """The turn a request belongs to: the number of the last "Step N" message it
    carries (0 for the task's first turn)."""
    for message in reversed(messages):
        text = message.get("content")
        if message["role"] == "user" and isinstance(text, str) and text.startswith("Step "):
            return int(text.removeprefix("Step ").split(":", 1)[0])
    return 0


def _session_figures(model: FakeOpenAI, api: list[ApiMessage]) -> dict[str, Any]:
    """Per turn (a user's message and the requests it led to): the prompt tokens
    sent with condensing (as the fake counted them, summaries included) and
    without (each request carrying the whole stored history, nothing reduced,
    counted the same way); and their input cost at gpt-4o's list prices from the
    model table, with no cache and with a prompt cache that serves a request's
    prefix when it starts with all of the previous request's messages."""
    encoding = encoding_for_model(MODEL)
    assert encoding is not None
    price = lookup_model("openai", "gpt-4o")
    first = model.requests[0]
    system, tools = first["messages"][0]["content"], first.get("tools")

    def cost(tokens: list[int], cached: list[int]) -> dict[str, float]:
        fresh = sum(tokens) - sum(cached)
        return {
            "no_cache": round(sum(tokens) * price.input_price / 1e6, 4),
            "prefix_cache": round(
                (fresh * price.input_price + sum(cached) * price.cache_read_price) / 1e6, 4
            ),
        }

    sent = list(model.prompt_tokens)
    with_turns: dict[int, int] = {}
    sent_cached = [0]
    step = 0
    for i, body in enumerate(model.requests):
        # (A request whose turn's message a summary now stands for is of that turn.)
        step = max(step, _step_of(body["messages"]))
        with_turns[step] = with_turns.get(step, 0) + sent[i]
        if i:
            before = model.requests[i - 1]["messages"]
            sent_cached.append(sent[i - 1] if body["messages"][: len(before)] == before else 0)
    # Without: the request before each of the model's replies, with everything.
    plain = [msgspec.structs.replace(m, condense_parent=None) for m in api if not m.is_summary]
    without: list[int] = []
    without_turns: dict[int, int] = {}
    for i, message in enumerate(plain):
        if message.role == "assistant":
            chat = to_chat_messages(system, plain[:i])
            tokens = count_chat_tokens(encoding, chat, tools)
            without.append(tokens)
            step = _step_of(list(chat))
            without_turns[step] = without_turns.get(step, 0) + tokens
    sampled = [t for t in (0, 1, 9, 49, 99, 149, 199) if t in without_turns]
    return {
        "turns": len(without_turns),
        "requests_with": len(sent),
        "requests_without": len(without),
        "tokens_with": {"total": sum(sent), "max_request": max(sent)},
        "tokens_without": {"total": sum(without), "max_request": max(without)},
        "per_turn_with": {str(t + 1): with_turns.get(t, 0) for t in sampled},
        "per_turn_without": {str(t + 1): without_turns[t] for t in sampled},
        "mean_per_turn_with": round(sum(sent) / len(without_turns)),
        "mean_per_turn_without": round(sum(without) / len(without_turns)),
        "input_cost_usd_with": cost(sent, sent_cached),
        "input_cost_usd_without": cost(without, [0, *without[:-1]]),
        "prices_per_million": {"input": price.input_price, "cached": price.cache_read_price},
    }


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_200_turn_session_on_a_small_window_is_condensed_not_refused(
    long_daemon: DaemonProcess, small_model: FakeOpenAI, workspace: Path
) -> None:
    async with connect(long_daemon.runtime_dir, name="test") as client:
        await _small_window(client)
        head = (await client.status()).head_seq
        ref = await client.start_task(
            "Analyse the sales files, one step per message.", workspace=workspace
        )
        task_id = ref.task_id
        await collect_turn(client, task_id, head, until=(TaskCompleted,))
        for turn in range(1, TURNS):
            head = (await client.status()).head_seq
            await client.send_message(task_id, f"Step {turn}: read it again.")
            with anyio.fail_after(60):
                events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
            assert isinstance(events[-1].data, TaskCompleted)
        snap = await client.get_task(task_id)

    # No request was refused for its length, and none came near the window.
    assert small_model.refused_for_length == 0
    assert max(small_model.prompt_tokens) <= WINDOW - MAX_OUTPUT
    # Summaries were asked for and used: later requests carry one.
    summary_requests = [
        b for b in small_model.requests if SUMMARY_PROMPT[:60] in _last_user_text(b)
    ]
    assert len(summary_requests) >= 5
    condensed = [m for m in snap.messages if m.say == Say.CONDENSE_CONTEXT and not m.partial]
    assert len(condensed) == len(summary_requests)
    info = condensed[-1].context_condense or {}
    assert info["newContextTokens"] < info["prevContextTokens"]
    last_request = small_model.requests[-1]["messages"]
    assert any(
        "[Summary of the earlier conversation" in str(m.get("content")) for m in last_request
    )

    # Nothing was deleted: every message of the session is in the stored history.
    api = _api_history(long_daemon, task_id)
    user_texts = [
        b.text
        for m in api
        if m.role == "user" and not m.is_summary
        for b in m.content
        if hasattr(b, "text")
    ]
    assert sum(t.startswith("Step ") for t in user_texts) == TURNS - 1
    assert sum(1 for m in api if m.is_summary) == len(summary_requests)
    assert sum(1 for m in api if m.condense_parent is not None) > TURNS

    # Tokens sent per turn with condensing (what the fake counted) and without
    # it (the whole history each time), and what they cost, for the closing note.
    out = os.environ.get("HDSP_LONG_SESSION_FIGURES")
    if out:
        figures = _session_figures(small_model, api)
        await anyio.Path(out).write_text(json.dumps(figures, indent=2))

    # Rewinding across the last summary brings back what it hid; the history stays
    # consistent (no tag names a summary that is gone) and the task goes on.
    marker = condensed[-1]
    last_id = info["condenseId"]
    async with connect(long_daemon.runtime_dir, name="test") as client:
        await client.rewind_task(task_id, marker.ts, include=True)
        rewound = await client.get_task(task_id)
        after = _api_history(long_daemon, task_id)
        head = (await client.status()).head_seq
        await client.send_message(task_id, "Step 0: read it again.")
        with anyio.fail_after(60):
            events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
        assert isinstance(events[-1].data, TaskCompleted)
    assert rewound.messages == [m for m in snap.messages if m.ts < marker.ts]
    summaries = {m.condense_id for m in after if m.is_summary}
    assert last_id not in summaries
    assert all(m.condense_parent is None or m.condense_parent in summaries for m in after)
    hidden = [i for i, m in enumerate(api) if m.condense_parent == last_id]
    kept = [i for i in hidden if i < len(after) and after[i].ts == api[i].ts]
    assert kept and all(after[i].condense_parent is None for i in kept)
    assert small_model.refused_for_length == 0


# ---- steering a running turn --------------------------------------------------


async def test_a_steered_message_joins_the_running_turn_and_survives_kill_9(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    steered = threading.Event()
    seen: list[int] = []

    def model(body: dict[str, Any]) -> FakeReply:
        seen.append(len(body["messages"]))
        if len(seen) == 1:
            # The turn is in its first request: hold it until the steer is in.
            assert steered.wait(30), "the test never steered"
            return FakeReply.tool_calls(
                [ToolCall("read_file", json.dumps({"path": "sales_0.csv"}))]
            )
        return FakeReply.text("Steered: I will look at the price column.")

    fake_openai.responder = model
    async with connect(daemon.runtime_dir, name="test") as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("Look at sales_0.csv", workspace=workspace)
        task_id = ref.task_id
        await fake_openai.wait_for_requests_async(1)
        sent = await client.send_message(task_id, "Focus on the price column.", steer=True)
        assert sent.queued
        snap = await client.get_task(task_id)
        assert [(m.text, m.delivery) for m in snap.queue] == [
            ("Focus on the price column.", "steer")
        ]
        steered.set()
        with anyio.fail_after(60):
            await collect_turn(client, task_id, head, until=(TaskCompleted,))
        snap = await client.get_task(task_id)
    # The second request carries it after the tool's result, in the same turn.
    second = fake_openai.requests[1]["messages"]
    roles = [m["role"] for m in second]
    assert roles[-2:] == ["tool", "user"] and second[-1]["content"] == "Focus on the price column."
    says = [m.say for m in snap.messages if m.type == "say"]
    landed = says.index(Say.USER_FEEDBACK)
    assert says.index(Say.TOOL) < landed < len(says) - 1
    assert not snap.queue

    # Durable: after kill -9 and a restart the history shows it where it landed.
    daemon.kill()
    daemon.start()
    async with connect(daemon.runtime_dir, name="test") as client:
        again = await client.get_task(task_id)
    assert [m.text for m in again.messages if m.say == Say.USER_FEEDBACK] == [
        "Focus on the price column."
    ]
    assert [m.ts for m in again.messages] == [m.ts for m in snap.messages]


# ---- rewind, edit, fork --------------------------------------------------------


async def _turn(client: Client, task_id: str, text: str) -> None:
    head = (await client.status()).head_seq
    await client.send_message(task_id, text)
    with anyio.fail_after(60):
        await collect_turn(client, task_id, head, until=(TaskCompleted,))


async def _three_steps(client: Client, workspace: Path) -> tuple[str, TaskSnapshot, int]:
    """A task that read a file in its first turn and in each of three more: its
    id, its snapshot, and the ts of its message of step 2 (what the tests edit,
    fork at and delete)."""
    head = (await client.status()).head_seq
    task_id = (await client.start_task("Analyse the sales files.", workspace=workspace)).task_id
    with anyio.fail_after(60):
        await collect_turn(client, task_id, head, until=(TaskCompleted,))
    for turn in range(1, 4):
        await _turn(client, task_id, f"Step {turn}: read it again.")
    snap = await client.get_task(task_id)
    return task_id, snap, _feedback(snap.messages)["Step 2: read it again."]


def _feedback(messages: list[Any]) -> dict[str, int]:
    return {m.text: m.ts for m in messages if m.say == Say.USER_FEEDBACK}


@pytest.mark.slow
async def test_rewind_across_a_summary_brings_back_what_it_hid_and_survives_kill_9(
    long_daemon: DaemonProcess, small_model: FakeOpenAI, workspace: Path
) -> None:
    async with connect(long_daemon.runtime_dir, name="test") as client:
        await _small_window(client)
        head = (await client.status()).head_seq
        task_id = (await client.start_task("Analyse the sales files.", workspace=workspace)).task_id
        with anyio.fail_after(60):
            await collect_turn(client, task_id, head, until=(TaskCompleted,))
        for turn in range(1, 6):
            await _turn(client, task_id, f"Step {turn}: read it again.")
        # Condensed on demand (CondenseTask): a summary now stands for the older part
        # (the window may have had the task condense once by itself already: the
        # tools and the prompt's size decide that).
        already = [
            m for m in (await client.get_task(task_id)).messages if m.say == Say.CONDENSE_CONTEXT
        ]
        await client.condense_task(task_id)
        snap = await client.get_task(task_id)
        condensed = [m for m in snap.messages if m.say == Say.CONDENSE_CONTEXT]
        assert len(condensed) == len(already) + 1 and not condensed[-1].partial
        info = condensed[-1].context_condense or {}
        assert info["newContextTokens"] < info["prevContextTokens"]
        await _turn(client, task_id, "Step 6: read it again.")
        assert "[Summary of the earlier conversation" in str(small_model.requests[-2]["messages"])
        before = _api_history(long_daemon, task_id)
        assert sum(1 for m in before if m.condense_parent is not None) >= 3
        # Rewind to step 3, removing it: the summary made after it goes, and what
        # it hid is sent again.
        cut = _feedback(snap.messages)["Step 3: read it again."]
        await client.rewind_task(task_id, cut)
        rewound = await client.get_task(task_id)
    assert all(m.ts < cut for m in rewound.messages)
    assert rewound.messages == [m for m in snap.messages if m.ts < cut]
    after = _api_history(long_daemon, task_id)
    assert not any(m.is_summary or m.condense_parent for m in after)
    assert [m.content for m in after] == [m.content for m in before[: len(after)]]
    assert after[-1].role == "assistant" and len(after) < len(before)

    # Durable: after kill -9 and a restart it is as it was, and it goes on.
    long_daemon.kill()
    long_daemon.start()
    async with connect(long_daemon.runtime_dir, name="test") as client:
        again = await client.get_task(task_id)
        assert again.messages == rewound.messages
        await _turn(client, task_id, "Step 3 again: read it.")
        last = small_model.requests[-2]["messages"]
        assert "[Summary of the earlier conversation" not in str(last)
        assert any(m.get("content") == "Step 2: read it again." for m in last)
        assert not any(m.get("content") == "Step 4: read it again." for m in last)


@pytest.mark.slow
async def test_edit_and_fork_are_durable_across_kill_9(
    long_daemon: DaemonProcess, small_model: FakeOpenAI, workspace: Path
) -> None:
    async with connect(long_daemon.runtime_dir, name="test") as client:
        task_id, snap, ts2 = await _three_steps(client, workspace)
        # Fork at step 2's message: the new task has the history up to it.
        fork = await client.fork_task(task_id, ts2)
        forked = await client.get_task(fork.task_id)
        assert fork.task_id != task_id
        assert forked.messages == [m for m in snap.messages if m.ts <= ts2]
        # Edit step 2 in the original: it is replaced, and the turn goes on from there.
        head = (await client.status()).head_seq
        await client.edit_message(task_id, ts2, "Step 2, edited: read the first file.")
        with anyio.fail_after(60):
            await collect_turn(client, task_id, head, until=(TaskCompleted,))
        edited = await client.get_task(task_id)
        with pytest.raises(CommandFailed):
            await client.edit_message(task_id, edited.messages[0].ts, "not the task's start")
    texts = list(_feedback(edited.messages))
    assert texts == ["Step 1: read it again.", "Step 2, edited: read the first file."]

    long_daemon.kill()
    long_daemon.start()
    async with connect(long_daemon.runtime_dir, name="test") as client:
        assert list(_feedback((await client.get_task(task_id)).messages)) == texts
        assert (await client.get_task(fork.task_id)).messages == forked.messages
        # The fork goes on from its own history: it sent step 2 and not step 3.
        await _turn(client, fork.task_id, "Step 3 in the fork.")
        sent = [m.get("content") for m in small_model.requests[-2]["messages"]]
        assert "Step 2: read it again." in sent and "Step 3: read it again." not in sent


# ---- delete one message ----------------------------------------------------------


def _texts_sent(history: list[ApiMessage]) -> list[str]:
    return [b.text for m in history for b in m.content if isinstance(b, TextBlock)]


@pytest.mark.slow
async def test_deleting_a_message_is_announced_keeps_the_history_valid_and_survives_kill_9(
    long_daemon: DaemonProcess, small_model: FakeOpenAI, workspace: Path
) -> None:
    async with connect(long_daemon.runtime_dir, name="test") as client:
        task_id, snap, step2 = await _three_steps(client, workspace)
        before = _api_history(long_daemon, task_id)
        head = (await client.status()).head_seq
        ref = await client.delete_message(task_id, step2)
        with anyio.fail_after(30):
            events = await collect_turn(client, task_id, head, until=(TaskMessagesDeleted,))
        assert events[-1].data == TaskMessagesDeleted(payload=(task_id, [step2]))
        deleted = await client.get_task(task_id)
        # Never the task's first message, nor a record of the task's own.
        started = next(m for m in snap.messages if m.say == Say.API_REQ_STARTED)
        for ts in (snap.messages[0].ts, started.ts):
            with pytest.raises(CommandFailed):
                await client.delete_message(task_id, ts)
    assert ref.state == snap.state
    assert deleted.messages == [m for m in snap.messages if m.ts != step2]
    after = _api_history(long_daemon, task_id)
    assert len(after) == len(before) - 1
    assert "Step 2: read it again." not in _texts_sent(after)
    assert [m for m in before if "Step 2: read it again." not in _texts_sent([m])] == after

    long_daemon.kill()
    long_daemon.start()
    async with connect(long_daemon.runtime_dir, name="test") as client:
        assert (await client.get_task(task_id)).messages == deleted.messages
        # It goes on without it: the provider takes the history (every tool call
        # still has its result) and the deleted words are not sent.
        await _turn(client, task_id, "Step 4: read it again.")
        sent = [m.get("content") for m in small_model.requests[-2]["messages"]]
        assert "Step 2: read it again." not in sent
        assert "Step 1: read it again." in sent and "Step 3: read it again." in sent


def _paired_on_the_wire(messages: list[dict[str, Any]]) -> bool:
    """What OpenAI's API demands: each assistant message's tool calls answered by
    the tool messages right after it, and no tool message without its call."""
    expected: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            if message["tool_call_id"] not in expected:
                return False
            expected.discard(message["tool_call_id"])
            continue
        if expected:
            return False
        expected = {call["id"] for call in message.get("tool_calls") or ()}
    return not expected


@pytest.mark.slow
async def test_deleting_a_tool_call_takes_its_result_and_survives_kill_9(
    long_daemon: DaemonProcess, small_model: FakeOpenAI, workspace: Path
) -> None:
    """The model's call of step 2 (it read sales_2.csv) is deleted from one of its
    messages: the call, its result and every message of it go, the model is
    never sent them again, and every call it is sent keeps its result."""
    async with connect(long_daemon.runtime_dir, name="test") as client:
        task_id, snap, step2 = await _three_steps(client, workspace)
        result = next(m for m in snap.messages if m.say == Say.TOOL_RESULT and m.ts > step2)
        call = result.tool_use_id
        assert call is not None
        # The fake numbers calls per reply (call_0 each time): the messages of this
        # call are those of step 2's turn, the other turns' calls stay.
        step3 = _feedback(snap.messages)["Step 3: read it again."]
        of_call = [m.ts for m in snap.messages if m.tool_use_id == call and step2 < m.ts < step3]
        assert len(of_call) >= 2  # the call's own message and its result
        assert any(m.tool_use_id == call and m.ts > step3 for m in snap.messages)
        before = _api_history(long_daemon, task_id)
        assert "sales_2.csv" in json.dumps(msgspec.to_builtins(before))
        head = (await client.status()).head_seq
        await client.delete_message(task_id, result.ts)
        with anyio.fail_after(30):
            events = await collect_turn(client, task_id, head, until=(TaskMessagesDeleted,))
        assert events[-1].data == TaskMessagesDeleted(payload=(task_id, of_call))
        deleted = await client.get_task(task_id)
    assert deleted.messages == [m for m in snap.messages if m.ts not in of_call]
    after = _api_history(long_daemon, task_id)
    assert "sales_2.csv" not in json.dumps(msgspec.to_builtins(after))
    assert "sales_1.csv" in json.dumps(msgspec.to_builtins(after))  # step 1's call stays
    # The reply's text and the user's message of step 2 stay.
    assert "Step 2: read it again." in _texts_sent(after)

    long_daemon.kill()
    long_daemon.start()
    async with connect(long_daemon.runtime_dir, name="test") as client:
        assert (await client.get_task(task_id)).messages == deleted.messages
        await _turn(client, task_id, "Step 4: read it again.")
    sent = small_model.requests[-2]["messages"]
    assert "sales_2.csv" not in json.dumps(sent)
    assert all(_paired_on_the_wire(body["messages"]) for body in small_model.requests)


# ---- queued and steered messages across a crash ------------------------------------


@pytest.mark.slow
async def test_queued_and_steered_messages_survive_kill_9_and_are_delivered(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    held = threading.Event()

    def model(body: dict[str, Any]) -> FakeReply:
        if len(fake_openai.requests) == 1:
            # The first request never gets its answer: the daemon dies meanwhile.
            held.wait(60)
        return FakeReply.text(f"Answered: {_last_user_text(body)}")

    fake_openai.responder = model
    try:
        async with connect(daemon.runtime_dir, name="test") as client:
            task_id = (await client.start_task("Look at sales_0.csv", workspace=workspace)).task_id
            await fake_openai.wait_for_requests_async(1)
            steer = await client.send_message(task_id, "Only the price column.", steer=True)
            later = await client.send_message(task_id, "Then plot it.")
            assert steer.queued and later.queued
            waiting = [(m.text, m.delivery) for m in (await client.get_task(task_id)).queue]
        assert waiting == [("Only the price column.", "steer"), ("Then plot it.", None)]
        daemon.kill()
    finally:
        held.set()
    daemon.start()
    async with connect(daemon.runtime_dir, name="test") as client:
        snap = await client.get_task(task_id)
        assert [(m.text, m.delivery) for m in snap.queue] == waiting
        # Resumed, the turn takes the steer before its request; when it ends, the
        # queued message starts the next turn.
        head = (await client.status()).head_seq
        await client.resume_task(task_id)
        completed = 0
        with anyio.fail_after(60):
            async with client.events(task_id, since_seq=head) as events:
                async for event in events:
                    completed += isinstance(event.data, TaskCompleted)
                    if completed == 2:
                        break
        done = await client.get_task(task_id)
    assert not done.queue
    lasts = [_last_user_text(body) for body in fake_openai.requests[1:]]
    assert lasts == ["Only the price column.", "Then plot it."]
    assert [m.text for m in done.messages if m.say == Say.USER_FEEDBACK] == [
        "Only the price column.",
        "Then plot it.",
    ]


# ---- the profile's threshold, and a summary that fails --------------------------


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_the_profiles_threshold_decides_and_a_failed_summary_falls_back_to_truncation(
    long_daemon: DaemonProcess, small_model: FakeOpenAI, workspace: Path
) -> None:
    """A profile that condenses at 50% of the window: the first reduction comes
    well below the default 80%; the model fails to summarise, so the task says so,
    truncates instead, and goes on; nothing is refused for its length."""

    def no_summaries(body: dict[str, Any]) -> FakeReply:
        if SUMMARY_PROMPT[:60] in _last_user_text(body):
            return FakeReply.status(400, "This model cannot summarise today.")
        return session_model(body)

    small_model.responder = no_summaries
    async with connect(long_daemon.runtime_dir, name="test") as client:
        await _small_window(client)
        await client.set_secret("tight-key", "sk-test-not-a-real-key")
        await client.save_profile(
            "tight",
            provider="openai-compatible",
            model=MODEL,
            base_url=small_model.base_url,
            secret="tight-key",
            options={"condense_threshold": 50},
        )
        head = (await client.status()).head_seq
        ref = await client.start_task(
            "Analyse the sales files, one step per message.", profile="tight", workspace=workspace
        )
        task_id = ref.task_id
        await collect_turn(client, task_id, head, until=(TaskCompleted,))
        for turn in range(1, 40):
            snap = await client.get_task(task_id)
            says = [m.say for m in snap.messages]
            if (
                Say.CONDENSE_CONTEXT_ERROR in says
                and Say.SLIDING_WINDOW_TRUNCATION in says[says.index(Say.CONDENSE_CONTEXT_ERROR) :]
            ):
                break
            head = (await client.status()).head_seq
            await client.send_message(task_id, f"Step {turn}: read it again.")
            with anyio.fail_after(60):
                events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
            assert isinstance(events[-1].data, TaskCompleted)
    says = [m.say for m in snap.messages]
    # The first request past the threshold asked for a summary; it failed, and
    # the truncation that followed took its place.
    assert Say.SLIDING_WINDOW_TRUNCATION not in says[: says.index(Say.CONDENSE_CONTEXT_ERROR)]
    failed = says.index(Say.CONDENSE_CONTEXT_ERROR)
    truncated = says.index(Say.SLIDING_WINDOW_TRUNCATION, failed)
    assert "cannot summarise" in (snap.messages[failed].text or "")
    assert Say.CONDENSE_CONTEXT not in says
    info = snap.messages[truncated].context_truncation or {}
    # Past 50% of the window (4,000), below the default threshold (80%, 6,200).
    assert WINDOW * 50 // 100 < info["prevContextTokens"] < 6200
    assert info["newContextTokens"] < info["prevContextTokens"]
    assert small_model.refused_for_length == 0
    summaries = [b for b in small_model.requests if SUMMARY_PROMPT[:60] in _last_user_text(b)]
    assert len(summaries) >= 1
