"""Property: whatever arguments a model sends a tool (any JSON, any size, any
nesting, or no JSON at all), every one of the default tools answers with a
result and never fails inside hdsp; arguments its JSON Schema refuses get the
validation's error, which comes before the tool runs. The real tools, the real
tool-call machine (hdsp.daemon.tasks.calls) over a real store; every approval
the policy asks for is answered no."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hdsp.daemon.config import ApprovalSettings
from hdsp.daemon.conversation import TextBlock
from hdsp.daemon.llm.sdk import parse_arguments
from hdsp.daemon.tasks.asks import AskBox
from hdsp.daemon.tasks.calls import ToolCalls
from hdsp.daemon.tasks.turn import CallState
from hdsp.daemon.tools import AskAnswer, default_tools
from hdsp.daemon.tools.registry import validator_of
from hdsp.protocol import AskResponse, Event, TaskState
from tests.support.task_parts import Parts, open_parts

pytestmark = pytest.mark.timeout(120)

_TOOLS = default_tools()
_NAMES = sorted(_TOOLS.names())

_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    # Any size: long strings too (a path, a regex, a cell's source).
    st.integers(1_000, 200_000).map(lambda n: "x" * n),
)
_json: st.SearchStrategy[Any] = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


_ODD_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", ".", "..", "../../etc/passwd", "/etc/passwd", "a\x00b", "~", "-rf", "("]),
    st.integers(1_000, 200_000).map(lambda n: "x" * n),
)


def _valid(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values the (simple) JSON Schema `schema` accepts, mostly: odd ones (long,
    empty, outside the workspace) that only the tool itself can refuse."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return _ODD_TEXT
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**63)), schema.get("maximum", 2**63))
    if kind == "number":
        return st.floats(0.001, schema.get("maximum", 1e9))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = _valid(schema.get("items", {}))
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=3)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: _valid(v) for k, v in props.items() if k in required},
            optional={k: _valid(v) for k, v in props.items() if k not in required},
        )
    return _json


def _shaped(name: str) -> st.SearchStrategy[Any]:
    """Arguments the tool's schema accepts (so that the tool itself meets odd
    values), or objects of its own property names holding any JSON."""
    schema = dict(_TOOLS[name].parameters)
    props = list(schema.get("properties", {}))
    loose = st.dictionaries(st.sampled_from(props or ["x"]), _json, max_size=len(props) + 1)
    return _valid(schema) | loose


def _raw(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(st.sampled_from(_NAMES))
    kind = draw(st.sampled_from(["json", "shaped", "shaped", "text"]))
    if kind == "text":
        return name, draw(st.text(max_size=60))  # not JSON, mostly
    value = draw(_json) if kind == "json" else draw(_shaped(name))
    return name, json.dumps(value)


_calls = st.composite(_raw)()


class _Rig:
    """The tool-call machine of a task, with every approval answered no."""

    def __init__(self, parts: Parts) -> None:
        self.messages = parts.messages()
        self.asks = AskBox(self.messages, self._set_state, parts.deps.clock)
        self.calls = ToolCalls(parts.deps, self.messages, self.asks, parts.workspace, self._save)
        self._asked = anyio.Event()

    async def _save(self) -> None:
        pass

    async def _set_state(self, state: TaskState, event: Event) -> None:
        if state is TaskState.INTERACTIVE:
            self._asked.set()

    async def run(self, call: CallState) -> None:
        async with anyio.create_task_group() as tg:

            async def answer_no() -> None:
                while True:
                    await self._asked.wait()
                    self._asked = anyio.Event()
                    ask = self.asks.pending
                    if ask is not None:
                        await self.asks.respond(ask.ts, AskAnswer(AskResponse.NO))

            tg.start_soon(answer_no)
            with anyio.fail_after(20):
                await self.calls.run(call)
            tg.cancel_scope.cancel()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BlockingPortal, _Rig]]:
    root: Path = tmp_path_factory.mktemp("tool-arguments")
    tools = [_TOOLS[n] for n in _NAMES]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(open_parts(root, tools=tools)) as parts,
    ):

        async def make() -> _Rig:
            # Writes run (in the test's workspace); commands and code are asked
            # about, and refused.
            parts.deps.approvals.settings = ApprovalSettings(always_allow_write=True)
            return _Rig(parts)

        yield portal, portal.call(make)


def _text(call: CallState) -> str:
    return " ".join(b.text for b in call.result or [] if isinstance(b, TextBlock))


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_calls)
@example(("read_file", json.dumps({"path": "x" * 100_000})))
@example(("search_files", json.dumps({"path": ".", "regex": "("})))
@example(("execute_code", "[1, 2]"))
@example(("write_to_file", "{not json"))
def test_any_arguments_get_a_result_and_bad_ones_the_validation_error(
    rig: tuple[BlockingPortal, _Rig], call_args: tuple[str, str]
) -> None:
    portal, machine = rig
    name, raw = call_args
    arguments = parse_arguments(raw)
    call = CallState(id="call-1", name=name, arguments=arguments, raw_arguments=raw)
    portal.call(machine.run, call)
    text = _text(call)
    assert call.status == "done" and call.result, call
    assert "failed inside hdsp" not in text, (name, raw[:300], text)
    if arguments is None:
        assert call.is_error and f"the arguments of {name} are not valid JSON" in text
    elif list(validator_of(_TOOLS[name]).iter_errors(arguments)):
        assert call.is_error and text.startswith(f"Error: invalid arguments for {name}:"), text
