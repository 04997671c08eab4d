"""Fixtures of the tests that run against every provider and its fake
(:mod:`.provider_kinds`). A module of one provider's tests sets `kind` to that
provider's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from hdsp.daemon.conversation import DEFAULT_STREAM_TIMEOUTS, StreamTimeouts
from hdsp.daemon.llm import Provider

from .provider_kinds import KINDS, Kind


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> Kind:
    return KINDS[request.param]


@pytest.fixture
def timeouts() -> StreamTimeouts:
    """The bounds of `provider`'s silences; a module may set its own."""
    return DEFAULT_STREAM_TIMEOUTS


@pytest.fixture
def fake(kind: Kind) -> Iterator[Any]:
    server: AbstractContextManager[Any] = kind.fake()
    with server as running:
        yield running


@pytest.fixture
async def provider(kind: Kind, fake: Any, timeouts: StreamTimeouts) -> AsyncIterator[Provider]:
    provider = kind.provider(fake.base_url, timeouts)
    try:
        yield provider
    finally:
        await provider.aclose()


@pytest.fixture
async def unreachable(kind: Kind, timeouts: StreamTimeouts) -> AsyncIterator[Provider]:
    """A provider whose server has gone: it listened once, and nothing does now."""
    server: AbstractContextManager[Any] = kind.fake()
    with server as gone:
        base_url = gone.base_url
    provider = kind.provider(base_url, timeouts)
    try:
        yield provider
    finally:
        await provider.aclose()
