"""Counting a request's tokens before it is sent (hdsp.daemon.llm.tokens), and
each provider's counter against what the server reports.

The counters are checked against requests whose usage the providers' APIs
reported (tests/daemon/llm/recorded_usage.json: OpenAI's cookbook and HTTP
recordings of pydantic-ai's tests against the real APIs): OpenAI's tokenizer
with the Chat Completions framing, tools, tool calls and their results;
Anthropic's count_tokens endpoint. The estimate's error is measured and
bounded, and calibration brings it down.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hdsp.daemon.conversation import (
    ApiMessage,
    ModelRequest,
    TextBlock,
    UsageChunk,
)
from hdsp.daemon.llm.anthropic import AnthropicProvider
from hdsp.daemon.llm.openai_compat import (
    OpenAICompatibleProvider,
    is_reasoning_model,
    to_chat_messages,
)
from hdsp.daemon.llm.tokens import (
    Calibration,
    count_chat_tokens,
    encoding_for_model,
    estimate_request_tokens,
)
from tests.fakes.anthropic_server import FakeAnthropic, Usage, fake_input_tokens
from tests.fakes.anthropic_server import Reply as AnthropicReply
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.sessions import data_science_session
from tests.support.provider_helpers import collect

RECORDED = json.loads((Path(__file__).parent / "recorded_usage.json").read_text())


def _recorded_id(entry: dict[str, Any]) -> str:
    source = entry["source"].rsplit("/", 1)[-1].removesuffix(".yaml").removesuffix(".ipynb")
    return f"{entry['model']}-{source}-{entry['prompt_tokens']}"


@pytest.mark.parametrize("recorded", RECORDED["openai_chat"], ids=_recorded_id)
def test_the_tokenizer_counts_a_recorded_request_as_the_api_reported(
    recorded: dict[str, Any],
) -> None:
    """Within 5% of the API's prompt_tokens, with tools and tool calls as with text
    (their JSON is not what the model reads: the server declares the functions
    in TypeScript and frames each call and result as a message)."""
    model = recorded["model"]
    encoding = encoding_for_model(model)
    assert encoding is not None
    counted = count_chat_tokens(
        encoding,
        recorded["messages"],
        recorded.get("tools"),
        reasoning=is_reasoning_model(model),
    )
    reported = recorded["prompt_tokens"]
    assert abs(counted - reported) <= 0.05 * reported, (counted, reported)


def test_plain_messages_are_counted_exactly() -> None:
    """Without tools the framing is OpenAI's documented one: the count is exact."""
    plain = [e for e in RECORDED["openai_chat"] if "tools" not in e]
    assert len(plain) >= 5
    for recorded in plain:
        encoding = encoding_for_model(recorded["model"])
        reasoning = is_reasoning_model(recorded["model"])
        counted = count_chat_tokens(encoding, recorded["messages"], reasoning=reasoning)
        assert counted == recorded["prompt_tokens"], recorded["source"]


def test_models_get_their_own_tokenizer_and_unknown_ones_none() -> None:
    o200k = encoding_for_model("gpt-4o-2024-08-06")
    cl100k = encoding_for_model("gpt-4-0613")
    assert o200k is not None and o200k.name == "o200k_base"
    assert cl100k is not None and cl100k.name == "cl100k_base"
    assert encoding_for_model("openai/gpt-4.1-mini") is not None  # a router's spelling
    assert encoding_for_model("llama3.1:8b") is None
    assert encoding_for_model("qwen2.5-coder") is None


def test_the_estimate_is_within_half_and_calibration_brings_it_close() -> None:
    """The estimate against the tokenizer's count of the same requests (the
    count a provider reports, within the error shown above). Uncalibrated, four
    characters a token undercounts tables of numbers by ~45% (2.35 characters a
    token with o200k_base) and overcounts English prose (5.4); the reported usage
    of the first reply corrects that for the session's kind of text."""
    encoding = encoding_for_model("gpt-4o")
    assert encoding is not None
    calibration = Calibration()
    errors = []
    for turns in (2, 5, 10, 20, 40):
        request = data_science_session(turns)
        chat = to_chat_messages(request.system, request.messages)
        reported = count_chat_tokens(encoding, chat)
        estimate = estimate_request_tokens(request)
        assert abs(estimate - reported) <= reported / 2
        errors.append(abs(calibration.apply(estimate) - reported) / reported)
        calibration.observe(estimate, reported)
    # Calibrated by the replies before it, the estimate is within 10%.
    assert max(errors[1:]) <= 0.10


def test_one_odd_reply_cannot_make_the_estimate_absurd() -> None:
    calibration = Calibration()
    calibration.observe(1000, 1000)
    calibration.observe(1000, 1_000_000)  # a server that reports nonsense
    assert calibration.ratio <= 4.0
    calibration.observe(1000, 0)  # no usage: ignored
    assert calibration.samples == 2


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(context_window=100_000) as fake:
        yield fake


async def test_the_openai_counter_matches_the_prompt_tokens_reported(
    fake_openai: FakeOpenAI,
) -> None:
    """The provider's count before the request equals the usage the server
    reports after it (the fake counts as OpenAI does)."""
    provider = OpenAICompatibleProvider("gpt-4o", fake_openai.base_url, "sk-test")
    try:
        request = data_science_session(8)
        counted = await provider.count_tokens(request)
        fake_openai.script(Reply.text("ok"))
        chunks = await collect(provider, request)
    finally:
        await provider.aclose()
    usage = [c for c in chunks if type(c).__name__ == "UsageChunk"]
    assert counted is not None and usage
    assert counted == usage[-1].input_tokens  # type: ignore[attr-defined]


async def test_a_local_model_has_no_counter_of_its_own(fake_openai: FakeOpenAI) -> None:
    provider = OpenAICompatibleProvider("llama3.1:8b", fake_openai.base_url, None)
    try:
        assert await provider.count_tokens(data_science_session(1)) is None
    finally:
        await provider.aclose()


async def test_anthropic_counts_with_its_count_tokens_endpoint() -> None:
    with FakeAnthropic() as fake:
        provider = AnthropicProvider("claude-sonnet-4-5", "sk-ant-test", fake.base_url)
        try:
            request = data_science_session(3)
            counted = await provider.count_tokens(request)
            assert len(fake.count_requests) == 1
            body = fake.count_requests[0]
            assert counted == fake_input_tokens(body)
            assert body["model"] == "claude-sonnet-4-5"
            assert body["tools"][0]["name"] == "execute_code"
            assert "stream" not in body and "max_tokens" not in body
        finally:
            await provider.aclose()


async def test_a_server_without_count_tokens_is_not_asked_again() -> None:
    with FakeAnthropic() as fake:
        fake.counts_tokens = False
        provider = AnthropicProvider("claude-sonnet-4-5", "sk-ant-test", fake.base_url)
        try:
            assert await provider.count_tokens(data_science_session(1)) is None
            assert await provider.count_tokens(data_science_session(1)) is None
            assert fake.count_requests == []
            # The 404 was asked once: the second call did not reach the server.
        finally:
            await provider.aclose()


def _without_cache_marks(value: Any) -> Any:
    """A Messages API body without its cache breakpoints (which change where the
    cache starts, not what is counted), the system prompt as one string."""
    if isinstance(value, dict):
        plain = {k: _without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
        system = plain.get("system")
        if isinstance(system, list):
            plain["system"] = "".join(block["text"] for block in system)
        return plain
    if isinstance(value, list):
        return [_without_cache_marks(v) for v in value]
    return value


def _as_request(body: dict[str, Any]) -> ModelRequest:
    messages = [
        ApiMessage(
            role=message["role"],
            content=[TextBlock(text=block["text"]) for block in message["content"]],
            ts=i + 1,
        )
        for i, message in enumerate(body["messages"])
    ]
    return ModelRequest(system=body.get("system", ""), messages=messages)


@pytest.mark.parametrize(
    "recorded",
    RECORDED["anthropic_count_tokens"],
    ids=lambda e: e["source"].rsplit("/", 1)[-1].removesuffix(".yaml"),
)
async def test_anthropic_counts_a_recorded_request_as_its_usage_reported(
    recorded: dict[str, Any],
) -> None:
    """hdsp's count_tokens request for a recorded request is the one that was
    recorded, so the count it gets is the recorded one; and that count is within
    5% of the usage the Messages API reported for the same request (input, cache
    reads and cache writes together)."""
    body = recorded["count_body"]
    usage = recorded["usage"]
    counted_as = _without_cache_marks(body)
    with FakeAnthropic() as fake:
        fake.count_answer = lambda sent: (
            recorded["input_tokens"] if _without_cache_marks(sent) == counted_as else None
        )
        fake.script(
            AnthropicReply.text(
                "ok",
                usage=Usage(
                    usage["input_tokens"],
                    5,
                    cache_read=usage["cache_read_input_tokens"],
                    cache_write=usage["cache_creation_input_tokens"],
                ),
            )
        )
        provider = AnthropicProvider(body["model"], "sk-ant-test", fake.base_url)
        try:
            request = _as_request(body)
            counted = await provider.count_tokens(request)
            chunks = await collect(provider, request)
        finally:
            await provider.aclose()
        sent = fake.requests[0]
    # The request that went is the one counted.
    assert {k: v for k, v in _without_cache_marks(sent).items() if k in counted_as} == counted_as
    reported = next(c for c in chunks if isinstance(c, UsageChunk))
    total = reported.input_tokens + reported.cache_read_tokens + reported.cache_write_tokens
    assert counted is not None
    assert abs(counted - total) <= 0.05 * total, (counted, total)
