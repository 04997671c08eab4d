"""Deleting one of the user's messages as a pure plan (hdsp.daemon.tasks.deletion):
what goes, and that the API history stays one a provider accepts."""

from __future__ import annotations

import pytest

from hdsp.daemon.conversation import ApiMessage, TextBlock, ToolResultBlock, ToolUseBlock
from hdsp.daemon.tasks.context import condensing, request_messages
from hdsp.daemon.tasks.deletion import DeletePlan, plan_delete
from hdsp.daemon.tasks.rewind import RewindRefused
from hdsp.protocol import ClineMessage, Say
from tests.daemon.tasks.test_task_rewind import _say, _session


def _applied(api: list[ApiMessage], plan: DeletePlan) -> list[ApiMessage]:
    return api[: plan.api_from] + plan.api_tail


def _paired(api: list[ApiMessage]) -> bool:
    """Every tool call has its result and every result its call."""
    calls = {b.id for m in api for b in m.content if isinstance(b, ToolUseBlock)}
    results = {b.tool_use_id for m in api for b in m.content if isinstance(b, ToolResultBlock)}
    return calls == results


def _ts(ui: list[ClineMessage], text: str) -> int:
    return next(m.ts for m in ui if m.text == text)


def test_deleting_a_message_removes_it_and_nothing_else() -> None:
    ui, api = _session(4)
    step2 = _ts(ui, "step 2")
    plan = plan_delete(ui, api, step2)
    assert plan.ui_removed == [step2]
    after = _applied(api, plan)
    assert [m for m in api if m.content != [TextBlock(text="step 2")]] == after
    assert _paired(after)


def test_tool_results_sent_with_the_message_stay_with_their_call() -> None:
    # The user's words and a tool result in one API message.
    ui = [
        _say(1, Say.TEXT, "task"),
        _say(2, Say.TOOL, "read"),
        _say(4, Say.USER_FEEDBACK, "steer"),
        _say(7, Say.TEXT, "answer"),
    ]
    result = ToolResultBlock(tool_use_id="c0", content=[TextBlock(text="x")])
    api = [
        ApiMessage(role="user", content=[TextBlock(text="task")], ts=1),
        ApiMessage(
            role="assistant", content=[ToolUseBlock(id="c0", name="read_file", input={})], ts=3
        ),
        ApiMessage(role="user", content=[result, TextBlock(text="steer")], ts=5),
        ApiMessage(role="assistant", content=[TextBlock(text="answer")], ts=6),
    ]
    plan = plan_delete(ui, api, 4)
    assert plan.ui_removed == [4] and plan.api_from == 2
    after = _applied(api, plan)
    assert [m.content for m in after[2:]] == [[result], [TextBlock(text="answer")]]
    assert _paired(after)


def test_deleting_a_condensed_message_takes_its_summary_and_brings_back_the_rest() -> None:
    ui, api = _session(6)
    made = condensing(api, "sum-1", "summary", ts=1000)
    api = [made.hidden.get(i, m) for i, m in enumerate(api)] + [made.summary]
    ui.append(_say(999, Say.CONDENSE_CONTEXT, context_condense={"condenseId": "sum-1"}))
    condensed_step = next(
        b.text
        for m in api
        if m.condense_parent == "sum-1" and m.role == "user"
        for b in m.content
        if isinstance(b, TextBlock) and b.text.startswith("step")
    )
    plan = plan_delete(ui, api, _ts(ui, condensed_step))
    assert plan.ui_removed == [_ts(ui, condensed_step), 999]
    after = _applied(api, plan)
    assert not any(m.is_summary or m.condense_parent for m in after)
    assert request_messages(after) == after
    assert len(after) == len(api) - 2 and _paired(after)


def test_only_the_users_own_messages_can_be_deleted() -> None:
    ui, api = _session(2)
    for ts in (1, _ts(ui, "answer 1"), 999_999):
        with pytest.raises(RewindRefused):
            plan_delete(ui, api, ts)
