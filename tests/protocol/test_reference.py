"""The protocol reference (protocol/README.md) and schema.json tell a stranger
the truth: the schema compiles in ajv's strict mode, every JSON example of the
reference validates against the schema (ajv) and decodes as the type it names
(msgspec, the daemon's own decoder), and the reference covers every command,
event and error code.

An example is a fenced block whose info string is `json` and a type: a name in
`schema.json`'s `$defs` and `hdsp.protocol` (`json TaskEvent`), or
`json Reply:COMMAND` for a Reply whose result is COMMAND's.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hdsp import protocol as p
from hdsp.protocol import COMMANDS, ErrorCode, Reply, TaskCommand, TaskEvent
from tests.support.daemon_process import DaemonProcess

from . import ajv

REFERENCE = Path(__file__).resolve().parents[2] / "protocol" / "README.md"
_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Example:
    id: str
    #: The `$defs` name the example is, or "Reply" for `Reply:COMMAND`.
    type_name: str
    #: For `Reply:COMMAND`: the command whose result the Reply carries.
    command: str | None
    text: str

    @property
    def value(self) -> Any:
        return json.loads(self.text)


def _examples() -> list[Example]:
    text = REFERENCE.read_text()
    found = []
    for m in _FENCE.finditer(text):
        words = m.group("info").split()
        if not words or words[0] != "json":
            continue
        assert len(words) == 2, f"a json example without a type: {m.group(0)[:80]!r}"
        type_name, _, command = words[1].partition(":")
        line = text.count("\n", 0, m.start()) + 1
        found.append(Example(f"L{line}-{words[1]}", type_name, command or None, m.group("body")))
    return found


EXAMPLES = _examples()


def _pointer(example: Example) -> str:
    return f"#/$defs/{example.type_name}"


def _cases() -> Iterator[tuple[str, str, Any]]:
    for ex in EXAMPLES:
        yield ex.id, _pointer(ex), ex.value
        if ex.command is not None and ex.value.get("ok"):
            result = ex.value.get("result")
            yield f"{ex.id}.result", f"#/$defs/CommandResults/properties/{ex.command}", result
    # Values the schema must refuse, as the daemon's decoder does.
    replay = {"commandName": "Replay", "data": {"sinceSeq": -1}}
    yield "negative-sinceSeq", "#/$defs/ClientMessage", _command(replay)
    cursor = {"commandName": "ListTasks", "data": {"cursor": "-1"}}
    yield "negative-cursor", "#/$defs/ClientMessage", _command(cursor)
    yield "bare-sync-body", "#/$defs/TaskEvent", {}


def _command(data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "TaskCommand", "clientId": "c-1", "requestId": "r1", "data": data}


@pytest.fixture(scope="module")
def report() -> ajv.AjvReport:
    return ajv.run(list(_cases()))


def test_the_schema_compiles_in_ajv_strict_mode(report: ajv.AjvReport) -> None:
    assert report.strict is None, report.strict


def test_the_reference_has_examples() -> None:
    assert len(EXAMPLES) > 60


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_an_example_matches_the_schema(example: Example, report: ajv.AjvReport) -> None:
    assert report.results[example.id] is None, report.results[example.id]
    if example.command is not None and example.value.get("ok"):
        errors = report.results[f"{example.id}.result"]
        assert errors is None, errors


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_an_example_decodes_as_its_type(example: Example) -> None:
    wire_type = getattr(p, example.type_name)
    decoded = msgspec.json.decode(example.text.encode(), type=wire_type)
    if example.command is not None:
        assert isinstance(decoded, Reply)
        if decoded.ok:
            msgspec.convert(decoded.result, COMMANDS[example.command].result)
        else:
            assert decoded.error is not None
    if example.type_name == "ClientMessage":
        # What the daemon does with a client's frame, integer checks included.
        assert p.decode_client_message(example.text.encode()) == decoded


def test_the_schema_refuses_what_the_types_refuse(report: ajv.AjvReport) -> None:
    for case in ("negative-sinceSeq", "negative-cursor", "bare-sync-body"):
        assert report.results[case] is not None, f"{case} passed the schema"
    for case in ("negative-sinceSeq", "negative-cursor"):
        frame = json.dumps(_cases_by_id()[case]).encode()
        with pytest.raises(p.FrameError) as info:
            p.decode_client_message(frame)
        assert info.value.code == ErrorCode.INVALID_REQUEST


def _cases_by_id() -> dict[str, Any]:
    return {case_id: value for case_id, _, value in _cases()}


def test_every_command_has_a_request_and_a_reply_in_the_reference() -> None:
    requests = {
        ex.value["data"]["commandName"]
        for ex in EXAMPLES
        if ex.type_name == "ClientMessage" and ex.value["type"] == "TaskCommand"
    }
    replies = {ex.command for ex in EXAMPLES if ex.command is not None and ex.value["ok"]}
    headings = set(re.findall(r"^#### (\w+)$", REFERENCE.read_text(), re.M))
    for name in COMMANDS:
        assert name in headings, f"protocol/README.md has no section for {name}"
        assert name in requests, f"protocol/README.md shows no {name} request"
        assert name in replies, f"protocol/README.md shows no {name} reply"


def test_every_event_and_error_code_is_in_the_reference() -> None:
    text = REFERENCE.read_text()
    for event in typing.get_args(p.Event):
        name = event.__struct_config__.tag
        assert f"`{name}`" in text, f"protocol/README.md does not name the event {name}"
    for code in ErrorCode:
        assert f"| `{code.value}` |" in text, f"protocol/README.md has no row for {code.value}"


def test_a_history_item_always_carries_the_token_counts_roo_requires() -> None:
    # A row stored without them (an older daemon's) is read with zeros and sent with them.
    stored = b'{"id":"t","number":1,"ts":2,"task":"x"}'
    item = msgspec.json.decode(stored, type=p.HistoryItem)
    sent = json.loads(p.encode(item))
    assert (sent["tokensIn"], sent["tokensOut"], sent["totalCost"]) == (0, 0, 0.0)
    listed = json.loads(p.encode(p.TaskList(tasks=[item])))
    assert {"tokensIn", "tokensOut", "totalCost"} <= set(listed["tasks"][0])


def test_a_real_daemon_s_discovery_file_matches_the_schema(daemon: DaemonProcess) -> None:
    text = (daemon.runtime_dir / p.DISCOVERY_FILENAME).read_text()
    result = ajv.run([("discovery", "#/$defs/Discovery", json.loads(text))])
    assert result.results["discovery"] is None, result.results["discovery"]
    assert msgspec.json.decode(text, type=p.Discovery).pid == daemon.proc.pid  # type: ignore[union-attr]


def test_an_envelope_the_python_types_make_matches_the_schema() -> None:
    """The daemon's encodings (not only the hand-written examples) validate."""
    probe = TaskEvent(data=p.EventsSynced(payload=("\x00sync.abc",)))
    command = TaskCommand(
        client_id="c-1",
        request_id="r1",
        data=p.Replay(data=p.ReplayData(since_seq=0, task_id="")),
    )
    result = ajv.run(
        [
            ("probe", "#/$defs/TaskEvent", json.loads(p.encode(probe))),
            ("command", "#/$defs/ClientMessage", json.loads(p.encode(command))),
        ]
    )
    assert result.results == {"probe": None, "command": None}
