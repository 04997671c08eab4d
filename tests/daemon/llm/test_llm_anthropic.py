"""The Anthropic provider against a wire-level fake, over real loopback HTTP.

The real `anthropic` SDK and its HTTP stack run unmodified; only the server is
fake, and it refuses what the real API refuses (see tests/fakes/anthropic_server.py).
"""

from __future__ import annotations

from typing import Any

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
from hdsp.daemon.llm.anthropic import AnthropicProvider
from hdsp.daemon.llm.errors import (
    AuthenticationFailed,
    ContextWindowExceeded,
    InvalidRequest,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)
from tests.fakes.anthropic_server import (
    ContentBlock,
    FakeAnthropic,
    Reply,
    ToolUse,
    Usage,
    validate,
)
from tests.support.provider_helpers import REQUEST, collect, collect_until_error, text_of

from .provider_kinds import ANTHROPIC_KEY, KINDS, Kind

KEY = ANTHROPIC_KEY
EPHEMERAL = {"type": "ephemeral"}


#: A real 2 x 2 PNG (images are read before they are sent).
_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="


@pytest.fixture
def kind() -> Kind:
    """conftest.py's `fake` and `provider`, of Anthropic's kind."""
    return KINDS["anthropic"]


def breakpoints(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every block of a request body that carries cache_control."""
    blocks = list(body.get("system", []))
    for message in body["messages"]:
        blocks.extend(message["content"])
    return [block for block in blocks if "cache_control" in block]


# ---- replies -------------------------------------------------------------------


async def test_text_streams_in_order_with_usage_and_stop(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    usage = Usage(10, 5, cache_read=100, cache_write=20)
    fake.script(Reply.text("Hello, world!", chunk_size=3, usage=usage))

    chunks = await collect(provider)

    deltas = [chunk for chunk in chunks if isinstance(chunk, TextDelta)]
    assert [delta.text for delta in deltas] == ["Hel", "lo,", " wo", "rld", "!"]
    # Anthropic's counts are disjoint already: input excludes cache reads and writes.
    assert chunks[len(deltas) :] == [
        UsageChunk(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_tokens=20),
        StopChunk(reason="end_turn"),
    ]


async def test_cumulative_usage_in_message_delta_counts_once(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    usage = Usage(10, 7, cache_read=3, cache_write=2, repeat_in_delta=True)
    fake.script(Reply.text("Hi", usage=usage))

    chunks = await collect(provider)

    assert [chunk for chunk in chunks if isinstance(chunk, UsageChunk)] == [
        UsageChunk(input_tokens=10, output_tokens=7, cache_read_tokens=3, cache_write_tokens=2)
    ]


async def test_thinking_streams_as_reasoning_then_its_signature(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    thinking = Reply.thinking("The file has 3 columns.", signature="sig-1", chunk_size=5)
    fake.script(thinking + Reply.text("It has three columns."))

    chunks = await collect(provider)

    thoughts = [chunk for chunk in chunks if isinstance(chunk, ReasoningDelta)]
    assert len(thoughts) > 2
    assert "".join(t.text for t in thoughts) == "The file has 3 columns."
    assert thoughts[-1] == ReasoningDelta(text="", signature="sig-1")
    assert all(t.signature is None for t in thoughts[:-1])
    first_text = next(i for i, chunk in enumerate(chunks) if isinstance(chunk, TextDelta))
    assert chunks[first_text - 1] == thoughts[-1]
    assert text_of(chunks) == "It has three columns."
    assert chunks[-1] == StopChunk(reason="end_turn")


async def test_redacted_thinking_is_skipped(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(Reply.redacted_thinking() + Reply.text("Answer."))

    chunks = await collect(provider)

    assert not any(isinstance(chunk, ReasoningDelta) for chunk in chunks)
    assert text_of(chunks) == "Answer."


async def test_a_tool_call_streams_as_start_deltas_end(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    arguments = '{"path": "data.csv", "rows": 5}'
    fake.script(Reply.tool_use([ToolUse("read_file", arguments, id="toolu_abc")], fragment=4))

    chunks = await collect(provider)

    assert chunks[0] == ToolCallStart(index=0, id="toolu_abc", name="read_file")
    deltas = [chunk for chunk in chunks if isinstance(chunk, ToolCallDelta)]
    assert len(deltas) == 8  # the API's empty first fragment is not passed on
    assert "".join(delta.arguments_delta for delta in deltas) == arguments
    ends = [chunk for chunk in chunks if isinstance(chunk, ToolCallEnd)]
    assert ends == [
        ToolCallEnd(
            index=0,
            id="toolu_abc",
            name="read_file",
            arguments={"path": "data.csv", "rows": 5},
            raw_arguments=arguments,
        )
    ]
    assert chunks[-2:] == [
        UsageChunk(input_tokens=40, output_tokens=20),
        StopChunk(reason="tool_use"),
    ]


async def test_several_tool_calls_after_text_are_numbered_in_order(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    calls = [
        ToolUse("read_file", '{"path": "a.csv"}', id="toolu_1"),
        ToolUse("run_cell", '{"code": "df.describe()"}', id="toolu_2"),
        ToolUse("list_files", "", id="toolu_3"),
    ]
    fake.script(Reply.text("Let me look.") + Reply.tool_use(calls, fragment=3))

    chunks = await collect(provider)

    assert text_of(chunks) == "Let me look."
    starts = [chunk for chunk in chunks if isinstance(chunk, ToolCallStart)]
    # Numbered among the calls (0, 1, 2), not by content block (the text is block 0).
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "toolu_1", "read_file"),
        (1, "toolu_2", "run_cell"),
        (2, "toolu_3", "list_files"),
    ]
    for call, index in zip(calls, range(3), strict=True):
        start = chunks.index(starts[index])
        fragments = [c for c in chunks if isinstance(c, ToolCallDelta) and c.index == index]
        assert all(chunks.index(fragment) > start for fragment in fragments)
        assert "".join(f.arguments_delta for f in fragments) == call.input
    ends = [chunk for chunk in chunks if isinstance(chunk, ToolCallEnd)]
    assert [(e.index, e.id, e.arguments) for e in ends] == [
        (0, "toolu_1", {"path": "a.csv"}),
        (1, "toolu_2", {"code": "df.describe()"}),
        (2, "toolu_3", {}),  # no input at all: an empty object
    ]
    assert chunks[-1] == StopChunk(reason="tool_use")


@pytest.mark.parametrize("arguments", ['{"path": "a.csv"', "[1, 2]", "not json"])
async def test_malformed_tool_input_ends_with_none_and_the_raw_text(
    fake: FakeAnthropic, provider: AnthropicProvider, arguments: str
) -> None:
    fake.script(Reply.tool_use([ToolUse("read_file", arguments, id="toolu_1")], fragment=4))

    chunks = await collect(provider)

    end = next(chunk for chunk in chunks if isinstance(chunk, ToolCallEnd))
    assert end.arguments is None
    assert end.raw_arguments == arguments
    assert chunks[-1] == StopChunk(reason="tool_use")


@pytest.mark.parametrize(
    ("stop_reason", "stop"),
    [
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("model_context_window_exceeded", "max_tokens"),
        ("refusal", "refusal"),
        (None, "end_turn"),
    ],
)
async def test_stop_reasons_are_mapped(
    fake: FakeAnthropic, provider: AnthropicProvider, stop_reason: str | None, stop: str
) -> None:
    fake.script(Reply.text("Truncat").with_stop_reason(stop_reason))

    chunks = await collect(provider)

    assert chunks[-1] == StopChunk(reason=stop)


async def test_fields_missing_null_or_of_the_wrong_type_count_as_absent(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    # What a sloppy proxy might send: none of it may raise, the rest still counts.
    text = ContentBlock(
        {"type": "text", "text": None},
        (
            {"type": "text_delta", "text": None},
            {"type": "text_delta", "text": 42},
            {"type": "text_delta"},
            {"type": None, "text": "not a delta"},
            "not an object",  # type: ignore[arg-type]
            {"type": "text_delta", "text": "Hello"},
            {"type": "text_delta", "text": [" there"]},
            {"type": "text_delta", "text": " world"},
        ),
    )
    thinking = ContentBlock(
        {"type": "thinking", "thinking": 7, "signature": None},
        (
            {"type": "thinking_delta", "thinking": None},
            {"type": "signature_delta", "signature": None},
        ),
    )
    tool = ContentBlock(
        {"type": "tool_use", "id": None, "name": 3, "input": None},
        (
            {"type": "input_json_delta", "partial_json": None},
            {"type": "input_json_delta", "partial_json": '{"a": 1}'},
        ),
    )
    usage = Usage(10, 5, cache_read=None, cache_write="2")  # type: ignore[arg-type]
    stop_reason: Any = ["tool_use"]
    fake.script(Reply(blocks=(text, thinking, tool), usage=usage, stop_reason=stop_reason))

    chunks = await collect(provider)

    assert text_of(chunks) == "Hello world"
    assert not any(isinstance(chunk, ReasoningDelta) for chunk in chunks)
    start = next(chunk for chunk in chunks if isinstance(chunk, ToolCallStart))
    assert start.index == 0
    assert start.name == ""
    assert start.id.startswith("toolu_")  # an id of hdsp's, so the call can be answered
    assert [chunk for chunk in chunks if isinstance(chunk, ToolCallDelta)] == [
        ToolCallDelta(index=0, arguments_delta='{"a": 1}')
    ]
    end = next(chunk for chunk in chunks if isinstance(chunk, ToolCallEnd))
    assert (end.id, end.arguments) == (start.id, {"a": 1})
    assert chunks[-2:] == [
        UsageChunk(input_tokens=10, output_tokens=5),
        StopChunk(reason="end_turn"),
    ]


# ---- the request on the wire -------------------------------------------------------


async def test_the_request_body_is_messages_api_with_cache_breakpoints(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    png = ImageBlock(media_type="image/png", data=_PNG)
    request = ModelRequest(
        system="You are a data scientist.",
        tools=[ToolSpec(name="read_file", description="Read a file.", parameters=schema)],
        max_tokens=1000,
        messages=[
            ApiMessage(role="user", ts=1, content=[TextBlock(text="What is in this plot?"), png]),
            ApiMessage(
                role="assistant",
                ts=2,
                content=[
                    ReasoningBlock(text="I should read the file.", signature="sig-1"),
                    TextBlock(text="Let me look."),
                    ToolUseBlock(id="toolu_1", name="read_file", input={"path": "a.csv"}),
                ],
            ),
            ApiMessage(
                role="user",
                ts=3,
                content=[
                    ToolResultBlock(
                        tool_use_id="toolu_1", content=[TextBlock(text="x,y\n1,2"), png]
                    )
                ],
            ),
            # A second user message in a row: merged into the one before.
            ApiMessage(role="user", ts=4, content=[TextBlock(text="Now plot it.")]),
        ],
    )

    await collect(provider, request)

    [received] = fake.received
    assert received.path == "/v1/messages"
    assert received.headers["content-type"] == "application/json"
    assert received.headers.get("x-api-key") == KEY or (
        received.headers.get("authorization") == f"Bearer {KEY}"
    )
    body = received.body
    assert body["model"] == "claude-test"
    assert body["stream"] is True
    assert body["max_tokens"] == 1000
    assert "thinking" not in body
    assert body["system"] == [
        {"type": "text", "text": "You are a data scientist.", "cache_control": EPHEMERAL}
    ]
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a file.", "input_schema": schema}
    ]
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": _PNG},
    }
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this plot?"},
                image | {"cache_control": EPHEMERAL},  # the previous request's tail
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should read the file.", "signature": "sig-1"},
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "a.csv"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "x,y\n1,2"}, image],
                },
                {"type": "text", "text": "Now plot it.", "cache_control": EPHEMERAL},
            ],
        },
    ]
    assert len(breakpoints(body)) == 3


async def test_merged_user_messages_put_tool_results_first(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    request = ModelRequest(
        system="",
        messages=[
            ApiMessage(role="user", ts=1, content=[TextBlock(text="Plot it.")]),
            ApiMessage(
                role="assistant", ts=2, content=[ToolUseBlock(id="toolu_1", name="plot", input={})]
            ),
            ApiMessage(role="user", ts=3, content=[TextBlock(text="Use red, please.")]),
            ApiMessage(
                role="user",
                ts=4,
                content=[
                    ToolResultBlock(
                        tool_use_id="toolu_1", content=[TextBlock(text="boom")], is_error=True
                    )
                ],
            ),
        ],
    )

    await collect(provider, request)

    body = fake.requests[0]
    assert "system" not in body  # an empty system prompt is left out, not sent empty
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [{"type": "text", "text": "boom"}],
            "is_error": True,
        },
        {"type": "text", "text": "Use red, please.", "cache_control": EPHEMERAL},
    ]


async def test_what_the_api_refuses_is_left_out(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    request = ModelRequest(
        system="Be brief.",
        messages=[
            ApiMessage(role="user", ts=1, content=[TextBlock(text="Hi"), TextBlock(text="")]),
            # Reasoning without a signature (another provider's) cannot go back; the
            # message is then empty, and dropping it leaves two user turns to merge.
            ApiMessage(role="assistant", ts=2, content=[ReasoningBlock(text="Hmm.")]),
            ApiMessage(
                role="user",
                ts=3,
                content=[
                    ToolResultBlock(tool_use_id="toolu_9", content=[TextBlock(text="")]),
                    TextBlock(text="Go on."),
                ],
            ),
        ],
    )

    await collect(provider, request)

    assert fake.requests[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_9"},
                {"type": "text", "text": "Hi"},
                {"type": "text", "text": "Go on.", "cache_control": EPHEMERAL},
            ],
        }
    ]


async def test_a_long_conversation_keeps_three_breakpoints(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    messages = []
    for turn in range(10):
        messages.append(ApiMessage(role="user", ts=2 * turn, content=[TextBlock(text=f"q{turn}")]))
        messages.append(
            ApiMessage(role="assistant", ts=2 * turn + 1, content=[TextBlock(text=f"a{turn}")])
        )
    messages.append(ApiMessage(role="user", ts=99, content=[TextBlock(text="last")]))

    await collect(provider, ModelRequest(system="System.", messages=messages))

    body = fake.requests[0]
    assert [block["text"] for block in breakpoints(body)] == ["System.", "q9", "last"]


async def test_extended_thinking_is_requested_with_its_budget(fake: FakeAnthropic) -> None:
    provider = AnthropicProvider("claude-test", KEY, fake.base_url, thinking_budget=2048)
    try:
        await collect(provider, REQUEST)
    finally:
        await provider.aclose()

    body = fake.requests[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048


async def test_a_thinking_budget_above_max_tokens_fails_before_any_request(
    fake: FakeAnthropic,
) -> None:
    provider = AnthropicProvider("claude-test", KEY, fake.base_url, thinking_budget=4096)
    try:
        with pytest.raises(InvalidRequest, match="thinking budget"):
            await collect(
                provider, ModelRequest(system="", messages=REQUEST.messages, max_tokens=4096)
            )
    finally:
        await provider.aclose()

    assert fake.requests == []


def test_a_thinking_budget_below_the_minimum_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="at least 1024"):
        AnthropicProvider("claude-test", KEY, "http://127.0.0.1:9", thinking_budget=500)


async def test_model_info_comes_from_the_table(fake: FakeAnthropic) -> None:
    known = AnthropicProvider("claude-sonnet-4-5-20250929", KEY, fake.base_url)
    unknown = AnthropicProvider("claude-test", KEY, fake.base_url)
    try:
        assert known.info().known
        assert known.info().context_window == 200_000
        assert not unknown.info().known
    finally:
        await known.aclose()
        await unknown.aclose()


# ---- errors ------------------------------------------------------------------------


async def test_429_is_rate_limited_with_retry_after(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(Reply.status(429, retry_after=2.5))
    _, error = await collect_until_error(provider, RateLimited)
    assert error.retryable
    assert error.retry_after == 2.5
    assert error.status_code == 429
    assert fake.base_url in error.message


@pytest.mark.parametrize(
    "reply",
    [Reply.overloaded(), Reply.status(503, "Overloaded", error_type="overloaded_error")],
    ids=["529", "503-overloaded_error"],
)
async def test_overloaded(fake: FakeAnthropic, provider: AnthropicProvider, reply: Reply) -> None:
    fake.script(reply)
    _, error = await collect_until_error(provider, Overloaded)
    assert error.retryable


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_5xx_is_a_server_error(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int
) -> None:
    fake.script(Reply.status(status))
    _, error = await collect_until_error(provider, ServerError)
    assert error.retryable
    assert error.status_code == status


@pytest.mark.parametrize(
    "reply",
    [
        Reply.status(429, retry_after=1),
        Reply.status(500),
        Reply.overloaded(),
        Reply.status(408),
        Reply.text("Hello there").cut_after(3),
    ],
    ids=["429", "500", "529", "408", "cut"],
)
async def test_exactly_one_http_request_per_call(
    fake: FakeAnthropic, provider: AnthropicProvider, reply: Reply
) -> None:
    # Had the SDK retried by itself, the second reply would have succeeded.
    fake.script(reply, Reply.text("A retry would have seen this."))
    _, error = await collect_until_error(provider, ProviderError)
    assert error.retryable
    assert len(fake.requests) == 1
    assert fake.pending == 1


async def test_anthropic_without_a_key_fails_before_any_request() -> None:
    provider = AnthropicProvider("claude-sonnet-4-5", None, "https://api.anthropic.com")
    try:
        with pytest.raises(AuthenticationFailed, match="has no API key"):
            await collect(provider)
    finally:
        await provider.aclose()


async def test_a_proxy_that_needs_a_key_says_so_when_the_profile_has_none(
    fake: FakeAnthropic,
) -> None:
    fake.script(Reply.text("A proxy without keys."), Reply.status(401))
    provider = AnthropicProvider("claude-test", None, fake.base_url, name="proxy")
    try:
        assert text_of(await collect(provider)) == "A proxy without keys."
        with pytest.raises(AuthenticationFailed, match="profile 'proxy' has none"):
            await collect(provider)
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    "reply",
    [
        Reply.prompt_too_long(),
        Reply.status(
            400,
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
            "decrease input length or `max_tokens` and try again",
        ),
        Reply.status(413),
    ],
    ids=["prompt-too-long", "context-limit", "413"],
)
async def test_context_window_exceeded(
    fake: FakeAnthropic, provider: AnthropicProvider, reply: Reply
) -> None:
    fake.script(reply)
    _, error = await collect_until_error(provider, ContextWindowExceeded)
    assert not error.retryable
    assert "Condense" in error.message


@pytest.mark.parametrize(
    "reply",
    [Reply.status(404), Reply.status(400, "tools.0.name: String should match pattern")],
    ids=["404", "400"],
)
async def test_other_4xx_are_invalid_requests(
    fake: FakeAnthropic, provider: AnthropicProvider, reply: Reply
) -> None:
    fake.script(reply)
    _, error = await collect_until_error(provider, InvalidRequest)
    assert not error.retryable


@pytest.mark.parametrize(
    "reply",
    [
        Reply.status(
            400,
            "Your credit balance is too low to access the Anthropic API. Please go to "
            "Plans & Billing to upgrade or purchase credits.",
        ),
        Reply.status(402, "Payment required.", error_type="billing_error"),
    ],
    ids=["400-credit-balance", "402-billing_error"],
)
async def test_an_account_without_credit_is_not_retried(
    fake: FakeAnthropic, provider: AnthropicProvider, reply: Reply
) -> None:
    fake.script(reply)
    _, error = await collect_until_error(provider, RateLimited)
    assert not error.retryable
    assert "credit" in error.message


async def test_a_stream_that_ends_without_message_stop_is_a_network_error(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(Reply.text("Half a rep").without_stop())

    chunks, _ = await collect_until_error(provider, NetworkError)

    assert text_of(chunks) == "Half a rep"
    assert not any(isinstance(chunk, StopChunk) for chunk in chunks)


@pytest.mark.parametrize(
    ("error_type", "message", "expected"),
    [
        ("overloaded_error", "Overloaded", Overloaded),
        ("api_error", "Internal server error", ServerError),
        ("rate_limit_error", "Rate limited", RateLimited),
        (
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000",
            ContextWindowExceeded,
        ),
    ],
)
async def test_an_error_event_midstream_is_translated(
    fake: FakeAnthropic,
    provider: AnthropicProvider,
    error_type: str,
    message: str,
    expected: type[ProviderError],
) -> None:
    fake.script(Reply.error_event_midstream(error_type, message))

    chunks, error = await collect_until_error(provider, expected)

    assert text_of(chunks) == "Hell"
    assert message in error.message


# ---- the fake itself -----------------------------------------------------------------


def test_the_fake_refuses_what_the_api_refuses() -> None:
    headers = {"x-api-key": KEY}
    ok: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
    }
    assert validate(ok, headers) is None
    assert validate(ok, {})[:2] == (401, "authentication_error")  # type: ignore[index]
    five = [{"type": "text", "text": str(i), "cache_control": EPHEMERAL} for i in range(5)]
    too_many = ok | {"messages": [{"role": "user", "content": five}]}
    assert "A maximum of 4 blocks" in validate(too_many, headers)[2]  # type: ignore[index]
    empty = ok | {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]}
    assert "non-empty" in validate(empty, headers)[2]  # type: ignore[index]
    greedy = ok | {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert "greater than" in validate(greedy, headers)[2]  # type: ignore[index]
