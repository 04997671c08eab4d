"""Rewinding as a pure plan (hdsp.daemon.tasks.rewind): what goes, what comes back."""

from __future__ import annotations

import msgspec
import pytest

from hdsp.daemon.conversation import ApiMessage, TextBlock, ToolResultBlock, ToolUseBlock
from hdsp.daemon.tasks.context import condensing, request_messages, truncate_oldest
from hdsp.daemon.tasks.rewind import RewindRefused, plan_rewind
from hdsp.protocol import ClineMessage, Say


def _say(ts: int, say: str, text: str = "", **fields: object) -> ClineMessage:
    return ClineMessage(ts=ts, type="say", say=say, text=text, **fields)  # type: ignore[arg-type]


def _session(turns: int) -> tuple[list[ClineMessage], list[ApiMessage]]:
    """UI and API messages of `turns` turns, on one clock as the daemon makes them."""
    ui = [_say(1, Say.TEXT, "task")]
    api = [ApiMessage(role="user", content=[TextBlock(text="task")], ts=1)]
    ts = 1
    for turn in range(turns):
        if turn:
            ui.append(_say(ts := ts + 1, Say.USER_FEEDBACK, f"step {turn}"))
            api.append(
                ApiMessage(role="user", content=[TextBlock(text=f"step {turn}")], ts=(ts := ts + 1))
            )
        ui.append(_say(ts := ts + 1, Say.TOOL, "read"))
        api.append(
            ApiMessage(
                role="assistant",
                content=[ToolUseBlock(id=f"c{turn}", name="read_file", input={})],
                ts=(ts := ts + 1),
            )
        )
        api.append(
            ApiMessage(
                role="user",
                content=[ToolResultBlock(tool_use_id=f"c{turn}", content=[TextBlock(text="x")])],
                ts=(ts := ts + 1),
            )
        )
        ui.append(_say(ts := ts + 1, Say.TEXT, f"answer {turn}"))
        api.append(
            ApiMessage(
                role="assistant", content=[TextBlock(text=f"answer {turn}")], ts=(ts := ts + 1)
            )
        )
    return ui, api


def test_rewinding_to_a_message_removes_it_and_what_came_after() -> None:
    ui, api = _session(4)
    step2 = next(m.ts for m in ui if m.text == "step 2")
    plan = plan_rewind(ui, api, step2, include=True)
    assert plan.ui_from_ts == step2
    assert [m.text for m in ui[: plan.ui_kept]][-1] == "answer 1"
    assert api[plan.api_kept - 1].content == [TextBlock(text="answer 1")]
    kept = plan_rewind(ui, api, step2, include=False)
    assert api[kept.api_kept - 1].content == [TextBlock(text="step 2")]


def test_a_tool_call_never_stays_without_its_result() -> None:
    ui, api = _session(2)
    tool = next(m.ts for m in ui if m.say == Say.TOOL and m.ts > 5)
    plan = plan_rewind(ui, api, tool, include=False)  # the result came after the tool message
    last = api[plan.api_kept - 1]
    assert not any(isinstance(b, ToolUseBlock) for b in last.content)


def test_the_first_message_and_unknown_ones_are_refused() -> None:
    ui, api = _session(2)
    with pytest.raises(RewindRefused):
        plan_rewind(ui, api, 1, include=True)
    with pytest.raises(RewindRefused):
        plan_rewind(ui, api, 999_999, include=True)
    assert plan_rewind(ui, api, ui[-1].ts, include=False).api_kept == len(api)


def test_removing_a_summary_brings_back_what_it_hid_and_keeps_older_ones() -> None:
    ui, api = _session(6)
    made = condensing(api, "sum-1", "summary", ts=1000)
    api = [made.hidden.get(i, m) for i, m in enumerate(api)] + [made.summary]
    ui.append(_say(999, Say.CONDENSE_CONTEXT, context_condense={"condenseId": "sum-1"}))
    assert len(request_messages(api)) < len(api)
    # Rewind to the condense message: the summary goes, its messages come back.
    plan = plan_rewind(ui, api, 999, include=True)
    assert plan.api_kept == len(api) - 1
    assert set(plan.restored) == set(made.hidden)
    assert all(m.condense_parent is None for m in plan.restored.values())
    after = [plan.restored.get(i, m) for i, m in enumerate(api[: plan.api_kept])]
    assert request_messages(after) == [
        msgspec.structs.replace(m, condense_parent=None) for m in api[:-1]
    ]
    # Rewinding to after it keeps it as it is.
    assert plan_rewind(ui, api, 999, include=False).restored == {}


def test_removing_a_truncation_marker_brings_back_what_it_hid() -> None:
    ui, api = _session(6)
    truncation = truncate_oldest(api, "cut-1")
    assert truncation is not None
    api = [truncation.hidden.get(i, m) for i, m in enumerate(api)]
    marker = _say(api[-1].ts + 1, Say.SLIDING_WINDOW_TRUNCATION)
    ui.append(msgspec.structs.replace(marker, context_truncation={"truncationId": "cut-1"}))
    plan = plan_rewind(ui, api, marker.ts, include=True)
    assert plan.api_kept == len(api)
    assert set(plan.restored) == set(truncation.hidden)
    assert all(m.truncation_parent is None for m in plan.restored.values())
