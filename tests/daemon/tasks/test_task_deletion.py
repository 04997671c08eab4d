"""Deleting one of the user's messages as a pure plan (hdsp.daemon.tasks.deletion):
what goes, and that the API history stays one a provider accepts."""

from __future__ import annotations

import msgspec
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


def test_the_first_message_and_records_of_the_task_cannot_be_deleted() -> None:
    ui, api = _session(2)
    ui.append(_say(998, Say.API_REQ_STARTED, "{}"))
    ui.append(_say(999, Say.CONDENSE_CONTEXT, context_condense={"condenseId": "sum-1"}))
    for ts in (1, 998, 999, 999_999):
        with pytest.raises(RewindRefused):
            plan_delete(ui, api, ts)


def _calls_session() -> tuple[list[ClineMessage], list[ApiMessage]]:
    """A reply with text and two parallel calls (their messages tagged with the
    call, as the daemon tags them), the results, then the answer, on one clock."""
    ui = [
        _say(1, Say.TEXT, "task"),
        _say(2, Say.TEXT, "Reading both files."),
        _say(4, Say.TOOL, "read a", tool_use_id="c1"),
        _say(5, Say.TOOL, "read b", tool_use_id="c2"),
        _say(6, Say.TOOL_RESULT, "a", tool_use_id="c1"),
        _say(7, Say.TOOL_RESULT, "b", tool_use_id="c2"),
        _say(9, Say.TEXT, "Both read."),
    ]
    api = [
        ApiMessage(role="user", content=[TextBlock(text="task")], ts=1),
        ApiMessage(
            role="assistant",
            content=[
                TextBlock(text="Reading both files."),
                ToolUseBlock(id="c1", name="read_file", input={"path": "a"}),
                ToolUseBlock(id="c2", name="read_file", input={"path": "b"}),
            ],
            ts=3,
        ),
        ApiMessage(
            role="user",
            content=[
                ToolResultBlock(tool_use_id="c1", content=[TextBlock(text="a")]),
                ToolResultBlock(tool_use_id="c2", content=[TextBlock(text="b")]),
            ],
            ts=8,
        ),
        ApiMessage(role="assistant", content=[TextBlock(text="Both read.")], ts=10),
    ]
    return ui, api


def test_deleting_a_tool_call_takes_its_result_and_its_messages() -> None:
    ui, api = _calls_session()
    for ts in (4, 6):  # the call's message, or its result's: the same call goes
        plan = plan_delete(ui, api, ts)
        assert plan.ui_removed == [4, 6] and plan.tool_calls == ["c1"]
        after = _applied(api, plan)
        assert _paired(after)
        assert after[1].content == [api[1].content[0], api[1].content[2]]
        assert after[2].content == [api[2].content[1]]
        assert after[3] == api[3]


def test_deleting_a_lone_call_takes_the_messages_it_leaves_empty() -> None:
    ui, api = _session(3)
    step1 = _ts(ui, "step 1")
    call_ts = next(m.ts for m in ui if m.say == Say.TOOL and m.ts > step1)
    ui = [msgspec.structs.replace(m, tool_use_id="c1") if m.ts == call_ts else m for m in ui]
    plan = plan_delete(ui, api, call_ts)
    after = _applied(api, plan)
    assert len(after) == len(api) - 2 and _paired(after)
    assert not any(b.id == "c1" for m in after for b in m.content if isinstance(b, ToolUseBlock))


def test_deleting_the_text_of_a_reply_keeps_its_calls() -> None:
    ui, api = _calls_session()
    plan = plan_delete(ui, api, 2)
    assert plan.ui_removed == [2] and plan.tool_calls == []
    after = _applied(api, plan)
    assert after[1].content == api[1].content[1:] and _paired(after)
    # A reply that was only text goes whole.
    plan = plan_delete(ui, api, 9)
    assert _applied(api, plan) == api[:3]
    # A text that never reached the history (its stream was stopped) goes alone.
    stopped = [*ui, _say(11, Say.TEXT, "Half a sen")]
    plan = plan_delete(stopped, api, 11)
    assert plan.ui_removed == [11] and _applied(api, plan) == api


def test_deleting_a_condensed_call_takes_its_summary() -> None:
    ui, api = _calls_session()
    api += [
        ApiMessage(role="user", content=[TextBlock(text="and then?")], ts=11),
        ApiMessage(role="assistant", content=[TextBlock(text="nothing")], ts=12),
    ]
    made = condensing(api, "sum-1", "summary", ts=1000)
    api = [made.hidden.get(i, m) for i, m in enumerate(api)] + [made.summary]
    assert api[1].condense_parent == "sum-1"
    ui.append(_say(999, Say.CONDENSE_CONTEXT, context_condense={"condenseId": "sum-1"}))
    plan = plan_delete(ui, api, 5)
    assert plan.ui_removed == [5, 7, 999]
    after = _applied(api, plan)
    assert not any(m.is_summary or m.condense_parent for m in after) and _paired(after)


def test_a_call_is_told_apart_from_another_replys_call_of_the_same_id() -> None:
    """Some servers number calls per reply (call_0 in every reply): the call
    deleted is the one of the request that made it, and no other."""
    ui = [
        _say(1, Say.TEXT, "task"),
        _say(2, Say.API_REQ_STARTED, "{}"),
        _say(4, Say.TOOL, "read a", tool_use_id="call_0"),
        _say(5, Say.TOOL_RESULT, "a", tool_use_id="call_0"),
        _say(7, Say.API_REQ_STARTED, "{}"),
        _say(9, Say.COMPLETION_RESULT, "done", tool_use_id="call_0"),
    ]
    api = [
        ApiMessage(role="user", content=[TextBlock(text="task")], ts=1),
        ApiMessage(
            role="assistant", content=[ToolUseBlock(id="call_0", name="read_file", input={})], ts=3
        ),
        ApiMessage(
            role="user",
            content=[ToolResultBlock(tool_use_id="call_0", content=[TextBlock(text="a")])],
            ts=6,
        ),
        ApiMessage(
            role="assistant",
            content=[ToolUseBlock(id="call_0", name="attempt_completion", input={})],
            ts=8,
        ),
        ApiMessage(
            role="user",
            content=[ToolResultBlock(tool_use_id="call_0", content=[TextBlock(text="ok")])],
            ts=10,
        ),
    ]
    plan = plan_delete(ui, api, 5)
    assert plan.ui_removed == [4, 5]
    assert _applied(api, plan) == [api[0], api[3], api[4]]
    plan = plan_delete(ui, api, 9)
    assert plan.ui_removed == [9]
    assert _applied(api, plan) == api[:3]
