"""A task's context budget (hdsp.daemon.tasks.budget): where the profile's
threshold and buffer put the point at which a request is condensed, and the
point past which it must be reduced."""

from __future__ import annotations

from hdsp.daemon.config.settings import ProfileOptions
from hdsp.daemon.conversation import ModelInfo
from hdsp.daemon.tasks.budget import ContextBudget

WINDOW = ModelInfo(context_window=100_000, max_output=8_000)


def test_the_default_condenses_at_80_percent_and_keeps_a_10_percent_buffer() -> None:
    threshold, allowed = ContextBudget.limits(WINDOW, ProfileOptions())
    assert allowed == 100_000 - 10_000 - 8_000
    assert threshold == 80_000


def test_a_profiles_threshold_and_buffer_move_both_points() -> None:
    threshold, allowed = ContextBudget.limits(
        WINDOW, ProfileOptions(condense_threshold=50, context_buffer=20)
    )
    assert (threshold, allowed) == (50_000, 100_000 - 20_000 - 8_000)


def test_the_threshold_never_lets_a_request_past_what_fits() -> None:
    # 95% of the window would leave no room for the reply: the threshold is capped.
    threshold, allowed = ContextBudget.limits(WINDOW, ProfileOptions(condense_threshold=95))
    assert threshold == allowed == 82_000


def test_a_reply_never_takes_more_than_half_a_small_window() -> None:
    small = ModelInfo(context_window=8_000, max_output=16_000)
    threshold, allowed = ContextBudget.limits(small, ProfileOptions(context_buffer=0))
    assert allowed == 4_000 and threshold == 4_000
