"""The OpenAI-compatible provider against a wire-level fake, over real loopback HTTP.

The real `openai` SDK and its HTTP stack run unmodified; only the server is fake.
"""

from __future__ import annotations

import json
from typing import Literal

import pytest

from hdsp.daemon.conversation import (
    ApiMessage,
    ImageBlock,
    ModelRequest,
    ReasoningBlock,
    ReasoningDelta,
    StopChunk,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    UsageChunk,
)
from hdsp.daemon.llm.demo import DEMO_MODEL, DemoServer, demo_provider
from hdsp.daemon.llm.errors import (
    AuthenticationFailed,
    ContextWindowExceeded,
    InvalidRequest,
    NetworkError,
    Overloaded,
    RateLimited,
    ServerError,
    retry_after_from_headers,
)
from hdsp.daemon.llm.openai_compat import OpenAICompatibleProvider, is_reasoning_model
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, Usage
from tests.support.provider_helpers import REQUEST, collect, collect_until_error, text_of

from .provider_kinds import KINDS, Kind

#: A real 2 x 2 PNG (images are read before they are sent).
_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="


@pytest.fixture
def kind() -> Kind:
    """conftest.py's `fake` and `provider`, of the OpenAI-compatible kind."""
    return KINDS["openai"]


# ---- replies -------------------------------------------------------------------


async def test_text_streams_in_order_with_usage_and_stop(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.text("Hello, world!", chunk_size=3, usage=Usage(10, 5, cached=2)))

    chunks = await collect(provider)

    deltas = [chunk for chunk in chunks if isinstance(chunk, TextDelta)]
    assert [delta.text for delta in deltas] == ["Hel", "lo,", " wo", "rld", "!"]
    # Disjoint counts: the cached part of the prompt is not in input_tokens.
    assert chunks[len(deltas) :] == [
        UsageChunk(input_tokens=8, output_tokens=5, cache_read_tokens=2),
        StopChunk(reason="end_turn"),
    ]


async def test_fields_of_the_wrong_type_or_null_count_as_absent(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    # Chunks are read as their JSON; OpenAI-compatible servers send nulls, odd
    # types and stray items, and none of it may break a reply.
    odd = (
        {"role": "assistant", "content": None, "tool_calls": None},
        {"content": 7, "refusal": None, "reasoning_content": None},
        {"content": "Hel"},
        {"tool_calls": ["not an object", 3]},
        {"tool_calls": {"index": 0}},
        {"content": "lo"},
    )
    fake.script(Reply(deltas=odd, usage=None))

    chunks = await collect(provider)

    assert text_of(chunks) == "Hello"
    assert not [c for c in chunks if isinstance(c, ToolCallEnd | UsageChunk)]
    assert chunks[-1] == StopChunk(reason="end_turn")


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_come_before_the_text(
    fake: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    key: Literal["reasoning_content", "reasoning"],
) -> None:
    reasoning = Reply.reasoning("The file has 3 columns.", chunk_size=5, key=key)
    fake.script(reasoning + Reply.text("It has three columns."))

    chunks = await collect(provider)

    thoughts = [chunk for chunk in chunks if isinstance(chunk, ReasoningDelta)]
    assert len(thoughts) > 1
    assert "".join(t.text for t in thoughts) == "The file has 3 columns."
    first_text = next(i for i, chunk in enumerate(chunks) if isinstance(chunk, TextDelta))
    assert all(isinstance(chunk, ReasoningDelta) for chunk in chunks[:first_text])
    assert text_of(chunks) == "It has three columns."
    assert chunks[-1] == StopChunk(reason="end_turn")


async def test_a_tool_call_streams_as_start_deltas_end(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    arguments = '{"path": "data.csv", "rows": 5}'
    fake.script(Reply.tool_calls([ToolCall("read_file", arguments, id="call_abc")], fragment=4))

    chunks = await collect(provider)

    assert chunks[0] == ToolCallStart(index=0, id="call_abc", name="read_file")
    deltas = [chunk for chunk in chunks if isinstance(chunk, ToolCallDelta)]
    assert len(deltas) == 8
    assert "".join(delta.arguments_delta for delta in deltas) == arguments
    ends = [chunk for chunk in chunks if isinstance(chunk, ToolCallEnd)]
    assert ends == [
        ToolCallEnd(
            index=0,
            id="call_abc",
            name="read_file",
            arguments={"path": "data.csv", "rows": 5},
            raw_arguments=arguments,
        )
    ]
    assert chunks[-1] == StopChunk(reason="tool_use")


@pytest.mark.parametrize("interleave", [False, True], ids=["sequential", "interleaved"])
async def test_several_tool_calls_in_one_reply(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider, interleave: bool
) -> None:
    calls = [
        ToolCall("read_file", '{"path": "a.csv"}', id="call_1"),
        ToolCall("run_cell", '{"code": "df.describe()"}', id="call_2"),
        ToolCall("list_files", "", id="call_3"),
    ]
    fake.script(Reply.tool_calls(calls, fragment=3, interleave=interleave))

    chunks = await collect(provider)

    starts = [chunk for chunk in chunks if isinstance(chunk, ToolCallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "call_1", "read_file"),
        (1, "call_2", "run_cell"),
        (2, "call_3", "list_files"),
    ]
    for call, index in zip(calls, range(3), strict=True):
        start = chunks.index(starts[index])
        fragments = [c for c in chunks if isinstance(c, ToolCallDelta) and c.index == index]
        assert all(chunks.index(fragment) > start for fragment in fragments)
        assert "".join(f.arguments_delta for f in fragments) == call.arguments
    ends = [chunk for chunk in chunks if isinstance(chunk, ToolCallEnd)]
    assert [(e.index, e.id, e.arguments) for e in ends] == [
        (0, "call_1", {"path": "a.csv"}),
        (1, "call_2", {"code": "df.describe()"}),
        (2, "call_3", {}),  # no arguments at all: an empty object
    ]
    assert chunks[-2:] == [
        UsageChunk(input_tokens=20, output_tokens=10),
        StopChunk(reason="tool_use"),
    ]


async def test_a_tool_call_without_id_gets_one(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.tool_calls([ToolCall("read_file", '{"path": "a"}', omit_id=True)]))

    chunks = await collect(provider)

    start = next(chunk for chunk in chunks if isinstance(chunk, ToolCallStart))
    end = next(chunk for chunk in chunks if isinstance(chunk, ToolCallEnd))
    assert start.id
    assert end.id == start.id
    assert end.arguments == {"path": "a"}


@pytest.mark.parametrize("arguments", ['{"path": "a.csv"', "[1, 2]", "not json"])
async def test_malformed_tool_arguments_end_with_none_and_the_raw_text(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider, arguments: str
) -> None:
    fake.script(Reply.tool_calls([ToolCall("read_file", arguments, id="call_1")], fragment=4))

    chunks = await collect(provider)

    end = next(chunk for chunk in chunks if isinstance(chunk, ToolCallEnd))
    assert end.arguments is None
    assert end.raw_arguments == arguments
    assert chunks[-1] == StopChunk(reason="tool_use")


async def test_a_reply_without_usage_still_stops(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.text("Hi").without_usage())

    chunks = await collect(provider)

    assert not any(isinstance(chunk, UsageChunk) for chunk in chunks)
    assert chunks[-1] == StopChunk(reason="end_turn")


@pytest.mark.parametrize(
    ("finish_reason", "stop"),
    [("length", "max_tokens"), ("content_filter", "content_filter")],
)
async def test_finish_reasons_are_mapped(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider, finish_reason: str, stop: str
) -> None:
    fake.script(Reply.text("Truncat").with_finish_reason(finish_reason))

    chunks = await collect(provider)

    assert chunks[-1] == StopChunk(reason=stop)


# ---- the request on the wire -------------------------------------------------------


async def test_the_request_body_is_chat_completions(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    request = ModelRequest(
        system="You are a data scientist.",
        tools=[ToolSpec(name="read_file", description="Read a file.", parameters=schema)],
        max_tokens=1000,
        messages=[
            ApiMessage(
                role="user",
                ts=1,
                content=[
                    TextBlock(text="What is in this plot?"),
                    ImageBlock(media_type="image/png", data=_PNG),
                ],
            ),
            ApiMessage(
                role="assistant",
                ts=2,
                content=[
                    ReasoningBlock(text="I should read the file.", signature="sig"),
                    TextBlock(text="Let me look."),
                    ToolUseBlock(id="call_1", name="read_file", input={"path": "a.csv"}),
                ],
            ),
            ApiMessage(
                role="user",
                ts=3,
                content=[
                    ToolResultBlock(tool_use_id="call_1", content=[TextBlock(text="x,y\n1,2")]),
                    TextBlock(text="Now plot it."),
                ],
            ),
        ],
    )

    await collect(provider, request)

    [body] = fake.requests
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 1000
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read a file.", "parameters": schema},
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are a data scientist."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this plot?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _PNG}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.csv"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "x,y\n1,2"},
        {"role": "user", "content": "Now plot it."},
    ]
    assert fake.received[0].path == "/v1/chat/completions"
    assert fake.received[0].headers["authorization"] == "Bearer sk-test"
    assert fake.received[0].headers["content-type"] == "application/json"


async def test_tool_result_images_follow_the_tool_message(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    image = ImageBlock(media_type="image/png", data=_PNG)
    request = ModelRequest(
        system="",
        messages=[
            ApiMessage(
                role="assistant",
                ts=1,
                content=[ToolUseBlock(id="call_1", name="plot", input={})],
            ),
            ApiMessage(
                role="user",
                ts=2,
                content=[
                    ToolResultBlock(
                        tool_use_id="call_1",
                        content=[TextBlock(text="Plotted."), image],
                        is_error=False,
                    )
                ],
            ),
        ],
    )

    await collect(provider, request)

    messages = fake.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["assistant", "tool", "user"]
    assert "content" not in messages[0]
    assert messages[1]["content"].startswith("Plotted.")
    assert messages[2]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + _PNG},
    }


# ---- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "seconds"),
    [
        (Reply.status(429, retry_after=1.5), 1.5),
        (Reply.status(429, retry_after_ms=250), 0.25),
        (Reply.status(429), None),
    ],
    ids=["retry-after", "retry-after-ms", "no-header"],
)
async def test_429_is_rate_limited_with_retry_after(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider, reply: Reply, seconds: float | None
) -> None:
    fake.script(reply)
    _, error = await collect_until_error(provider, RateLimited)
    assert error.retryable
    assert error.retry_after == seconds
    assert error.status_code == 429
    assert fake.base_url in error.message


async def test_429_out_of_quota_is_not_retryable(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.status(429, "You exceeded your quota.", error_code="insufficient_quota"))
    _, error = await collect_until_error(provider, RateLimited)
    assert not error.retryable


async def test_500_is_a_server_error_after_exactly_one_request(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    # Had the SDK retried by itself, the second reply would have succeeded.
    fake.script(Reply.status(500), Reply.text("A retry would have seen this."))
    _, error = await collect_until_error(provider, ServerError)
    assert error.retryable
    assert len(fake.requests) == 1
    assert fake.pending == 1


@pytest.mark.parametrize(
    "reply",
    [Reply.status(529), Reply.status(503, "The engine is currently overloaded.")],
    ids=["529", "503-overloaded"],
)
async def test_overloaded(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider, reply: Reply
) -> None:
    fake.script(reply)
    _, error = await collect_until_error(provider, Overloaded)
    assert error.retryable


async def test_503_without_overload_is_a_server_error(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.status(503, "Service unavailable."))

    with pytest.raises(ServerError):
        await collect(provider)


async def test_a_server_that_needs_a_key_says_so_when_the_profile_has_none(
    fake: FakeOpenAI,
) -> None:
    fake.script(Reply.status(401))
    provider = OpenAICompatibleProvider("gpt-test", fake.base_url, None, name="local")
    try:
        with pytest.raises(AuthenticationFailed, match="profile 'local' has none"):
            await collect(provider)
    finally:
        await provider.aclose()


async def test_openai_without_a_key_fails_before_any_request() -> None:
    provider = OpenAICompatibleProvider("gpt-4o", "https://api.openai.com/v1", None, name="default")
    try:
        with pytest.raises(AuthenticationFailed, match="has no API key"):
            await collect(provider)
    finally:
        await provider.aclose()


async def test_context_length_exceeded(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.context_length_exceeded())
    _, error = await collect_until_error(provider, ContextWindowExceeded)
    assert not error.retryable


@pytest.mark.parametrize(
    "reply",
    [Reply.status(404), Reply.status(400, "Unknown parameter: 'foo'."), Reply.status(422)],
    ids=["404", "400", "422"],
)
async def test_other_4xx_are_invalid_requests(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider, reply: Reply
) -> None:
    fake.script(reply)
    _, error = await collect_until_error(provider, InvalidRequest)
    assert not error.retryable


async def test_a_stream_that_ends_without_finish_reason_is_a_network_error(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.text("Half a rep").with_finish_reason(None))

    chunks, _ = await collect_until_error(provider, NetworkError)

    assert text_of(chunks) == "Half a rep"


async def test_an_error_event_midstream_is_a_server_error(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.error_event_midstream("The model crashed."))

    chunks, error = await collect_until_error(provider, ServerError)

    assert text_of(chunks) == "Hell"
    assert "The model crashed." in error.message


async def test_an_error_event_about_context_length_is_context_window_exceeded(
    fake: FakeOpenAI, provider: OpenAICompatibleProvider
) -> None:
    fake.script(Reply.text("Hi").error_after(1, "This model's maximum context length is 8192."))

    await collect_until_error(provider, ContextWindowExceeded)


# ---- the demo model ------------------------------------------------------------------


async def test_the_demo_model_streams_a_reply_that_says_it_is_simulated() -> None:
    with DemoServer() as server:
        provider = demo_provider(server)
        try:
            chunks = await collect(provider)
        finally:
            await provider.aclose()

    assert provider.model == DEMO_MODEL
    text = text_of(chunks)
    assert len([chunk for chunk in chunks if isinstance(chunk, TextDelta)]) > 5
    assert "Simulated reply" in text
    assert "No real model was called" in text
    assert "Describe data.csv" in text  # it echoes the request, to feel like a reply
    reasoning = "".join(chunk.text for chunk in chunks if isinstance(chunk, ReasoningDelta))
    assert "Simulated reasoning" in reasoning
    assert isinstance(chunks[-2], UsageChunk)
    assert chunks[-1] == StopChunk(reason="end_turn")


async def test_the_demo_server_starts_once_and_closes_idempotently() -> None:
    server = DemoServer()
    base_url = server.start()
    assert server.start() == base_url
    server.close()
    server.close()
    with pytest.raises(RuntimeError):
        server.start()


# ---- pieces ------------------------------------------------------------------------


def test_retry_after_headers() -> None:
    assert retry_after_from_headers({"retry-after": "2"}) == 2.0
    assert retry_after_from_headers({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    dated = retry_after_from_headers({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=0)
    assert dated == 1445412490.0
    assert retry_after_from_headers({"retry-after": "soon"}) is None
    assert retry_after_from_headers({}) is None


def test_the_fake_records_the_body_it_was_sent(fake: FakeOpenAI) -> None:
    # The fake answers any HTTP client, not only the SDK: e.g. curl during a demo.
    import urllib.request

    body = json.dumps({"model": "m", "stream": True, "messages": []}).encode()
    request = urllib.request.Request(
        fake.base_url + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        payload = response.read().decode()

    assert payload.startswith("data: {")
    assert payload.endswith("data: [DONE]\n\n")
    assert fake.wait_for_requests(1) == [{"model": "m", "stream": True, "messages": []}]


# ---- reasoning models ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "effort", "expected"),
    [
        ("o3-mini", "low", {"max_completion_tokens": 1000, "reasoning_effort": "low"}),
        ("openai/gpt-5", "high", {"max_completion_tokens": 1000, "reasoning_effort": "high"}),
        ("o4-mini", None, {"max_completion_tokens": 1000}),
        # Not a reasoning model: the effort is not sent, as it would be refused.
        ("gpt-4o", "low", {"max_tokens": 1000}),
        ("gpt-5-chat-latest", "low", {"max_tokens": 1000}),
    ],
)
async def test_reasoning_models_get_max_completion_tokens_and_effort(
    fake: FakeOpenAI, model: str, effort: Literal["low", "high"] | None, expected: dict[str, object]
) -> None:
    provider = OpenAICompatibleProvider(model, fake.base_url, "sk-test", reasoning_effort=effort)
    request = ModelRequest(system="", messages=REQUEST.messages, max_tokens=1000)
    try:
        await collect(provider, request)
    finally:
        await provider.aclose()

    body = fake.requests[0]
    sent = {
        key: body[key]
        for key in ("max_tokens", "max_completion_tokens", "reasoning_effort")
        if key in body
    }
    assert sent == expected
    assert "temperature" not in body
    assert is_reasoning_model(model) == ("max_completion_tokens" in expected)
