"""The command table holds together: every command of the protocol has exactly
one row, one arm in the daemon's table (hdsp.daemon.commands) and one method on
the client (hdsp.client.Client), and each row's result is the one its command
struct is typed with. Read off the sources, so no daemon runs here."""

from __future__ import annotations

import ast
import inspect
import typing
from collections import Counter
from pathlib import Path

import pytest

from hdsp import protocol as p
from hdsp.daemon import commands as daemon_commands
from hdsp.protocol import CommandBase

ROOT = Path(__file__).parents[2]
NAMES = set(p.COMMANDS)


def _class_names(pattern: ast.pattern) -> list[str]:
    """The classes a `case` pattern matches (`A()`, `A() | B()`)."""
    match pattern:
        case ast.MatchClass(cls=ast.Name(id=name)):
            return [name]
        case ast.MatchOr(patterns=alternatives):
            return [name for alt in alternatives for name in _class_names(alt)]
    return []


def _arms(source: str) -> Counter[str]:
    """How many `case` arms of the module's match statements name each class."""
    arms: Counter[str] = Counter()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.match_case):
            arms.update(_class_names(node.pattern))
    return arms


def _client_methods(source: str, name: str = "Client") -> dict[str, list[str]]:
    """For each command class, the methods of the class `name` that construct it."""
    (client,) = (
        n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name
    )
    found: dict[str, list[str]] = {}
    for method in client.body:
        if not isinstance(method, ast.AsyncFunctionDef | ast.FunctionDef):
            continue
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in NAMES
            ):
                found.setdefault(node.func.id, []).append(method.name)
    return found


def test_every_command_has_exactly_one_arm_in_the_daemons_table() -> None:
    source = Path(daemon_commands.__file__).read_text()
    arms = _arms(source)
    missing = NAMES - set(arms)
    assert not missing, f"no arm in hdsp.daemon.commands for {sorted(missing)}"
    several = {name: n for name, n in arms.items() if n != 1}
    assert not several, f"commands with more than one arm: {several}"
    unknown = set(arms) - NAMES
    assert not unknown, f"arms for what the protocol does not have: {sorted(unknown)}"


def test_every_command_has_exactly_one_client_method() -> None:
    # `Client` is its connection and the groups of typed requests it derives from
    # (clients/client_tasks.py, ...): the methods of all of them.
    from hdsp.client import Client

    methods: dict[str, list[str]] = {}
    parts = [cls for cls in Client.__mro__ if cls.__module__.startswith("hdsp.client")]
    assert len(parts) > 1
    for cls in parts:
        source = Path(inspect.getfile(cls)).read_text()
        for command, names in _client_methods(source, cls.__name__).items():
            methods.setdefault(command, []).extend(names)
    missing = NAMES - set(methods)
    assert not missing, f"no Client method sends {sorted(missing)}"
    several = {name: m for name, m in methods.items() if len(m) != 1}
    assert not several, f"commands sent by more than one Client method: {several}"


def test_the_checks_see_a_missing_and_a_doubled_command() -> None:
    # The two checks above, on sources that break them.
    arms = _arms("match c:\n    case GetTask(): pass\n    case Ping() | GetTask(): pass\n")
    assert arms["GetTask"] == 2 and arms["Ping"] == 1 and arms["Replay"] == 0
    methods = _client_methods(
        "class Client:\n"
        "    async def a(self): return await self.request(GetTask(data=x))\n"
        "    async def b(self): return await self.request(GetTask(data=y))\n"
    )
    assert methods == {"GetTask": ["a", "b"]}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_a_rows_result_is_the_one_its_command_is_typed_with(name: str) -> None:
    spec = p.COMMANDS[name]
    assert spec.request.__struct_config__.tag == name
    (base,) = (b for b in spec.request.__orig_bases__ if typing.get_origin(b) is CommandBase)
    (declared,) = typing.get_args(base)
    if isinstance(declared, typing.ForwardRef):
        declared = getattr(p, declared.__forward_arg__)
    assert (type(None) if declared is None else declared) is spec.result


def test_the_ordering_key_is_the_task_a_command_names() -> None:
    task = "t-1"
    ordered = [
        p.CancelTask(task_id=task),
        p.CloseTask(task_id=task),
        p.ResumeTask(data=task),
        p.SendMessage(task_id=task),
        p.RespondToAsk(
            task_id=task, data=p.RespondToAskData(ask_ts=1, response="yesButtonClicked")
        ),
        p.DeleteQueuedMessage(task_id=task, data="m"),
        p.GetTask(data=p.GetTaskData(task_id=task)),
        p.GetTaskPage(data=p.GetTaskPageData(task_id=task)),
    ]
    for command in ordered:
        assert p.ordering_key(command) == task, command
    concurrent = [
        p.StartNewTask(data=p.StartNewTaskData(text="hi")),
        p.ListTasks(),
        p.Replay(data=p.ReplayData(since_seq=0, task_id=task)),
        p.Ping(),
        p.InterruptKernel(kernel_id="k"),
        p.ExecuteCode(kernel_id="k", code="1"),
        p.GetSettings(),
    ]
    for command in concurrent:
        assert p.ordering_key(command) is None, command
    # Every command kind has an ordering that answers (a key or None).
    assert {type(c).__name__ for c in ordered + concurrent} <= NAMES
