"""What the providers built on an official SDK (Anthropic's, OpenAI's) share.

Imported with those providers, on first use: not with the daemon's start-up.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

import anyio
import httpx2

from hdsp.daemon.conversation import ApiMessage, Chunk, ModelInfo, StreamTimeouts

from .errors import AuthenticationFailed, NetworkError, ProviderError, connection_broken
from .images import DEFAULT_LIMITS, ImageLimits, has_images, images_for_model

__all__ = [
    "CLOSE_TIMEOUT",
    "CONNECTION_LIMITS",
    "DEFAULT_TIMEOUT",
    "NO_KEY",
    "ReplyAssembler",
    "SdkProvider",
    "SilenceWatch",
    "client_options",
    "closing_stream",
    "http_timeout",
    "json_field",
    "parse_arguments",
    "transport_failure",
]


#: A guard against dead connections, not a deadline. Silence is bounded by the
#: profile's :class:`StreamTimeouts` (:class:`SilenceWatch`), which say which
#: silence it was; the read timeout here is only a backstop behind them
#: (:func:`http_timeout`).
DEFAULT_TIMEOUT = httpx2.Timeout(connect=10.0, read=300.0, write=60.0, pool=30.0)

#: How much later than the profile's own bounds the HTTP read timeout fires: it
#: must never be the one to, its message says less.
_BACKSTOP = 30.0


def http_timeout(timeouts: StreamTimeouts) -> httpx2.Timeout:
    """DEFAULT_TIMEOUT with a read timeout behind both of `timeouts`."""
    return httpx2.Timeout(
        connect=DEFAULT_TIMEOUT.connect,
        read=max(timeouts.first_byte, timeouts.idle) + _BACKSTOP,
        write=DEFAULT_TIMEOUT.write,
        pool=DEFAULT_TIMEOUT.pool,
    )


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
    api_key: str | None,
    base_url: str | None,
    http_client: Callable[..., httpx2.AsyncClient],
    timeouts: StreamTimeouts,
) -> dict[str, Any]:
    """What both SDKs' clients are made with: the key (NO_KEY for none), no retries
    of their own (hdsp retries where every client sees it), the HTTP timeouts for
    `timeouts` (:func:`http_timeout`), and an HTTP client made by `http_client`
    (the SDK's DefaultAsyncHttpxClient, which keeps the SDK's other defaults) with
    CONNECTION_LIMITS."""
    timeout = http_timeout(timeouts)
    return {
        "api_key": api_key if api_key is not None else NO_KEY,
        "base_url": base_url,
        "max_retries": 0,
        "timeout": timeout,
        "http_client": http_client(limits=CONNECTION_LIMITS, timeout=timeout),
    }


class _SdkClient(Protocol):
    @property
    def base_url(self) -> httpx2.URL: ...

    async def close(self) -> None: ...


class _Response(Protocol):
    async def close(self) -> None: ...


class _EventStream(_Response, Protocol):
    """A streamed response as the SDKs hand it out: each event's JSON, in turn."""

    async def __anext__(self) -> object: ...


class ReplyAssembler(Protocol):
    """Turns the events of one streamed reply (their JSON) into hdsp chunks."""

    def feed(self, event: object) -> list[Chunk]:
        """The chunks of one event."""
        ...

    def finish(self) -> list[Chunk]:
        """What is left to say once the stream has ended (the usage, the stop)."""
        ...

    @property
    def ended(self) -> bool:
        """The model finished its reply: the stream may end here."""
        ...

    @property
    def complete(self) -> bool:
        """Nothing the stream may still send changes the reply: a failure from
        here on is ignored."""
        ...


ClientT = TypeVar("ClientT", bound=_SdkClient)
ErrorT = TypeVar("ErrorT", bound=Exception)


class SdkProvider(Generic[ClientT, ErrorT]):
    """What the providers built on an official SDK share: the model and its
    info, the client and where it sends requests, the refusal to call the
    vendor's own API without a key (a proxy or local server may need none), and
    the reading of a streamed reply, whose SDK errors (`sdk_error`, the root of
    the SDK's tree) the provider's `_translate` turns into :mod:`.errors`."""

    def __init__(
        self,
        *,
        model: str,
        info: ModelInfo,
        name: str,
        key_hint: str,
        has_key: bool,
        client: ClientT,
        sdk_error: type[ErrorT],
        official_host: str,
        timeouts: StreamTimeouts,
    ) -> None:
        self._model = model
        self._sdk_error = sdk_error
        self._timeouts = timeouts
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

    #: The largest images the provider's API makes use of (:mod:`.images`).
    image_limits: ClassVar[ImageLimits] = DEFAULT_LIMITS

    async def _model_messages(self, messages: list[ApiMessage]) -> list[ApiMessage]:
        """`messages` with their images as this model takes them: fitted to the
        provider's `image_limits`, or as text notes when the model takes no
        images (`ModelInfo.supports_images`). Images are decoded in a worker thread."""
        if not has_images(messages):
            return messages
        limits = self.image_limits if self._info.supports_images else None
        return await anyio.to_thread.run_sync(images_for_model, messages, limits)

    async def aclose(self) -> None:
        await self._client.close()

    @asynccontextmanager
    async def _watching(self) -> AsyncGenerator[SilenceWatch]:
        """A :class:`SilenceWatch` of this provider's timeouts over the ``async
        with`` body, whose silence becomes the NetworkError that says which."""
        async with SilenceWatch.over(self._timeouts, self._silence_error) as watch:
            yield watch

    def _silence_error(self, phase: SilencePhase, seconds: float) -> NetworkError:
        where, name = self.base_url, self.name
        if phase == "first_byte":
            return NetworkError(
                f"The model server at {where} accepted the request but sent nothing "
                f"for {seconds:g} s. Retrying may help; a server that takes longer to "
                f"start answering (one that loads its model first) needs a larger "
                f"`first_byte_timeout` in the options of profile {name!r}."
            )
        return NetworkError(
            f"The model server at {where} stopped in the middle of the reply: nothing "
            f"for {seconds:g} s. The partial reply was discarded; retrying usually helps. "
            f"If the server pauses this long on purpose, raise `idle_timeout` in the "
            f"options of profile {name!r}."
        )

    def _require_key(self) -> None:
        if self._official and not self._has_key:
            raise AuthenticationFailed(
                f"Profile {self.name!r} has no API key, and {self.base_url} needs one: "
                f"{self._key_hint}."
            )

    @asynccontextmanager
    async def _streamed(
        self, post: Callable[[], Awaitable[_EventStream]], assembler: ReplyAssembler
    ) -> AsyncGenerator[AsyncIterator[Chunk]]:
        """Send a request by `post`, its reply as `assembler` makes it of the events,
        under the silence bounds (:meth:`_watching`). Errors before the first event
        raise from ``async with``, errors midway from the iteration, all as
        :class:`ProviderError`. Leaving the block, by exception or cancellation
        too, closes the HTTP response."""
        async with self._watching() as watch:
            watch.waiting("first_byte")
            try:
                response = await post()
            except self._sdk_error as exc:
                raise self._translate(exc) from exc
            finally:
                watch.answered()
            chunks = self._chunks(response, watch, assembler)
            async with closing_stream(response, chunks) as stream:
                yield stream

    async def _chunks(
        self, response: _EventStream, watch: SilenceWatch, assembler: ReplyAssembler
    ) -> AsyncGenerator[Chunk]:
        while True:
            watch.waiting()
            try:
                event = await response.__anext__()
            except StopAsyncIteration:
                break
            except (self._sdk_error, httpx2.HTTPError, ValueError) as exc:
                if assembler.complete:
                    break  # the reply is whole, whatever follows
                raise self._midstream(exc) from exc
            finally:
                watch.answered()
            for item in assembler.feed(event):
                yield item
        if not assembler.ended:
            raise self._broken("the stream ended before the model finished its reply")
        for item in assembler.finish():
            yield item

    def _translate(self, exc: ErrorT, *, midstream: bool = False) -> ProviderError:
        """`exc`, an error of the SDK's, in :mod:`.errors`' terms; `midstream`: it
        came in the middle of a reply."""
        raise NotImplementedError

    def _midstream(self, exc: Exception) -> ProviderError:
        if isinstance(exc, self._sdk_error):
            return self._translate(exc, midstream=True)
        if isinstance(exc, httpx2.HTTPError):
            return self._broken(transport_failure(exc))
        return NetworkError(  # an event whose data is not JSON
            f"{self.base_url} sent a malformed event stream ({exc}). The reply was "
            "abandoned; a proxy in between may be mangling the stream."
        )

    def _broken(self, detail: str) -> NetworkError:
        return connection_broken(self.base_url, detail)


SilencePhase = Literal["first_byte", "idle"]


class SilenceWatch:
    """Bounds the silences of one streamed request (see :class:`StreamTimeouts`).

    The request's code marks each wait for the server, :meth:`waiting` before it
    (the first one for the response itself, the others for the stream's events)
    and :meth:`answered` after; a watchdog task cancels the watched body when
    one wait lasts longer than its bound, and the body then fails with the error
    `expired` makes. The waits cost two stores each: the watchdog sleeps until the
    earliest moment a wait could expire, and no timer is armed per event (an anyio
    cancel scope per event cost 14 µs, these stores under 1 µs; the clock is
    ``time.monotonic``, read directly: anyio's costs a backend lookup).

    Only time spent waiting for the server counts, not the consumer's own time
    between events; and since the watchdog cancels only while the body waits in
    a read, the cancellation lands in that read, never in the consumer's code.
    """

    def __init__(
        self, timeouts: StreamTimeouts, expired: Callable[[SilencePhase, float], Exception]
    ) -> None:
        self._timeouts = timeouts
        self._expired = expired
        #: When the current wait began (None: not waiting), and which it is.
        self._since: float | None = None
        self._phase: SilencePhase = "first_byte"
        self._bound = timeouts.first_byte
        #: The bound that ran out, once one did.
        self.expired: tuple[SilencePhase, float] | None = None

    @classmethod
    @asynccontextmanager
    async def over(
        cls, timeouts: StreamTimeouts, expired: Callable[[SilencePhase, float], Exception]
    ) -> AsyncGenerator[SilenceWatch]:
        """Watch the ``async with`` body; raise `expired`'s error if a wait ran out."""
        watch = cls(timeouts, expired)
        failure: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch._watchdog, tg.cancel_scope, name="silence watchdog")
            try:
                yield watch
            except BaseException as exc:  # re-raised below, unless the silence caused it
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if watch.expired is not None:
            raise watch._expired(*watch.expired) from failure
        if failure is not None:
            raise failure

    def waiting(self, phase: SilencePhase = "idle") -> None:
        """A wait for the server begins: for the response (`first_byte`) or an event."""
        self._phase = phase
        self._bound = self._timeouts.first_byte if phase == "first_byte" else self._timeouts.idle
        self._since = time.monotonic()

    def answered(self) -> None:
        """The server answered the current wait."""
        self._since = None

    async def _watchdog(self, scope: anyio.CancelScope) -> None:
        shortest = min(self._timeouts.first_byte, self._timeouts.idle)
        while True:
            now, since = time.monotonic(), self._since
            if since is not None and now >= since + self._bound:
                self.expired = (self._phase, self._bound)
                scope.cancel()
                return
            # Until this wait would expire, but no later than the earliest a wait
            # that begins after now could (this one may end, another begin).
            wake = now + shortest
            if since is not None:
                wake = min(wake, since + self._bound)
            await anyio.sleep(wake - now)


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


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """A tool call's arguments, streamed as JSON text: the object, {} for no text
    at all, None when the text is not a JSON object."""
    if not raw.strip():
        return {}  # a tool without parameters, called with nothing
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def transport_failure(exc: BaseException) -> str:
    """Why an HTTP exchange failed, in words: the HTTP library's error and the
    operating system's reason beneath it ("ReadError: connection reset by peer",
    "ConnectError: All connection attempts failed (connection refused)"). The SDKs
    wrap these; their own message ("Connection error.") says nothing."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
        if isinstance(link, BaseExceptionGroup) and link.exceptions:
            link = link.exceptions[0]  # anyio's connect: one error per address tried
    http = next((e for e in chain if isinstance(e, httpx2.HTTPError)), chain[0])
    name, message = type(http).__name__, str(http).strip()
    reason = ""
    for error in chain[chain.index(http) :]:
        if isinstance(error, OSError) and (error.errno is not None or error is chain[-1]):
            # errno's own words ("Connection refused"), not asyncio's "Connect
            # call failed"; resolver errors (negative) have only their strerror.
            errno = error.errno
            named = os.strerror(errno) if isinstance(errno, int) and errno > 0 else None
            reason = (named or error.strerror or str(error)).strip()
            reason = reason[:1].lower() + reason[1:]
            break
    if not message:
        return f"{name}: {reason}" if reason else name
    if reason and reason.lower() not in message.lower():
        return f"{name}: {message} ({reason})"
    return f"{name}: {message}"
