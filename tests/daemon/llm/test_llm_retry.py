"""The retry policy: pure arithmetic, so properties over every input hypothesis finds."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
from hdsp.daemon.llm.retry import DEFAULT_RETRY_POLICY, Jitter, RetryPolicy


class Quantile:
    """A stand-in rng that always draws the same quantile of the range it is given."""

    def __init__(self, q: float) -> None:
        self.q = q

    def uniform(self, a: float, b: float, /) -> float:
        return a + self.q * (b - a)


RETRYABLE = (RateLimited, Overloaded, ServerError, NetworkError)
NOT_RETRYABLE = (ContextWindowExceeded, AuthenticationFailed, InvalidRequest)

seconds = st.floats(min_value=0.001, max_value=100.0, allow_nan=False)
jitters: st.SearchStrategy[Jitter] = st.sampled_from(["full", "equal"])
attempts = st.integers(min_value=1, max_value=5_000)
quantiles = st.floats(min_value=0.0, max_value=1.0)


@st.composite
def policies(draw: st.DrawFn) -> RetryPolicy:
    base = draw(seconds)
    extra = draw(st.floats(min_value=0.0, max_value=1_000.0))
    limit = draw(st.none() | st.integers(min_value=1, max_value=20))
    jitter: Jitter = draw(jitters)
    return RetryPolicy(base_delay=base, max_delay=base + extra, max_attempts=limit, jitter=jitter)


@st.composite
def retryable_errors(draw: st.DrawFn) -> ProviderError:
    kind = draw(st.sampled_from(RETRYABLE))
    retry_after = draw(st.none() | st.floats(min_value=0.0, max_value=2_000.0))
    return kind("failed", retry_after=retry_after)


@given(policies(), retryable_errors(), attempts, st.integers())
def test_delays_stay_within_their_bounds(
    policy: RetryPolicy, error: ProviderError, attempt: int, seed: int
) -> None:
    delay = policy.delay(error, attempt, random.Random(seed))

    if policy.max_attempts is not None and attempt >= policy.max_attempts:
        assert delay is None
        return
    floor = error.retry_after or 0.0
    if floor > policy.max_delay:
        assert delay is None  # the user decides rather than a ten-minute-plus wait
        return
    assert delay is not None
    assert floor <= delay <= policy.max_delay  # never below retry-after, always capped
    ceiling = policy.backoff(attempt)
    assert ceiling <= policy.max_delay
    if error.retry_after is None:
        low = 0.0 if policy.jitter == "full" else ceiling / 2
        assert low <= delay <= ceiling


@given(policies(), st.sampled_from(RETRYABLE), attempts, quantiles)
def test_the_delay_never_shrinks_from_one_attempt_to_the_next(
    policy: RetryPolicy, kind: type[ProviderError], attempt: int, q: float
) -> None:
    # At every quantile of the jitter, so the expected delay grows too (stochastic
    # dominance), without sampling anything.
    unlimited = RetryPolicy(
        base_delay=policy.base_delay,
        max_delay=policy.max_delay,
        max_attempts=None,
        jitter=policy.jitter,
    )
    error = kind("failed")

    now = unlimited.delay(error, attempt, Quantile(q))
    later = unlimited.delay(error, attempt + 1, Quantile(q))

    assert now is not None and later is not None
    assert now <= later


@given(policies(), attempts)
def test_the_backoff_doubles_until_the_cap(policy: RetryPolicy, attempt: int) -> None:
    expected = min(policy.max_delay, policy.base_delay * 2.0 ** min(attempt - 1, 1023))

    assert policy.backoff(attempt) == expected


@given(policies(), st.sampled_from(NOT_RETRYABLE), attempts, st.none() | seconds)
def test_errors_that_retrying_cannot_fix_are_not_retried(
    policy: RetryPolicy, kind: type[ProviderError], attempt: int, retry_after: float | None
) -> None:
    assert policy.delay(kind("failed", retry_after=retry_after), attempt) is None


@given(policies(), attempts)
def test_a_single_error_can_opt_out_of_retries(policy: RetryPolicy, attempt: int) -> None:
    out_of_quota = RateLimited("The account has run out of credit.", retryable=False)

    assert policy.delay(out_of_quota, attempt) is None


def test_the_defaults() -> None:
    policy = DEFAULT_RETRY_POLICY
    error = ServerError("failed")

    assert (policy.base_delay, policy.max_delay, policy.max_attempts) == (1.0, 600.0, 5)
    assert [policy.backoff(n) for n in (1, 2, 3, 10, 11, 1_000_000)] == [
        1.0,
        2.0,
        4.0,
        512.0,
        600.0,
        600.0,
    ]
    # Full jitter: anywhere from nothing to the backoff.
    assert policy.delay(error, 3, Quantile(0.0)) == 0.0
    assert policy.delay(error, 3, Quantile(1.0)) == 4.0
    assert 0.0 <= policy.delay(error, 3) <= 4.0  # type: ignore[operator]


def test_equal_jitter_waits_at_least_half_the_backoff() -> None:
    policy = RetryPolicy(jitter="equal")

    assert policy.delay(ServerError("failed"), 3, Quantile(0.0)) == 2.0
    assert policy.delay(ServerError("failed"), 3, Quantile(1.0)) == 4.0


def test_retry_after_is_a_floor() -> None:
    policy = RetryPolicy()
    limited = RateLimited("slow down", retry_after=30.0)

    assert policy.delay(limited, 1, Quantile(0.5)) == 30.0
    assert policy.delay(RateLimited("slow down", retry_after=0.2), 4, Quantile(1.0)) == 8.0
    assert policy.delay(RateLimited("come back tomorrow", retry_after=86_400.0), 1) is None


def test_max_attempts_counts_the_first_attempt() -> None:
    policy = RetryPolicy(max_attempts=3)
    error = NetworkError("cut")

    assert policy.delay(error, 1, Quantile(0.5)) is not None
    assert policy.delay(error, 2, Quantile(0.5)) is not None
    assert policy.delay(error, 3, Quantile(0.5)) is None


def test_a_stray_rng_cannot_push_the_delay_out_of_bounds() -> None:
    policy = RetryPolicy()

    assert policy.delay(ServerError("failed"), 2, Quantile(7.0)) == 2.0
    assert policy.delay(ServerError("failed"), 2, Quantile(-3.0)) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_delay": 0.0}, "base_delay must be a positive"),
        ({"base_delay": float("nan")}, "base_delay must be a positive"),
        ({"base_delay": 10.0, "max_delay": 5.0}, "no smaller than base_delay"),
        ({"max_delay": float("inf")}, "no smaller than base_delay"),
        ({"max_attempts": 0}, "at least 1"),
        ({"jitter": "none"}, "'full' or 'equal'"),
    ],
)
def test_nonsense_settings_are_refused_with_a_reason(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_attempts_are_numbered_from_one() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        RetryPolicy().backoff(0)
