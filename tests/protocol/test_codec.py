"""Every wire message round-trips through the codec, and bad frames become
error descriptions that name the path."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hdsp import protocol as p
from hdsp.protocol.schema import schema_text

_MESSAGE_TYPES: list[Any] = [
    *typing.get_args(p.ClientMessage),
    *typing.get_args(p.ServerMessage),
    # (Sorted: a set of classes has no fixed order, and every pytest-xdist
    # worker must collect the same tests in the same order.)
    *sorted(
        {spec.result for spec in p.COMMANDS.values() if spec.result is not type(None)},
        key=lambda t: t.__name__,
    ),
]

_json: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _strategy(t: mi.Type) -> st.SearchStrategy[Any]:
    """A strategy for any value of a wire type, read off msgspec's own type info."""
    match t:
        case mi.Metadata(type=inner):  # a description: no bearing on values
            return _strategy(inner)
        case mi.AnyType():
            return _json
        case mi.NoneType():
            return st.none()
        case mi.BoolType():
            return st.booleans()
        case mi.IntType(ge=ge, le=le):
            return st.integers(-(2**53) if ge is None else ge, 2**53 if le is None else le)
        case mi.FloatType():
            return st.floats(allow_nan=False, allow_infinity=False)
        case mi.StrType(pattern=str() as pattern):
            return st.from_regex(pattern, fullmatch=True)
        case mi.StrType(min_length=lo, max_length=hi):
            lo = lo or 0
            return st.text(min_size=lo, max_size=max(lo, min(30, hi if hi is not None else 30)))
        case mi.LiteralType(values=values):
            return st.sampled_from(values)
        case mi.EnumType(cls=cls):
            return st.sampled_from(list(cls))
        case mi.ListType(item_type=item, max_length=hi):
            return st.lists(_strategy(item), max_size=min(3, hi if hi is not None else 3))
        case mi.DictType(key_type=k, value_type=v):
            return st.dictionaries(_strategy(k), _strategy(v), max_size=3)
        case mi.TupleType(item_types=items):
            return st.tuples(*(_strategy(i) for i in items))
        case mi.UnionType(types=types):
            return st.one_of(*(_strategy(x) for x in types))
        case mi.StructType(cls=cls, fields=fields):
            return st.builds(cls, **{f.name: _strategy(f.type) for f in fields})
    raise TypeError(f"no strategy for {t}")


@pytest.mark.parametrize("message_type", _MESSAGE_TYPES, ids=lambda t: t.__name__)
def test_round_trip(message_type: Any) -> None:
    decoder = msgspec.json.Decoder(message_type)

    @settings(max_examples=60, deadline=None)
    @given(_strategy(mi.type_info(message_type)))
    def check(message: Any) -> None:
        assert decoder.decode(p.encode(message)) == message

    check()


def test_roo_envelope_shapes() -> None:
    cmd = p.TaskCommand(client_id="c1", request_id="r1", data=p.CancelTask(task_id="t1"))
    assert msgspec.json.decode(p.encode(cmd)) == {
        "type": "TaskCommand",
        "origin": "client",
        "clientId": "c1",
        "requestId": "r1",
        "data": {"commandName": "CancelTask", "taskId": "t1"},
    }
    usage = p.TokenUsage(total_tokens_in=1, total_tokens_out=2, total_cost=0.5, context_tokens=3)
    event = p.TaskEvent(
        data=p.TaskCompleted(
            payload=(
                "t1",
                usage,
                {"read_file": p.ToolUsageEntry(attempts=2, failures=1)},
                p.CompletedInfo(is_subtask=False),
            )
        ),
        seq=7,
        prev_seq=3,
    )
    assert msgspec.json.decode(p.encode(event)) == {
        "type": "TaskEvent",
        "origin": "server",
        "seq": 7,
        "prevSeq": 3,
        "data": {
            "eventName": "taskCompleted",
            "payload": [
                "t1",
                {"totalTokensIn": 1, "totalTokensOut": 2, "totalCost": 0.5, "contextTokens": 3},
                {"read_file": {"attempts": 2, "failures": 1}},
                {"isSubtask": False},
            ],
        },
    }


@pytest.mark.parametrize(
    ("frame", "code", "path", "request_id"),
    [
        (b"not json", p.ErrorCode.INVALID_REQUEST, "$", None),
        (b"[1, 2]", p.ErrorCode.INVALID_REQUEST, None, None),
        (b'{"type": "Nope"}', p.ErrorCode.INVALID_REQUEST, "$.type", None),
        (
            b'{"type":"TaskCommand","clientId":"c","requestId":"r9","data":{"commandName":"Fly"}}',
            p.ErrorCode.UNKNOWN_COMMAND,
            "$.data.commandName",
            "r9",
        ),
        (
            b'{"type":"TaskCommand","clientId":"c","requestId":"r2",'
            b'"data":{"commandName":"Replay","data":{"sinceSeq":"x"}}}',
            p.ErrorCode.INVALID_REQUEST,
            "$.data.data.sinceSeq",
            "r2",
        ),
        (
            b'{"type":"TaskCommand","clientId":"c","data":{"commandName":"Ping"}}',
            p.ErrorCode.INVALID_REQUEST,
            None,
            None,
        ),
    ],
)
def test_bad_frames(
    frame: bytes, code: p.ErrorCode, path: str | None, request_id: str | None
) -> None:
    with pytest.raises(p.FrameError) as info:
        p.decode_client_message(frame)
    assert info.value.code == code
    assert info.value.path == path
    assert info.value.request_id == request_id
    assert info.value.message


def test_durability_rules() -> None:
    msg = p.ClineMessage(ts=1, type="say", say="text", text="hi", partial=True)
    created = p.MessageEvent(payload=(p.MessagePayload("t", "created", msg),))
    partial = p.MessageEvent(payload=(p.MessagePayload("t", "updated", msg),))
    final = p.MessageEvent(
        payload=(p.MessagePayload("t", "updated", msgspec.structs.replace(msg, partial=False)),)
    )
    assert p.is_durable(created) and p.is_durable(final) and not p.is_durable(partial)
    assert p.event_task_id(partial) == "t"
    assert p.event_task_id(p.DaemonShuttingDown(payload=("bye",))) is None
    assert p.event_task_id(p.TaskSpawned(payload=("parent", "child"))) == "parent"


def test_every_command_is_in_the_table() -> None:
    names = {t.__struct_config__.tag for t in typing.get_args(p.Command)}
    assert names == set(p.COMMANDS)


def test_committed_schema_is_current() -> None:
    from pathlib import Path

    committed = Path(__file__).parents[2] / "protocol" / "schema.json"
    assert committed.exists(), "protocol/schema.json is missing: run `make schema`"
    assert committed.read_text() == schema_text(), (
        "protocol/schema.json is stale: run `make schema` and commit it"
    )


_command_names = st.sampled_from(sorted(p.COMMANDS)) | st.text(max_size=12)
#: Frames a client could send: any bytes, any JSON, and envelopes of the right
#: shape holding anything (the decode path's deep end).
FRAMES: st.SearchStrategy[bytes] = st.one_of(
    st.binary(max_size=300),
    _json.map(msgspec.json.encode),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["TaskCommand", "Connect", "Disconnect"]) | st.text(max_size=8),
            "data": st.fixed_dictionaries({"commandName": _command_names}, optional={"data": _json})
            | _json,
        },
        optional={"clientId": _json, "requestId": st.text(max_size=8) | _json},
    ).map(msgspec.json.encode),
)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(FRAMES)
@example(b"\xff\xfe")
@example(b'{"type": "TaskCommand", "data": {"commandName": "Replay", "data": {"sinceSeq": -1}}}')
@example(b'{"type":"TaskCommand","data":{"commandName":"\\n"')  # quoted in the message
def test_any_frame_decodes_or_is_refused_with_a_frame_error(frame: bytes) -> None:
    """Whatever a client sends, the decoder returns a message or raises
    FrameError, a code of its own and a path when the frame was JSON (never any
    other exception: the daemon's read loop relies on it)."""
    try:
        p.decode_client_message(frame)
    except p.FrameError as exc:
        assert exc.code in (p.ErrorCode.INVALID_REQUEST, p.ErrorCode.UNKNOWN_COMMAND), exc.code
        assert exc.message and "\n" not in exc.message
        assert exc.path is None or exc.path.startswith("$"), exc.path
