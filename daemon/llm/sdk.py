"""What the providers built on an official SDK (Anthropic's, OpenAI's) share.

Imported with those providers, on first use: not with the daemon's start-up.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, Protocol, TypeVar

import anyio
import httpx2

from .errors import AuthenticationFailed
from .types import Chunk, ModelInfo

__all__ = [
    "CLOSE_TIMEOUT",
    "CONNECTION_LIMITS",
    "DEFAULT_TIMEOUT",
    "NO_KEY",
    "SdkProvider",
    "client_options",
    "closing_stream",
    "json_field",
]


#: A guard against dead connections, not a deadline: callers set deadlines. The
#: read timeout is the longest silence between two events, long enough for a local
#: server that loads the model before its first token (Anthropic's API pings).
DEFAULT_TIMEOUT = httpx2.Timeout(connect=10.0, read=300.0, write=60.0, pool=30.0)

#: The HTTP connections of a profile's client. The pool (httpcore's) probes every
#: idle connection it keeps, on each request and again as each response closes:
#: a poll and an attribute lookup through anyio per connection, tens of µs. With
#: the SDKs' default of 100 kept, a burst of concurrent turns left enough idle
#: connections behind to add more than a millisecond to every later request. The
#: few tasks a person runs at once keep theirs; a burst beyond this many opens
#: what it needs and closes the surplus after use.
CONNECTION_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=8)

#: Sent when the profile has no key, to a server that needs none: the SDKs refuse
#: to start without one, or go looking for one (environment, profile files).
NO_KEY = "hdsp-no-key"

#: How long closing the HTTP response may take after the caller left (even when it
#: was cancelled) before the connection is abandoned.
CLOSE_TIMEOUT = 5.0


def client_options(
    api_key: str | None, base_url: str | None, http_client: Callable[..., httpx2.AsyncClient]
) -> dict[str, Any]:
    """What both SDKs' clients are made with: the key (NO_KEY for none), no retries
    of their own (hdsp retries where every client sees it), DEFAULT_TIMEOUT, and an
    HTTP client made by `http_client` (the SDK's DefaultAsyncHttpxClient, which
    keeps the SDK's other defaults) with CONNECTION_LIMITS."""
    return {
        "api_key": api_key if api_key is not None else NO_KEY,
        "base_url": base_url,
        "max_retries": 0,
        "timeout": DEFAULT_TIMEOUT,
        "http_client": http_client(limits=CONNECTION_LIMITS, timeout=DEFAULT_TIMEOUT),
    }


class _SdkClient(Protocol):
    @property
    def base_url(self) -> httpx2.URL: ...

    async def close(self) -> None: ...


class _Response(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_SdkClient)


class SdkProvider(Generic[ClientT]):
    """What the providers built on an official SDK share: the model and its
    info, the client and where it sends requests, and the refusal to call the
    vendor's own API without a key (a proxy or local server may need none)."""

    def __init__(
        self,
        *,
        model: str,
        info: ModelInfo,
        name: str,
        key_hint: str,
        has_key: bool,
        client: ClientT,
        official_host: str,
    ) -> None:
        self._model = model
        self._info = info
        #: The profile's name, for messages.
        self.name = name
        self._key_hint = key_hint
        self._has_key = has_key
        self._client = client
        #: Where requests go, for messages.
        self.base_url = str(client.base_url).rstrip("/")
        self._official = client.base_url.host == official_host

    @property
    def model(self) -> str:
        return self._model

    def info(self) -> ModelInfo:
        return self._info

    async def aclose(self) -> None:
        await self._client.close()

    def _require_key(self) -> None:
        if self._official and not self._has_key:
            raise AuthenticationFailed(
                f"Profile {self.name!r} has no API key, and {self.base_url} needs one: "
                f"{self._key_hint}."
            )


@asynccontextmanager
async def closing_stream(
    response: _Response, chunks: AsyncGenerator[Chunk]
) -> AsyncGenerator[AsyncIterator[Chunk]]:
    """Hand out `chunks`; on the way out (by exception or cancellation too) close
    them and then the HTTP `response`, the latter within CLOSE_TIMEOUT."""
    try:
        yield chunks
    finally:
        try:
            await chunks.aclose()
        finally:
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
                await response.close()


def json_field(obj: object, name: str) -> Any:
    """`obj`'s field `name` if `obj` is a JSON object, else None. The providers
    read the streams' events as their JSON, and servers and proxies vary: a field
    that is missing, null or of the wrong type counts as absent."""
    return obj.get(name) if isinstance(obj, dict) else None
