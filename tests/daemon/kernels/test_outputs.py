"""The output rules of one cell, message sequence by message sequence, as the
Jupyter messaging spec says and nbclient applies them (the reference test that
runs nbclient's own notebooks is tests/daemon/tools/test_nbclient_reference.py)."""

from __future__ import annotations

from typing import Any

from hdsp.daemon.kernels.outputs import OutputList, output_from_message
from hdsp.protocol import KernelOutput


def _msg(kind: str, **content: Any) -> dict[str, Any]:
    return {"header": {"msg_type": kind}, "parent_header": {}, "content": content}


def stream(text: str, name: str = "stdout") -> dict[str, Any]:
    return _msg("stream", name=name, text=text)


def display(
    value: str, display_id: str | None = None, kind: str = "display_data"
) -> dict[str, Any]:
    content: dict[str, Any] = {"data": {"text/plain": value}, "metadata": {}}
    if display_id is not None:
        content["transient"] = {"display_id": display_id}
    if kind == "execute_result":
        content["execution_count"] = 3
    return _msg(kind, **content)


def clear(wait: bool = False) -> dict[str, Any]:
    return _msg("clear_output", wait=wait)


def run(*messages: dict[str, Any]) -> OutputList:
    outputs = OutputList()
    for message in messages:
        out = output_from_message(message)
        assert out is not None
        outputs.add(out)
    return outputs


def shown(outputs: OutputList) -> list[tuple[str, str]]:
    """(output type, text or text/plain) of each kept output."""
    return [
        (o.output_type, o.text if o.output_type == "stream" else (o.data or {})["text/plain"])
        for o in outputs.outputs()
    ]


def test_clear_output_clears_at_once() -> None:
    assert shown(run(stream("a\n"), clear(), stream("b\n"))) == [("stream", "b\n")]
    assert shown(run(stream("a\n"), display("x"), clear())) == []


def test_clear_output_with_wait_clears_just_before_the_next_output() -> None:
    # Followed by an output: only what came after.
    assert shown(run(stream("Hello"), clear(wait=True), stream("world"))) == [("stream", "world")]
    assert shown(run(stream("a"), clear(wait=True), display("d"))) == [("display_data", "d")]
    # Followed by nothing: the old output stays.
    assert shown(run(stream("Hello world"), clear(wait=True))) == [("stream", "Hello world")]
    # Two waits in a row are one clear.
    assert shown(run(stream("a"), clear(wait=True), clear(wait=True), stream("b"))) == [
        ("stream", "b")
    ]
    # A clear at once after a wait cancels the wait: nothing more to clear later.
    assert shown(run(stream("a"), clear(wait=True), clear(), stream("b"), stream("c"))) == [
        ("stream", "bc")
    ]


def test_an_update_neither_triggers_a_pending_clear_nor_becomes_an_output() -> None:
    outputs = run(
        display("Hello", "id4"), clear(wait=True), display("new", "id4", "update_display_data")
    )
    # The display is still shown, updated; the clear still waits for an output.
    assert shown(outputs) == [("display_data", "new")]
    outputs.add(KernelOutput(output_type="stream", name="stdout", text="world"))
    assert shown(outputs) == [("stream", "world")]


def test_streams_of_one_name_coalesce_only_when_consecutive() -> None:
    outputs = run(
        stream("a"), stream("b"), stream("e", "stderr"), stream("c"), display("d"), stream("f")
    )
    assert shown(outputs) == [
        ("stream", "ab"),
        ("stream", "e"),
        ("stream", "c"),
        ("display_data", "d"),
        ("stream", "f"),
    ]
    # After a clear, a stream starts anew (no text of the cleared one).
    assert shown(run(stream("a"), clear(wait=True), stream("b"), stream("c"))) == [("stream", "bc")]


def test_update_display_data_rewrites_every_output_with_its_display_id() -> None:
    outputs = run(
        display("above"),
        display("1", "here"),
        display("2", "here"),
        display("3", "there"),
        display("8", "here", "update_display_data"),
    )
    assert shown(outputs) == [
        ("display_data", "above"),
        ("display_data", "8"),
        ("display_data", "8"),
        ("display_data", "3"),
    ]


def test_a_new_display_with_a_known_id_updates_the_earlier_ones_too() -> None:
    # nbclient's update-display-id notebook: display(4, id="here") shows 4 in every
    # output with id "here", the new one included.
    outputs = run(display("2", "here"), display("3", "there"), display("4", "here"))
    assert shown(outputs) == [
        ("display_data", "4"),
        ("display_data", "3"),
        ("display_data", "4"),
    ]


def test_an_execute_result_with_a_display_id_is_updated_and_keeps_its_count() -> None:
    outputs = run(
        display("9", "result", "execute_result"), display("10", "result", "update_display_data")
    )
    [result] = outputs.outputs()
    assert result.output_type == "execute_result"
    assert (result.data, result.execution_count, result.display_id) == (
        {"text/plain": "10"},
        3,
        "result",
    )


def test_an_update_for_a_display_shown_nowhere_here_is_kept_for_other_cells() -> None:
    outputs = run(
        display("a", "mine"),
        display("Hello world", "theirs", "update_display_data"),
        display("again", "theirs", "update_display_data"),
        display("b", "mine", "update_display_data"),
    )
    assert shown(outputs) == [("display_data", "b")]
    assert [(u.display_id, (u.data or {})["text/plain"]) for u in outputs.display_updates] == [
        ("mine", "b"),
        ("theirs", "again"),
    ]
    assert all(u.output_type == "update_display_data" for u in outputs.display_updates)


def test_a_cleared_display_is_not_updated_back() -> None:
    # Clear Output.ipynb: handle2 is cleared at once, its later update shows nothing.
    outputs = run(
        display("Hello world", "id2"), clear(), display("new", "id2", "update_display_data")
    )
    assert shown(outputs) == []


def test_transient_may_be_missing_or_null() -> None:
    for transient in (None, {}, {"display_id": None}, {"display_id": ""}):
        out = output_from_message(
            _msg("display_data", data={"text/plain": "x"}, metadata={}, transient=transient)
        )
        assert out is not None and out.display_id is None
    assert run(display("x")).display_updates == []
