"""What every provider does the same, run against each one and its wire-level fake:
consecutive replies, the fake's default reply, a malformed stream, a stream cut
midway, a rejected key, an unreachable server, cancellation (the HTTP connection
is closed, promptly), leaving a reply early, and how many connections stay open
after a burst. The fixtures (`kind`, `fake`, `provider`) are in conftest.py."""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest

from hdsp.daemon.conversation import Chunk, TextDelta
from hdsp.daemon.llm import AuthenticationFailed, NetworkError, Provider
from hdsp.daemon.llm.sdk import CONNECTION_LIMITS
from tests.support.provider_helpers import REQUEST, collect, collect_until_error, text_of

from .provider_kinds import Kind


async def test_consecutive_replies_reuse_the_connection(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    fake.script(kind.reply.text("one"), kind.reply.text("two"))

    assert text_of(await collect(provider)) == "one"
    assert text_of(await collect(provider)) == "two"
    assert fake.disconnects == 0


async def test_an_empty_script_gets_the_default_reply(fake: Any, provider: Provider) -> None:
    assert "default reply" in text_of(await collect(provider))


async def test_malformed_sse_is_a_network_error(kind: Kind, fake: Any, provider: Provider) -> None:
    fake.script(kind.reply.malformed_sse())

    chunks, error = await collect_until_error(provider, NetworkError)

    assert text_of(chunks) == "Hell"
    assert "malformed" in error.message


async def test_a_stream_cut_midway_raises_network_error_from_the_iteration(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    # Two text deltas, then the cut.
    fake.script(kind.reply.text("Hello there, world", chunk_size=3).cut_after(kind.text_at + 2))

    chunks, error = await collect_until_error(provider, NetworkError)

    assert text_of(chunks) == "Hello "
    assert error.retryable
    assert "broke in the middle" in error.message


@pytest.mark.parametrize("status", [401, 403])
async def test_a_rejected_key_is_an_authentication_failure(
    kind: Kind, fake: Any, provider: Provider, status: int
) -> None:
    fake.script(kind.reply.status(status))
    _, error = await collect_until_error(provider, AuthenticationFailed)
    assert not error.retryable
    assert error.status_code == status
    assert fake.base_url in error.message
    assert kind.key_variable in error.message  # what to do about it


async def test_a_server_that_is_not_there_is_a_network_error(unreachable: Provider) -> None:
    with pytest.raises(NetworkError, match="Could not connect"):
        await collect(unreachable)


async def test_cancelling_a_hung_stream_returns_promptly_and_disconnects(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    fake.script(kind.reply.hang())
    received: list[Chunk] = []
    started = time.monotonic()

    with anyio.fail_after(10):
        with anyio.CancelScope() as scope:
            async with provider.stream(REQUEST) as stream:
                async for chunk in stream:
                    received.append(chunk)
                    scope.cancel()  # the fake now sends nothing more, ever
        assert scope.cancelled_caught
        await fake.wait_for_disconnects_async(1)

    assert time.monotonic() - started < 5
    assert received == [TextDelta(text="Thin")]


async def test_cancelling_before_the_first_byte_disconnects(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    fake.script(kind.reply.text("Too late").slow_first_byte(60))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                await collect(provider)

            tg.start_soon(consume)
            await fake.wait_for_requests_async(1)
            tg.cancel_scope.cancel()
        await fake.wait_for_disconnects_async(1)


async def test_leaving_the_block_early_frees_the_provider_for_the_next_call(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    fake.script(kind.reply.text("A long reply " * 50, chunk_size=2), kind.reply.text("Next."))

    async with provider.stream(REQUEST) as stream:
        async for _chunk in stream:
            break

    assert text_of(await collect(provider)) == "Next."


async def test_a_burst_of_concurrent_streams_leaves_few_connections_open(
    kind: Kind, fake: Any, provider: Provider
) -> None:
    # Every idle connection kept costs each later request a probe in the HTTP
    # pool, so a burst of concurrent turns must not leave all of its own behind.
    kept = CONNECTION_LIMITS.max_keepalive_connections
    assert kept is not None
    burst = kept + 4
    with anyio.fail_after(20):
        async with AsyncExitStack() as stack:
            streams = [
                await stack.enter_async_context(provider.stream(REQUEST)) for _ in range(burst)
            ]
            # Each reply's headers are in, and its connection is busy until it closes.
            assert fake.open_connections == burst
            for stream in streams:
                assert text_of([chunk async for chunk in stream]) != ""
        await fake.wait_for_open_connections_async(kept)
        assert fake.open_connections == kept

    # The connections kept are used again: the next requests open none.
    for _ in range(3):
        await collect(provider)
    assert fake.open_connections == kept
