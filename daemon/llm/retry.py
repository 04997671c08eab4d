"""hdsp's one retry policy for model requests: how long to wait, or not to retry.

Pure arithmetic, no I/O and no clock, so that it is tested exhaustively and the
engine keeps what only it can do: sleep cancellably, tell the user (the
``api_req_retry_delayed`` and ``api_req_retried`` messages), count attempts.
The engine's loop, in outline::

    attempt = 0
    while True:
        attempt += 1
        try:
            return await call_model()
        except ProviderError as error:
            wait = policy.delay(error, attempt, rng)
            if wait is None:
                raise
            await say_retry_delayed(error, wait)
            await anyio.sleep(wait)   # in the task's cancel scope

The delay is exponential backoff, ``base_delay * 2 ** (attempt - 1)`` capped at
``max_delay``, with jitter so that many clients cut off at once do not come back
at once (AWS's "Exponential Backoff And Jitter"): *full* jitter draws uniformly
from ``[0, backoff]``, *equal* jitter from ``[backoff / 2, backoff]``. A server's
``retry-after`` is a floor: the delay is never shorter than it. Waiting is capped
at ``max_delay`` (ten minutes, as Roo-Code does); a server that asks for more
gets no automatic retry, the error goes to the user instead, who can retry by
hand when it suits them.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal, Protocol

from hdsp.daemon.config.settings import RetrySettings

from .errors import ProviderError

__all__ = ["DEFAULT_RETRY_POLICY", "Jitter", "RetryPolicy", "Uniform"]

Jitter = Literal["full", "equal"]

# 2.0 ** 1024 overflows; any larger exponent gives the same capped delay.
_MAX_EXPONENT = 1023


class Uniform(Protocol):
    """The one method of :class:`random.Random` the policy draws with."""

    def uniform(self, a: float, b: float, /) -> float: ...


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Backoff with jitter, floored by ``retry-after`` and capped (see module docstring).

    `max_attempts` counts every attempt, the first included; None retries for as
    long as the errors are retryable. The default is 5: the first attempt and
    four retries, Codex's ``request_max_retries`` (4; its ``stream_max_retries``
    for a broken stream is 5), and like Roo-Code a handful of automatic retries
    before a person is asked. With the default delays the retries take about 15
    s at most (1 + 2 + 4 + 8, jittered down), time enough for a blip, a restart
    or a rate limit to pass, and an unreachable server is reported within
    seconds instead of retried for ever: the task then asks ``api_req_failed``
    with the last error: yes starts another round of attempts, no ends the turn.
    """

    base_delay: float = 1.0
    max_delay: float = 600.0
    max_attempts: int | None = 5
    jitter: Jitter = "full"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base_delay) and self.base_delay > 0):
            raise ValueError(
                f"base_delay must be a positive number of seconds, not {self.base_delay!r}"
            )
        if not (math.isfinite(self.max_delay) and self.max_delay >= self.base_delay):
            raise ValueError(
                f"max_delay ({self.max_delay!r}) must be a number of seconds no smaller "
                f"than base_delay ({self.base_delay!r})"
            )
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(
                f"max_attempts must be at least 1 (or None for no limit), not {self.max_attempts!r}"
            )
        if self.jitter not in ("full", "equal"):
            raise ValueError(f"jitter must be 'full' or 'equal', not {self.jitter!r}")

    @classmethod
    def from_settings(cls, settings: RetrySettings) -> RetryPolicy:
        """The policy the user's ``retry`` settings describe."""
        return cls(
            base_delay=settings.base_delay,
            max_delay=settings.max_delay,
            max_attempts=settings.max_attempts,
        )

    def backoff(self, attempt: int) -> float:
        """The ceiling of the jittered delay after failed attempt number `attempt` (1-based)."""
        if attempt < 1:
            raise ValueError(f"attempt numbers start at 1, not {attempt!r}")
        exponent = min(attempt - 1, _MAX_EXPONENT)
        # float arithmetic: overflow gives inf, which the cap turns into max_delay
        return min(self.max_delay, self.base_delay * 2.0**exponent)

    def delay(self, error: ProviderError, attempt: int, rng: Uniform | None = None) -> float | None:
        """Seconds to wait before the next attempt, or None not to retry.

        `attempt` is the number of the attempt that just failed with `error`
        (1 for the first request). None when the error is not retryable, when
        `max_attempts` attempts have been made, or when the server asks for a
        longer wait than `max_delay`. `rng` defaults to the `random` module's.
        """
        if not error.retryable:
            return None
        if self.max_attempts is not None and attempt >= self.max_attempts:
            return None
        floor = error.retry_after if error.retry_after is not None else 0.0
        if not math.isfinite(floor) or floor > self.max_delay:
            return None
        ceiling = self.backoff(attempt)
        low = 0.0 if self.jitter == "full" else ceiling / 2
        draw = rng.uniform(low, ceiling) if rng is not None else random.uniform(low, ceiling)
        jittered = min(max(draw, low), ceiling)  # a stand-in rng may stray; stay within
        return max(floor, jittered)


#: The policy the engine uses unless the user's settings say otherwise.
DEFAULT_RETRY_POLICY = RetryPolicy()
