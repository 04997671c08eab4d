"""Context reduction (hdsp.daemon.tasks.context) as pure functions over an API
history, and the task's ApiHistory that stores what they decide."""

from __future__ import annotations

from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from hdsp.daemon.conversation import (
    ApiMessage,
    ImageBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from hdsp.daemon.tasks.context import (
    condensable,
    condensing,
    request_messages,
    truncate_oldest,
    visible_order,
)
from hdsp.daemon.tasks.history import ApiHistory
from tests.support.task_parts import TASK_ID, open_parts

_PNG = ImageBlock(media_type="image/png", data="iVBORw0KGgo=")


def _user(ts: int, text: str = "u", *images: ImageBlock) -> ApiMessage:
    return ApiMessage(role="user", content=[*images, TextBlock(text=text)], ts=ts)


def _assistant(ts: int, text: str = "a") -> ApiMessage:
    return ApiMessage(role="assistant", content=[TextBlock(text=text)], ts=ts)


def _conversation(exchanges: int) -> list[ApiMessage]:
    api = []
    for i in range(exchanges):
        api += [_user(2 * i + 1, f"q{i}"), _assistant(2 * i + 2, f"a{i}")]
    return api


def _images(messages: list[ApiMessage]) -> int:
    return sum(isinstance(b, ImageBlock) for m in messages for b in m.content)


def test_a_request_sends_nothing_truncated() -> None:
    api = _conversation(3)
    api[1] = msgspec.structs.replace(api[1], truncation_parent="t1")
    sent = request_messages(api)
    assert [m.ts for m in sent] == [1, 3, 4, 5, 6]


def test_a_request_carries_only_the_most_recent_images() -> None:
    api = [_user(ts, f"picture {ts}", _PNG) for ts in range(1, 8)]
    sent = request_messages(api, max_images=4)
    assert [_images([m]) for m in sent] == [0, 0, 0, 1, 1, 1, 1]
    # The history itself keeps every image.
    assert _images(api) == 7


def test_images_a_provider_refused_are_left_out_up_to_the_refusal() -> None:
    api = [_user(1, "one", _PNG), _assistant(2), _user(3, "three", _PNG)]
    sent = request_messages(api, images_refused_upto=2)
    assert [_images([m]) for m in sent] == [0, 0, 1]
    assert "one" in str(sent[0].content)


def test_truncation_hides_the_oldest_quarter_but_never_the_first_message() -> None:
    api = _conversation(8)  # 16 messages
    truncation = truncate_oldest(api, "cut-1")
    assert truncation is not None
    assert truncation.truncation_id == "cut-1"
    # A quarter of the 15 after the first: 3, and on to the next assistant message,
    # so that what is kept after the task starts with one.
    assert sorted(truncation.hidden) == [1, 2, 3, 4]
    assert all(m.truncation_parent == "cut-1" for m in truncation.hidden.values())
    assert api[5].role == "assistant"
    # Pure: the history given is not changed.
    assert all(m.truncation_parent is None for m in api)


def test_truncation_never_splits_a_tool_call_from_its_result() -> None:
    call = ApiMessage(
        role="assistant",
        content=[ToolUseBlock(id="c1", name="read_file", input={"path": "a"})],
        ts=2,
    )
    result = ApiMessage(
        role="user",
        content=[ToolResultBlock(tool_use_id="c1", content=[TextBlock(text="x")])],
        ts=3,
    )
    api = [_user(1), call, result, _assistant(4), _user(5), _assistant(6), _user(7), _assistant(8)]
    truncation = truncate_oldest(api, "cut")
    assert truncation is not None
    hidden = sorted(truncation.hidden)
    assert hidden == [1, 2]  # the call and its result go together


def test_a_short_conversation_is_not_truncated() -> None:
    assert truncate_oldest(_conversation(1), "cut") is None
    assert truncate_oldest([_user(1), _assistant(2), _user(3)], "cut") is None


@given(st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=40))
def test_truncation_keeps_the_task_and_starts_the_rest_with_an_answer(roles: list[str]) -> None:
    api = [
        ApiMessage(role=role, content=[TextBlock(text=str(i))], ts=i + 1)
        for i, role in enumerate(roles)
    ]
    truncation = truncate_oldest(api, "cut")
    if truncation is None:
        return
    hidden = sorted(truncation.hidden)
    assert 0 not in hidden
    assert hidden == list(range(1, hidden[-1] + 1))  # one contiguous run after the task
    assert api[hidden[-1] + 1].role == "assistant"
    assert hidden[-1] + 1 < len(api) - 1  # something besides the last message is kept


async def test_the_history_stores_its_messages_and_truncations(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        history = ApiHistory(TASK_ID, [], parts.journal, parts.messages().next_ts)
        for i in range(4):
            await history.add("user", [TextBlock(text=f"q{i}")])
            await history.add("assistant", [TextBlock(text=f"a{i}")])
        assert not history.awaits_reply
        truncated = await history.truncate()
        assert truncated is not None
        truncation_id, hidden = truncated
        await parts.journal.flush()
        bodies = await parts.store.read(parts.store.db.api_messages, TASK_ID)
        stored = [msgspec.json.decode(b, type=ApiMessage) for b in bodies]
        assert stored == history.messages
        assert sum(m.truncation_parent == truncation_id for m in stored) == hidden > 0
        assert [m.ts for m in history.for_request()] == [
            m.ts for m in stored if m.truncation_parent is None
        ]


async def test_refusing_images_counts_once_per_new_message(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        history = ApiHistory(TASK_ID, [], parts.journal, parts.messages().next_ts)
        await history.add("user", [_PNG, TextBlock(text="look")])
        assert history.refuse_images()
        assert not history.refuse_images()  # nothing new to leave out
        assert _images(history.for_request()) == 0
        await history.add("user", [_PNG, TextBlock(text="another")])
        assert _images(history.for_request()) == 1
        assert history.refuse_images()
        assert history.awaits_reply


# ---- condensing ---------------------------------------------------------------


def _tool_session(phases: int, output: str = "out") -> list[ApiMessage]:
    api = [_user(1, "the task")]
    for i in range(phases):
        api.append(
            ApiMessage(
                role="assistant",
                content=[ToolUseBlock(id=f"c{i}", name="read_file", input={"path": f"{i}"})],
                ts=2 * i + 2,
            )
        )
        api.append(
            ApiMessage(
                role="user",
                content=[ToolResultBlock(tool_use_id=f"c{i}", content=[TextBlock(text=output)])],
                ts=2 * i + 3,
            )
        )
    return api


def test_a_summary_replaces_all_but_the_task_and_the_last_exchange() -> None:
    api = _tool_session(5)  # task + 10 messages
    assert condensable(api) == list(range(1, 9))
    made = condensing(api, "sum-1", "what happened", ts=100)
    assert sorted(made.hidden) == list(range(1, 9))
    assert all(m.condense_parent == "sum-1" for m in made.hidden.values())
    assert made.summary.is_summary and made.summary.condense_id == "sum-1"
    assert "what happened" in str(made.summary.content)
    # Pure: nothing of the history given changes, and nothing is deleted.
    assert all(m.condense_parent is None for m in api)
    after = [made.hidden.get(i, m) for i, m in enumerate(api)] + [made.summary]
    # The request sends the task, the summary where the condensed part began, and
    # the last tool call with its result.
    sent = request_messages(after)
    assert [m.ts for m in sent] == [1, 100, 10, 11]
    assert visible_order(after) == [0, 11, 9, 10]


def test_a_second_summary_condenses_the_first() -> None:
    api = _tool_session(5)
    made = condensing(api, "s1", "first", ts=100)
    api = [made.hidden.get(i, m) for i, m in enumerate(api)] + [made.summary]
    api += _tool_session(4)[1:]  # four more phases, ts 2..9 again: order is by index
    api = [msgspec.structs.replace(m, ts=200 + i) for i, m in enumerate(api)]
    chosen = condensable(api)
    assert 11 in chosen  # the first summary is among what the second replaces
    second = condensing(api, "s2", "second", ts=999)
    api = [second.hidden.get(i, m) for i, m in enumerate(api)] + [second.summary]
    sent = request_messages(api)
    assert sent[0].ts == 200 and sent[1].condense_id == "s2"
    assert sum(1 for m in sent if m.is_summary) == 1
    assert len(sent) == 4


def test_too_little_since_the_last_summary_is_not_condensed() -> None:
    assert condensable(_tool_session(1)) == []
    assert condensable([_user(1)]) == []


def test_long_outputs_of_older_tool_phases_become_stubs_in_requests_only() -> None:
    big = "1234567890" * 500
    api = _tool_session(6, big)
    sent = request_messages(api, recent_output_turns=3)
    lengths = [len(str(m.content)) for m in sent if m.role == "user" and m.ts != 1]
    assert all(n < 1000 for n in lengths[:3])  # stubs
    assert all(n > 5000 for n in lengths[3:])  # the last three whole
    assert "left out of the request" in str(sent[2].content)
    assert all(big in str(m.content) for m in api if m.role == "user" and m.ts != 1)


async def test_the_history_stores_a_summary_and_what_it_hides(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        history = ApiHistory(TASK_ID, [], parts.journal, parts.messages().next_ts)
        for message in _tool_session(5):
            await history.add(message.role, message.content)
        assert history.can_condense()
        asked = history.to_condense()
        assert asked[0].content == [TextBlock(text="the task")] and len(asked) == 9
        condense_id, hidden = await history.condense("a summary")
        await parts.journal.flush()
        bodies = await parts.store.read(parts.store.db.api_messages, TASK_ID)
        stored = [msgspec.json.decode(b, type=ApiMessage) for b in bodies]
        assert stored == history.messages and len(stored) == 12  # 11 kept, 1 summary
        assert sum(m.condense_parent == condense_id for m in stored) == hidden == 8
        assert len(history.for_request()) == 4
        assert not history.can_condense()
