"""Errors a provider raises, whatever SDK or wire protocol sits behind it.

Every provider translates its SDK's exceptions at the boundary (``raise ... from
exc``), so the task engine handles one tree and never imports an SDK::

    ProviderError                 .retryable, .retry_after, .status_code
    ├── RateLimited               429: wait `retry_after` (when given), then retry
    ├── Overloaded                529, or 503 "overloaded": back off, then retry
    ├── ServerError               other 5xx, an error event mid-stream: retry
    ├── NetworkError              cannot connect, timeout, stream cut or garbled: retry
    ├── ContextWindowExceeded     the prompt does not fit: condense history, then retry
    ├── AuthenticationFailed      401/403: the key is wrong; retrying cannot help
    └── InvalidRequest            other 4xx (bad model name, bad parameter): do not retry

`retryable` says whether sending the *same* request again may succeed; the engine
owns the retry policy (backoff, attempts, telling the user). A subclass fixes the
default, a single error may override it (an error event that says "rate limit"
is still retryable, for instance).

Messages are written for the person reading them in a frontend: they say what
happened, where, and what to do about it. What the server itself said goes in too,
as :func:`server_text` makes it fit to show: a proxy's plain-text or HTML error
page is often the only reason given. A server may quote the key back (a 401 that
echoes ``Authorization``), or the base URL may hold credentials: so every message
is scrubbed (known keys, credential shapes, URL user info and key parameters) when
the error is made, before it can become a UI message, an API history entry the
model reads, a reply or a log line.
"""

from __future__ import annotations

import email.utils
import html.parser
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from hdsp.daemon.scrubber import scrubber

__all__ = [
    "AuthenticationFailed",
    "ContextWindowExceeded",
    "InvalidRequest",
    "NetworkError",
    "Overloaded",
    "ProviderError",
    "RateLimited",
    "ServerError",
    "connection_broken",
    "context_window_exceeded",
    "failed_midway",
    "retry_after_from_headers",
    "server_said",
    "server_text",
    "status_error",
]


class ProviderError(Exception):
    """A model request failed; the subclass says why and `retryable` what to do."""

    #: Whether the same request, sent again later, may succeed.
    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        retry_after: float | None = None,
        status_code: int | None = None,
    ) -> None:
        message = scrubber.scrub(message)
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable
        #: Seconds the server asked us to wait before retrying, if it said.
        self.retry_after = retry_after
        #: The HTTP status, when the error came from one.
        self.status_code = status_code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, retry_after={self.retry_after!r})"


class RateLimited(ProviderError):
    """Too many requests or tokens for the account (HTTP 429)."""

    retryable = True


class Overloaded(ProviderError):
    """The service as a whole is overloaded (HTTP 529, or 503 saying so)."""

    retryable = True


class ServerError(ProviderError):
    """The server failed (other 5xx) or reported an error in the middle of a reply."""

    retryable = True


class NetworkError(ProviderError):
    """No usable HTTP exchange: connection refused or lost, timeout, broken SSE."""

    retryable = True


class ContextWindowExceeded(ProviderError):
    """The request is larger than the model's context window.

    Not retryable as is; the engine condenses or truncates the history first.
    """


class AuthenticationFailed(ProviderError):
    """The API key is missing, wrong or lacks permission (HTTP 401/403)."""


class InvalidRequest(ProviderError):
    """The server refused the request itself (other 4xx): model name, parameters."""


def retry_after_from_headers(
    headers: Mapping[str, str], *, now: float | None = None
) -> float | None:
    """Seconds to wait according to the response headers, or None if they do not say.

    Reads ``retry-after-ms`` (OpenAI), then ``retry-after`` as seconds (fractions
    allowed) or as an HTTP date. Lookups are case-insensitive when `headers` is,
    as httpx's are; plain dicts should use lower-case keys.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def connection_broken(where: str, detail: str) -> NetworkError:
    """The connection to `where` broke while a reply was streaming."""
    return NetworkError(
        f"The connection to {where} broke in the middle of the reply ({detail}). "
        "The partial reply was discarded; retrying usually helps."
    )


def failed_midway(where: str, detail: str) -> ServerError:
    """The server at `where` reported an error (`detail`) while a reply was streaming."""
    return ServerError(
        f"{where} reported an error in the middle of the reply ({detail}). The "
        "partial reply was discarded; retrying usually helps."
    )


def context_window_exceeded(
    model: str, where: str, detail: str, **kwargs: Any
) -> ContextWindowExceeded:
    """The prompt does not fit `model` at `where`; `kwargs` go to the error."""
    return ContextWindowExceeded(
        f"The conversation is too long for model {model!r} at {where} "
        f"({detail}). Condense the history, or choose a model with a larger "
        "context window.",
        **kwargs,
    )


def status_error(
    status: int,
    detail: str,
    headers: Mapping[str, str],
    *,
    where: str,
    profile: str,
    model: str,
    has_key: bool,
    key_hint: str,
    rate_limited: bool,
    overloaded: bool,
    out_of_credit: str | None,
    too_long: bool,
    not_found_hint: str,
    server_error_hint: str,
) -> ProviderError:
    """The error for an HTTP error response of a model API, checked in this order.

    The provider reads its SDK's exception and decides what only it can tell:
    whether the response means `rate_limited`, `overloaded` or `too_long` (a
    prompt over the context window), and `out_of_credit`, the whole message of a
    non-retryable :class:`RateLimited` when the account cannot pay (None if not).
    `not_found_hint` ends the 404 message, `server_error_hint` says where to look
    after a 5xx. `where` is the base URL, `profile` the profile's name, `detail`
    the server's own message; `headers` give the retry delay.
    """
    retry_after = retry_after_from_headers(headers)
    kwargs: dict[str, Any] = {"retry_after": retry_after, "status_code": status}
    if rate_limited:
        wait = f" in {retry_after:g} s" if retry_after is not None else ""
        return RateLimited(
            f"{where} is rate-limiting requests ({detail}). Retry{wait}; if this "
            "keeps happening, lower the request rate or raise the account's limits.",
            **kwargs,
        )
    if overloaded:
        return Overloaded(f"{where} is overloaded ({detail}). Retry in a little while.", **kwargs)
    if out_of_credit is not None:
        return RateLimited(out_of_credit, retryable=False, **kwargs)
    if too_long:
        return context_window_exceeded(model, where, detail, **kwargs)
    if status in (401, 403):
        if not has_key:
            message = (
                f"{where} requires an API key, and profile {profile!r} has none "
                f"({detail}): {key_hint}."
            )
        elif status == 401:
            message = f"The API key was rejected by {where} (HTTP 401: {detail}); {key_hint}."
        else:
            message = (
                f"The API key of profile {profile!r} is not allowed to use model "
                f"{model!r} at {where} (HTTP 403: {detail}). Check the key's permissions "
                f"or the model name; {key_hint}."
            )
        return AuthenticationFailed(message, **kwargs)
    if status == 404:
        return InvalidRequest(
            f"{where} answered 404 ({detail}). Check the model name {model!r} "
            f"and the base URL of profile {profile!r}{not_found_hint}.",
            **kwargs,
        )
    if status == 408:
        return NetworkError(f"{where} timed out the request ({detail}). Retry.", **kwargs)
    if status >= 500 or status == 409:
        return ServerError(
            f"{where} failed with HTTP {status} ({detail}). Retrying usually helps; "
            f"if not, {server_error_hint}.",
            **kwargs,
        )
    return InvalidRequest(
        f"{where} refused the request with HTTP {status} ({detail}). Check the "
        f"model name and settings of profile {profile!r}.",
        **kwargs,
    )


# ---- what the server said ------------------------------------------------------

#: At most this many characters of a server's own words go into a message.
SERVER_TEXT_LIMIT = 300

# C0 and C1 control characters (tabs and newlines too: the text becomes one line),
# and the bidirectional overrides that could make it read otherwise than it is.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]+")
_SPACES = re.compile(r"\s+")
_MARKUP = re.compile(r"^\s*<(?:!doctype|html|head|body|\?xml|[a-z][a-z0-9]*[\s>/])", re.IGNORECASE)


class _PageText(html.parser.HTMLParser):
    """The readable text of an HTML page: its title, then its body's text."""

    _SKIPPED = frozenset({"script", "style", "template", "noscript"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.text: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        if any(tag in self._SKIPPED for tag in self._open):
            return
        (self.title if "title" in self._open else self.text).append(data)


def server_said(message: object, body: object, fallback: str) -> str:
    """What the server said in an error response: `message` (the error's in the
    API's JSON) if it is text, else its `body` as it came (a proxy's text or HTML
    page, another JSON shape), made fit to show (:func:`server_text`); `fallback`
    (the SDK's "Error code: N") only when the body said nothing."""
    said = server_text(message if isinstance(message, str) and message else body)
    return said or fallback


def server_text(body: object, limit: int = SERVER_TEXT_LIMIT) -> str:
    """What a server said, fit to put in a message: its own words, never trusted.

    `body` is an error body as the SDK kept it: text (a proxy's plain-text error,
    an HTML page, which gives its title and text without the markup), or JSON that
    is not the API's error shape (shown compactly). Control characters go (the
    text is untrusted and ends up in terminals), runs of whitespace become one
    space, and beyond `limit` characters the text is cut with an ellipsis. Empty
    when there is nothing to say.
    """
    if body is None:
        return ""
    if isinstance(body, str):
        text = body
    else:
        try:
            text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
        except ValueError:
            text = str(body)
    if _MARKUP.match(text):
        page = _PageText()
        try:
            page.feed(text)
            page.close()
        except (AssertionError, ValueError):  # a page html.parser cannot take
            pass
        else:
            title = " ".join("".join(page.title).split())
            words = " ".join("".join(page.text).split())
            if title and words.startswith(title):
                words = words[len(title) :].lstrip(" :-")
            text = f"{title}: {words}" if title and words else title or words
    text = _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip()
    if len(text) > limit:
        text = text[: max(0, limit - 1)].rstrip() + "\u2026"
    return text
