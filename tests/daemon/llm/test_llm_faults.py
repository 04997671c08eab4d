"""How each provider reports a model server that misbehaves, run against both
providers and their wire-level fakes: silence before the response and in the
middle of it (the profile's bounds), error pages that are not the API's JSON,
a reset connection, a refused one; and :func:`server_text`, which makes what a
server said fit to show. The fixtures (`kind`, `fake`, `provider`, with the
short bounds below) are in conftest.py."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from hdsp.daemon.conversation import Chunk, StreamTimeouts
from hdsp.daemon.llm import NetworkError, Provider, ProviderError, ServerError
from hdsp.daemon.llm.errors import SERVER_TEXT_LIMIT, server_text
from hdsp.daemon.llm.sdk import http_timeout
from tests.support.provider_helpers import REQUEST, collect, collect_until_error, text_of

from .provider_kinds import Kind

#: Short bounds, so that a silence is seen in a fraction of a second.
SHORT = StreamTimeouts(first_byte=0.6, idle=0.4)


@pytest.fixture
def timeouts() -> StreamTimeouts:
    return SHORT


# ---- silence ------------------------------------------------------------------


async def silenced(provider: Provider) -> tuple[list[Chunk], ProviderError, float]:
    """The NetworkError a silence ends a reply with, the chunks that came before it,
    and the seconds it took."""
    started = time.monotonic()
    with anyio.fail_after(10):
        chunks, error = await collect_until_error(provider, NetworkError)
    return chunks, error, time.monotonic() - started


async def test_a_server_that_accepts_and_never_answers_fails_at_the_first_byte_bound(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    fake.script(kind.reply.accept_and_hang(), kind.reply.text("after the silence"))
    chunks, error, waited = await silenced(provider)
    assert chunks == [] and error.retryable
    assert "accepted the request but sent nothing for 0.6 s" in error.message
    assert "first_byte_timeout" in error.message
    assert SHORT.first_byte <= waited < SHORT.first_byte + 2
    # The connection was given up, and the provider works on.
    await fake.wait_for_disconnects_async(1)
    assert text_of(await collect(provider)) == "after the silence"


async def test_a_reply_that_stops_midway_fails_at_the_idle_bound(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    fake.script(kind.reply.hang(), kind.reply.text("whole this time"))
    chunks, error, waited = await silenced(provider)
    assert text_of(chunks)  # what came before the silence
    assert "nothing for 0.4 s" in error.message and "idle_timeout" in error.message
    assert SHORT.idle <= waited < SHORT.idle + 2
    assert text_of(await collect(provider)) == "whole this time"


async def test_a_slow_but_steady_server_is_not_cut_off(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    # Just under the first-byte bound, then events without a gap: no silence.
    fake.script(kind.reply.text("slow start").slow_first_byte(SHORT.first_byte / 2))
    assert text_of(await collect(provider)) == "slow start"


async def test_the_consumers_own_time_is_not_silence(kind: Kind, fake: Any) -> None:
    provider = kind.provider(fake.base_url, SHORT)
    fake.script(kind.reply.text("one two three", chunk_size=4))
    try:
        got = []
        async with provider.stream(REQUEST) as chunks:
            async for chunk in chunks:
                got.append(chunk)
                if len(got) == 1:  # a slow consumer, not a silent server
                    await anyio.sleep(SHORT.idle * 1.5)
        assert text_of(got) == "one two three"
    finally:
        await provider.aclose()


def test_the_http_read_timeout_is_only_a_backstop_behind_both_bounds() -> None:
    for timeouts in (StreamTimeouts(), StreamTimeouts(first_byte=500, idle=10)):
        read = http_timeout(timeouts).read
        assert read is not None and read > max(timeouts.first_byte, timeouts.idle)


@pytest.mark.parametrize("value", [0.0, -1.0, float("inf"), float("nan")])
def test_a_bound_must_be_a_positive_number(value: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        StreamTimeouts(first_byte=value)


# ---- what the server said ---------------------------------------------------------


async def test_a_plain_text_503_keeps_the_servers_words(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    fake.script(kind.reply.plain_status(503, "Upstream busy:\x1b[31m try again\r\nlater"))
    _, error = await collect_until_error(provider, ServerError)
    assert error.status_code == 503 and error.retryable
    assert "Upstream busy: [31m try again later" in error.message
    assert "\x1b" not in error.message and "\n" not in error.message


async def test_an_html_error_page_keeps_its_text_without_the_markup(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    page = (
        "<html><head><title>502 Bad Gateway</title><style>h1{}</style></head>"
        "<body><h1>502 Bad Gateway</h1><hr><center>nginx/1.25</center></body></html>"
    )
    fake.script(kind.reply.plain_status(502, page, content_type="text/html"))
    _, error = await collect_until_error(provider, ServerError)
    assert "(502 Bad Gateway: nginx/1.25)" in error.message
    assert "<" not in error.message


async def test_a_reset_connection_says_so(kind: Kind, fake: Any, provider: Provider) -> None:
    fake.script(kind.reply.text("Hello there, world").reset_after(4))
    _, error = await collect_until_error(provider, NetworkError)
    assert "reset by peer" in error.message


async def test_a_refused_connection_says_so(unreachable: Provider) -> None:
    _, error = await collect_until_error(unreachable, NetworkError)
    assert "Could not connect" in error.message and "connection refused" in error.message


async def test_broken_framing_and_a_clean_end_midway_are_network_errors(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    fake.script(
        kind.reply.text("Hello there, world").unframed_after(4),
        kind.reply.text("Hello there, world").end_after(4),
    )
    _, broken = await collect_until_error(provider, NetworkError)
    assert "chunk" in broken.message
    _, ended = await collect_until_error(provider, NetworkError)
    assert "ended before the model finished" in ended.message


def test_server_text() -> None:
    assert server_text("  Service\tUnavailable\r\n") == "Service Unavailable"
    assert server_text("evil\x1b]0;title\x07 \u202eright-to-left") == "evil ]0;title right-to-left"
    assert server_text({"detail": "Not Found"}) == '{"detail":"Not Found"}'
    assert server_text(None) == "" and server_text("") == ""
    long = server_text("x" * 1000)
    assert len(long) == SERVER_TEXT_LIMIT and long.endswith("\u2026")
    page = "<!DOCTYPE html><html><body><script>var a=1</script><p>Down &amp; out</p></body></html>"
    assert server_text(page) == "Down & out"
    assert server_text("<not markup, just text") == "<not markup, just text"
