"""PromptContext on the wire (nbctx, issue 17): bounded, validated with the path
of the bad field, optional on StartNewTask and SendMessage (old clients send
none, old peers ignore it)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from hdsp.protocol import (
    MAX_CELL_HEAD_CHARS,
    MAX_OUTLINE_CELLS,
    MAX_OUTPUT_KINDS,
    MAX_SELECTION_CHARS,
    ClineMessage,
    PromptContext,
    SendMessageData,
    StartNewTaskData,
    encode,
)

_start = msgspec.json.Decoder(StartNewTaskData)
_send = msgspec.json.Decoder(SendMessageData)


def start(context: Any) -> StartNewTaskData:
    return _start.decode(json.dumps({"text": "x", "context": context}))


def test_a_full_context_round_trips_in_camel_case() -> None:
    body = {
        "notebook": "work/sales.ipynb",
        "cell": {"index": 2, "id": "c-2"},
        "selection": "df.groupby('region')",
        "outline": [
            {"cellType": "markdown", "head": "# Sales", "lines": 1},
            {
                "cellType": "code",
                "id": "c-2",
                "head": "df = load()",
                "lines": 4,
                "executionCount": 7,
                "outputKinds": ["stream", "image/png"],
            },
        ],
        "truncated": True,
        "kernelId": "k-1",
    }
    data = start(body)
    assert data.context is not None and data.context.cell is not None
    assert data.context.cell.index == 2 and data.context.outline is not None
    assert data.context.outline[1].execution_count == 7
    assert json.loads(encode(data))["context"] == body
    sent = _send.decode(json.dumps({"text": "y", "context": {"notebook": "a.ipynb"}}))
    assert sent.context == PromptContext(notebook="a.ipynb")


def test_without_a_context_nothing_changes_on_the_wire() -> None:
    assert start(None).context is None
    assert "context" not in json.loads(encode(StartNewTaskData(text="x")))
    assert "context" not in json.loads(encode(ClineMessage(ts=1, type="say", say="text")))


@pytest.mark.parametrize(
    ("context", "path"),
    [
        ({"selection": "s" * (MAX_SELECTION_CHARS + 1)}, "$.context.selection"),
        ({"notebook": ""}, "$.context.notebook"),
        ({"notebook": "n" * 1025}, "$.context.notebook"),
        ({"cell": {"index": -1}}, "$.context.cell.index"),
        ({"cell": {"index": 0, "id": ""}}, "$.context.cell.id"),
        ({"outline": [{"cellType": "code"}] * (MAX_OUTLINE_CELLS + 1)}, "$.context.outline"),
        ({"outline": [{"cellType": "python"}]}, "$.context.outline[0].cellType"),
        (
            {"outline": [{"cellType": "code", "head": "h" * (MAX_CELL_HEAD_CHARS + 1)}]},
            "$.context.outline[0].head",
        ),
        (
            {"outline": [{"cellType": "code", "outputKinds": ["stream"] * (MAX_OUTPUT_KINDS + 1)}]},
            "$.context.outline[0].outputKinds",
        ),
        ({"outline": [{"cellType": "code", "executionCount": -3}]}, "$.context.outline[0]"),
        ({"kernelId": 5}, "$.context.kernelId"),
        ("a.ipynb", "$.context"),
    ],
)
def test_a_bad_context_is_refused_with_the_path_of_the_bad_field(context: Any, path: str) -> None:
    with pytest.raises(msgspec.ValidationError) as refused:
        start(context)
    assert path in str(refused.value)
