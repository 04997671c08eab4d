"""A model fault matrix, through the real daemon: each way a model server can
fail, scripted in the wire-level fakes of both APIs, must end within its bound
(no hang), with a message every client sees that names the cause, recover (by
retrying, or once the `api_req_failed` ask is answered), and lose nothing from
the task's history. Then the regressions of the silent waits, the endless
retries, the lost error text and the lost tool arguments."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest

from hdsp.client import Client, connect
from hdsp.daemon.tasks.task import WAIT_UPDATE_INTERVAL
from hdsp.protocol import (
    Ask,
    ClineMessage,
    MessageEvent,
    Say,
    TaskCompleted,
    TaskEvent,
    TaskIdle,
)
from tests.fakes import anthropic_server, openai_server
from tests.fakes.anthropic_server import FakeAnthropic, ToolUse
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.support.daemon_process import DaemonProcess, call_failed, short_tmp_dir
from tests.support.events import collect_turn, texts

pytestmark = pytest.mark.slow

#: The smallest retry delays the settings allow that still show a backoff.
FAST_RETRIES = {"base_delay": 0.05, "max_delay": 0.2}
#: Bounds on the server's silence in the matrix's profiles (seconds): short, but
#: not so short that a loaded machine trips them on a healthy reply.
SILENCE = 1.5
#: The longest any case may take, on a loaded machine.
CASE_BOUND = 40

OAI = openai_server.Reply
ANT = anthropic_server.Reply

#: The text each faulty reply streams before its fault, and how many events that
#: is (OpenAI: the role chunk, then "Part" and "ial "; Anthropic: message_start,
#: content_block_start, ping, then the two deltas).
PARTIAL = "Partial "
_SO_FAR = {"oai": 3, "ant": 5}


def _streamed(kind: Literal["oai", "ant"]) -> Any:
    reply = OAI if kind == "oai" else ANT
    return reply.text("Partial answer that breaks", chunk_size=4)


@dataclass(frozen=True)
class Fault:
    name: str
    #: The faulty reply, per profile ("oai" for OpenAI's API, "ant" for Anthropic's).
    reply: Callable[[Literal["oai", "ant"]], Any]
    #: What a message every client sees must say.
    cause: str
    #: How the task gets past it: a retry of its own, an answer to the
    #: api_req_failed ask, or the model's next request after a tool error.
    route: Literal["retry", "ask", "tool"] = "retry"
    #: The reply streamed text before the fault.
    midstream: bool = False


def _midstream(name: str, fault: str, cause: str) -> Fault:
    """The streamed reply broken after its first part by the `Reply` method
    named `fault` (`hang_after`, `reset_after`, ...)."""
    return Fault(
        name, lambda kind: getattr(_streamed(kind), fault)(_SO_FAR[kind]), cause, midstream=True
    )


def _by_kind(oai: Callable[[], Any], ant: Callable[[], Any]) -> Callable[[str], Any]:
    return lambda kind: oai() if kind == "oai" else ant()


def _status(code: int, **kwargs: Any) -> Callable[[str], Any]:
    """An HTTP error status, from either API."""
    return _by_kind(lambda: OAI.status(code, **kwargs), lambda: ANT.status(code, **kwargs))


def _tool_call(name: str, arguments: str) -> Callable[[str], Any]:
    """A call of the tool `name` with `arguments` (JSON text), from either API."""
    return _by_kind(
        lambda: OAI.tool_calls([ToolCall(name, arguments)]),
        lambda: ANT.tool_use([ToolUse(name, arguments)]),
    )


FAULTS = [
    Fault(
        "429 with retry-after",
        _status(429, retry_after=0.1),
        "rate-limiting requests",
    ),
    Fault("500", _status(500), "HTTP 500"),
    Fault(
        "503 plain text",
        _by_kind(
            lambda: OAI.plain_status(503, "Backend restarting, try later"),
            lambda: ANT.plain_status(503, "Backend restarting, try later"),
        ),
        "HTTP 503 (Backend restarting, try later)",
    ),
    Fault("529 overloaded", _by_kind(lambda: OAI.status(529), ANT.overloaded), "is overloaded"),
    Fault(
        "accept and hang",
        _by_kind(OAI.accept_and_hang, ANT.accept_and_hang),
        f"accepted the request but sent nothing for {SILENCE:g} s",
    ),
    _midstream(
        "hang mid-stream",
        "hang_after",
        f"stopped in the middle of the reply: nothing for {SILENCE:g} s",
    ),
    _midstream(
        "broken SSE framing",
        "unframed_after",
        "broke in the middle of the reply (RemoteProtocolError: illegal chunk header",
    ),
    _midstream("TCP reset mid-stream", "reset_after", "connection reset by peer"),
    _midstream(
        "clean close mid-stream",
        "end_after",
        "the stream ended before the model finished its reply",
    ),
    _midstream("malformed chunk", "malformed_after", "sent a malformed event stream"),
    Fault(
        "error event mid-stream",
        lambda kind: (
            _streamed(kind).error_after(_SO_FAR[kind], "Upstream model crashed")
            if kind == "oai"
            else _streamed(kind).error_after(_SO_FAR[kind], "api_error", "Upstream model crashed")
        ),
        "reported an error in the middle of the reply (Upstream model crashed)",
        midstream=True,
    ),
    Fault(
        "400 context length exceeded",
        _by_kind(OAI.context_length_exceeded, ANT.prompt_too_long),
        "The conversation is too long",
        route="ask",
    ),
    Fault(
        "401",
        _status(401),
        "API key",
        route="ask",
    ),
    Fault(
        "bad tool JSON",
        _tool_call("read_file", '{"path": "a.csv"'),
        """not valid JSON, or not a JSON object: '{"path": "a.csv"'""",
        route="tool",
    ),
    Fault(
        "unknown tool",
        _tool_call("no_such_tool", "{}"),
        "there is no tool named 'no_such_tool'",
        route="tool",
    ),
]


def profile(name: str, provider: str, model: str, base_url: str, **options: Any) -> dict[str, Any]:
    return {
        "name": name,
        "provider": provider,
        "model": model,
        "base_url": base_url,
        "options": options,
    }


def write_settings(daemon: DaemonProcess, settings: dict[str, Any]) -> None:
    daemon.data_dir.mkdir(parents=True, exist_ok=True)
    (daemon.data_dir / "settings.json").write_text(json.dumps({"version": 2, **settings}))


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[FakeOpenAI, FakeAnthropic]]:
    with FakeOpenAI() as oai, FakeAnthropic() as ant:
        yield oai, ant


@pytest.fixture(scope="module")
def matrix_daemon(fakes: tuple[FakeOpenAI, FakeAnthropic]) -> Iterator[DaemonProcess]:
    """One daemon for the whole matrix, with a profile per API whose silence
    bounds are short, and quick retries."""
    oai, ant = fakes
    daemon = DaemonProcess(short_tmp_dir())
    bounds = {"first_byte_timeout": SILENCE, "idle_timeout": SILENCE}
    write_settings(
        daemon,
        {
            "profiles": {
                "oai": profile("oai", "openai-compatible", "gpt-test", oai.base_url, **bounds),
                "ant": profile("ant", "anthropic", "claude-test", ant.base_url, **bounds),
            },
            "retry": FAST_RETRIES,
        },
    )
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()
        daemon.cleanup()


def message_texts(events: list[TaskEvent]) -> list[str]:
    """The text of every message event (partial updates too): what a client saw."""
    return [
        e.data.payload[0].message.text or "" for e in events if isinstance(e.data, MessageEvent)
    ]


def request_failures(messages: list[ClineMessage]) -> list[dict[str, Any]]:
    """The api_req_started messages of attempts that failed, as their JSON."""
    infos = [json.loads(m.text or "{}") for m in messages if m.say == Say.API_REQ_STARTED]
    return [info for info in infos if "error" in info]


@pytest.mark.parametrize("kind", ["oai", "ant"])
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
async def test_model_fault(
    matrix_daemon: DaemonProcess,
    fakes: tuple[FakeOpenAI, FakeAnthropic],
    fault: Fault,
    kind: Literal["oai", "ant"],
) -> None:
    fake: FakeOpenAI | FakeAnthropic = fakes[0] if kind == "oai" else fakes[1]
    assert fake.pending == 0, "a case before this one left scripted replies"
    recovered = f"Recovered from {fault.name}."
    fake.script(fault.reply(kind), OAI.text(recovered) if kind == "oai" else ANT.text(recovered))
    started = time.monotonic()
    async with (
        connect(matrix_daemon.runtime_dir, name="driver") as driver,
        connect(matrix_daemon.runtime_dir, name="observer") as observer,
    ):
        head = (await driver.status()).head_seq
        ref = await driver.start_task(f"Please survive {fault.name}", profile=kind)
        with anyio.fail_after(CASE_BOUND):
            seen = await collect_turn(observer, ref.task_id, head)
            if fault.route == "ask":
                assert isinstance(seen[-1].data, TaskIdle)
                ask = (await driver.get_task(ref.task_id)).pending_ask
                assert ask is not None and ask.ask == Ask.API_REQ_FAILED
                assert fault.cause in (ask.text or "")
                head = seen[-1].seq or head
                await driver.respond_to_ask(ref.task_id, ask.ts, "yesButtonClicked")
                seen += await collect_turn(observer, ref.task_id, head)
        elapsed = time.monotonic() - started

    # Recovered: the next scripted reply completed the task.
    assert isinstance(seen[-1].data, TaskCompleted), [type(e.data).__name__ for e in seen]
    assert texts(seen)[-1] == recovered
    assert fake.pending == 0
    # The observer, not only the client that started the task, saw the cause.
    assert any(fault.cause in text for text in message_texts(seen)), message_texts(seen)
    # Nothing lost: the history has the task's words, the failure, what the
    # failed attempt had said, and the reply that followed.
    async with connect(matrix_daemon.runtime_dir, name="reader") as reader:
        snap = await reader.get_task(ref.task_id)
    shown = [m.text or "" for m in snap.messages]
    assert shown[0] == f"Please survive {fault.name}"
    assert any(fault.cause in text for text in shown), shown
    assert [m.text for m in snap.messages if m.say == Say.TEXT][-1] == recovered
    if fault.route != "tool":
        failures = request_failures(snap.messages)
        assert failures and fault.cause in failures[0]["error"]
        if fault.midstream:
            assert failures[0]["partialText"] == PARTIAL
    assert elapsed < CASE_BOUND


# ---- regressions ------------------------------------------------------------------


@pytest.fixture
def own_daemon(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[[dict[str, Any]], DaemonProcess]]:
    """Start a daemon with the given settings (one per test), printing its log if
    the test fails."""
    started: list[DaemonProcess] = []

    def start(settings: dict[str, Any]) -> DaemonProcess:
        daemon = DaemonProcess(short_tmp_dir())
        write_settings(daemon, settings)
        daemon.start()
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.finish(show_log=call_failed(request))


async def test_a_silent_server_shows_a_waiting_message_and_times_out_at_the_first_byte_bound(
    own_daemon: Callable[[dict[str, Any]], DaemonProcess],
) -> None:
    first_byte = 4.0
    with FakeOpenAI() as fake:
        daemon = own_daemon(
            {
                "profiles": {
                    "slow": profile(
                        "slow",
                        "openai-compatible",
                        "gpt-test",
                        fake.base_url,
                        first_byte_timeout=first_byte,
                    )
                },
                "retry": FAST_RETRIES,
            }
        )
        fake.script(OAI.accept_and_hang(), OAI.text("Answered at last."))
        async with connect(daemon.runtime_dir) as client:
            head = (await client.status()).head_seq
            started = time.monotonic()
            ref = await client.start_task("Are you there?", profile="slow")
            waiting_at: float | None = None
            failed_at: float | None = None
            waiting_events = 0
            with anyio.fail_after(30):
                async with client.events(ref.task_id, since_seq=head) as events:
                    async for event in events:
                        if not isinstance(event.data, MessageEvent):
                            if isinstance(event.data, TaskCompleted):
                                break
                            continue
                        message = event.data.payload[0].message
                        if _preparing(message.text):
                            # Under load the provider's SDK may still be loading:
                            # that wait is shown too, in a message of its own.
                            continue
                        if message.say == Say.API_REQ_WAITING:
                            waiting_events += 1
                        if message.say == Say.API_REQ_WAITING and waiting_at is None:
                            waiting_at = time.monotonic() - started
                            assert message.partial
                            assert "Waiting for the model server to answer" in (message.text or "")
                        if message.say == Say.API_REQ_RETRY_DELAYED and failed_at is None:
                            failed_at = time.monotonic() - started
                            assert f"sent nothing for {first_byte:g} s" in (message.text or "")
            snap = await client.get_task(ref.task_id)
    # Given up at the bound, then retried...
    assert failed_at is not None and first_byte <= failed_at < first_byte + 10
    # ...and seen before that, while the server was still silent.
    assert waiting_at is not None and waiting_at < failed_at
    # Bounded: the notice, an update every WAIT_UPDATE_INTERVAL s, the final text.
    assert 2 <= waiting_events <= 2 + failed_at / WAIT_UPDATE_INTERVAL
    (waited,) = [
        m for m in snap.messages if m.say == Say.API_REQ_WAITING and not _preparing(m.text)
    ]
    assert not waited.partial
    ended = re.fullmatch(r"The request ended after (\d+) s without a reply\.", waited.text or "")
    assert ended is not None and int(ended[1]) >= first_byte
    assert [m.text for m in snap.messages if m.say == Say.TEXT][-1] == "Answered at last."


def _preparing(text: str | None) -> bool:
    """Whether a waiting message is the request's preparation (the SDK loading),
    not the wait for the model server."""
    return (text or "").startswith(
        ("Preparing the request", "The request was ready", "Stopped preparing")
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_unreachable_server_ends_in_api_req_failed_after_the_default_attempts(
    own_daemon: Callable[[dict[str, Any]], DaemonProcess],
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    # No max_attempts: the default is the one under test.
    daemon = own_daemon(
        {
            "profiles": {"gone": profile("gone", "openai-compatible", "gpt-test", url)},
            "retry": FAST_RETRIES,
        }
    )
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("Hello?", profile="gone")
        with anyio.fail_after(30):
            seen = await collect_turn(client, ref.task_id, head)
        snap = await client.get_task(ref.task_id)
        assert isinstance(seen[-1].data, TaskIdle)
        ask = snap.pending_ask
        assert ask is not None and ask.ask == Ask.API_REQ_FAILED
        assert "Could not connect" in (ask.text or "") and "connection refused" in (ask.text or "")
        attempts = [m for m in snap.messages if m.say == Say.API_REQ_STARTED]
        assert len(attempts) == 5
        assert len([m for m in snap.messages if m.say == Say.API_REQ_RETRIED]) == 4
        await client.cancel_task(ref.task_id)


async def test_a_plain_text_503_keeps_the_servers_text(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        OAI.plain_status(503, "Maintenance until 14:00 UTC\x1b[2J"), OAI.text("Back again.")
    )
    head = (await client.status()).head_seq
    ref = await client.start_task("Anyone home?")
    with anyio.fail_after(30):
        seen = await collect_turn(client, ref.task_id, head)
    assert texts(seen)[-1] == "Back again."
    snap = await client.get_task(ref.task_id)
    (failure,) = request_failures(snap.messages)
    assert "HTTP 503 (Maintenance until 14:00 UTC [2J)" in failure["error"]
    assert "\x1b" not in failure["error"]


async def test_tool_arguments_that_are_not_json_are_kept_as_sent(
    client: Client, daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    raw = '{"path": "data.csv", "limit": 10'
    fake_openai.script(OAI.tool_calls([ToolCall("read_file", raw)]), OAI.text("I will fix that."))
    head = (await client.status()).head_seq
    ref = await client.start_task("Read data.csv", workspace=tmp_path)
    with anyio.fail_after(30):
        seen = await collect_turn(client, ref.task_id, head)
    assert isinstance(seen[-1].data, TaskCompleted)
    # The model was told, with what it sent.
    (result,) = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
    assert "not valid JSON" in result["content"] and repr(raw) in result["content"]
    # Every client (and `hdsp show`) sees why the call did not run.
    snap = await client.get_task(ref.task_id)
    errors = [m.text or "" for m in snap.messages if m.say == Say.ERROR]
    assert any(repr(raw) in text for text in errors), errors
    # The API history keeps the arguments as the model sent them.
    database = sqlite3.connect(f"file:{daemon.data_dir / 'hdsp.sqlite3'}?mode=ro", uri=True)
    try:
        bodies = [
            json.loads(body)
            for (body,) in database.execute(
                "SELECT body FROM api_messages WHERE task_id = ? ORDER BY idx", (ref.task_id,)
            )
        ]
    finally:
        database.close()
    calls = [block for m in bodies for block in m["content"] if block["type"] == "tool_use"]
    assert calls == [
        {
            "type": "tool_use",
            "id": calls[0]["id"],
            "name": "read_file",
            "input": {},
            "raw_input": raw,
        }
    ]
