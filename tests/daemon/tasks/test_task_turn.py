"""What a turn writes to the store (hdsp.daemon.tasks.turn): the turn state round
trips, untrusted text that is not UTF-8 is made encodable instead of ending the
daemon, and every tool call gets its result."""

from __future__ import annotations

import msgspec

from hdsp.daemon.conversation import ApiMessage, ImageBlock, TextBlock, ToolResultBlock
from hdsp.daemon.tasks.turn import (
    CallState,
    TurnState,
    api_write,
    encodable_result,
    tool_results,
    turn_decoder,
    turn_write,
    user_content,
)
from hdsp.daemon.tools import ToolResult

#: A 2 x 2 red PNG.
_RED_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="
_LONE = "name-\udcff.csv"  # a file name that was not UTF-8 (surrogateescape)


def test_the_turn_state_round_trips_through_its_write() -> None:
    turn = TurnState(
        phase="tools",
        resume_ask_ts=7,
        calls=[
            CallState(
                id="c1",
                name="read_file",
                arguments={"path": "a"},
                status="done",
                result=[TextBlock(text="x")],
            ),
            CallState(
                id="c2",
                name="shell",
                arguments=None,
                raw_arguments="{oops",
                status="asking",
                ask_ts=12,
                ask_deadline=99,
                approve_on_timeout=True,
            ),
        ],
    )
    _sql, (body, task_id) = turn_write("t1", turn)
    assert task_id == "t1"
    assert turn_decoder.decode(body) == turn


def test_a_closed_turn_writes_nothing_to_resume() -> None:
    _sql, (body, task_id) = turn_write("t1", None)
    assert body is None and task_id == "t1"


def test_an_api_message_with_text_that_is_not_utf8_is_stored_with_escapes() -> None:
    message = ApiMessage(role="user", content=[TextBlock(text=f"saw {_LONE}")], ts=5)
    written, (_sql, (task_id, index, body)) = api_write("t1", 3, message)
    assert (task_id, index) == ("t1", 3)
    decoded = msgspec.json.decode(body, type=ApiMessage)
    assert decoded == written
    assert decoded.content == [TextBlock(text="saw name-\\xff.csv")]


def test_an_encodable_api_message_is_stored_as_it_is() -> None:
    message = ApiMessage(role="assistant", content=[TextBlock(text="fine ✓")], ts=5)
    written, _write = api_write("t1", 0, message)
    assert written is message


def test_a_tool_result_with_lone_surrogates_becomes_encodable() -> None:
    image = ImageBlock(media_type="image/png", data="AAAA")
    result = ToolResult([TextBlock(text=_LONE), image], is_error=True, completes_task=True)
    clean = encodable_result(result)
    assert clean.content == [TextBlock(text="name-\\xff.csv"), image]
    assert clean.is_error and clean.completes_task
    ok = ToolResult.text("fine")
    assert encodable_result(ok) is ok


def test_every_call_gets_a_result_even_those_that_never_ran() -> None:
    done = CallState(
        id="c1",
        name="a",
        arguments={},
        status="done",
        result=[TextBlock(text="ok")],
        is_error=False,
    )
    asking = CallState(id="c2", name="b", arguments={}, status="asking")
    results = tool_results([done, asking], "cancelled")
    assert results == [
        ToolResultBlock(tool_use_id="c1", content=[TextBlock(text="ok")], is_error=False),
        ToolResultBlock(tool_use_id="c2", content=[TextBlock(text="cancelled")], is_error=True),
    ]


def test_a_user_message_puts_images_before_its_text() -> None:
    content = user_content("look", [f"data:image/png;base64,{_RED_PNG}"])
    assert isinstance(content[0], ImageBlock)
    assert content[1] == TextBlock(text="look")
    assert user_content(None, None) == []
