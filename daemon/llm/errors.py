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
happened, where, and what to do about it.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

__all__ = [
    "AuthenticationFailed",
    "ContextWindowExceeded",
    "InvalidRequest",
    "NetworkError",
    "Overloaded",
    "ProviderError",
    "RateLimited",
    "ServerError",
    "retry_after_from_headers",
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
