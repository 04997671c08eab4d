"""The tools a task can offer the model, with their arguments checked against
each tool's JSON Schema before anything runs.

Besides its own tools, a registry may have sources of tools that come and go
(MCP servers' tools, issue 23): :meth:`ToolRegistry.scoped` gives the view a
task in one workspace sees, and :meth:`ToolRegistry.prepare` lets the sources
get ready (start servers) before a task's model request.

jsonschema (a tenth of a second of CPU to import, more on a busy machine) is
not imported with this module: a tool's validator is made (and its schema
checked) by :meth:`ToolRegistry.warm`, which the daemon runs on a worker thread
after its first answer, or else when the tool's arguments are first checked.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread

from hdsp.daemon.conversation import ToolSpec

from .base import Tool

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["ToolRegistry", "ToolSource", "spec_of", "validator_of", "validator_ready"]

#: Each tool's validator, made once (a source's tools come and go with it).
_validators: weakref.WeakKeyDictionary[Tool, Validator] = weakref.WeakKeyDictionary()
#: Each tool's spec, made once: the same objects in every request (what a
#: provider or a token count derives from a spec can be kept by its identity).
_specs: weakref.WeakKeyDictionary[Tool, ToolSpec] = weakref.WeakKeyDictionary()


async def validator_ready(tool: Tool) -> None:
    """Make `tool`'s validator on a worker thread if it is not made yet: the first
    may import jsonschema, or wait for the warm-up that imports it (Python's
    import lock), and the event loop must never be the one that waits."""
    if tool not in _validators:
        await anyio.to_thread.run_sync(validator_of, tool)


def spec_of(tool: Tool) -> ToolSpec:
    """What a model is told of `tool` (never to be changed in place)."""
    spec = _specs.get(tool)
    if spec is None:
        spec = _specs[tool] = ToolSpec(
            name=tool.name, description=tool.description, parameters=dict(tool.parameters)
        )
    return spec


def validator_of(tool: Tool) -> Validator:
    """The validator of `tool`'s arguments, made (and its schema checked: a
    SchemaError if it is not one) the first time."""
    validator = _validators.get(tool)
    if validator is None:
        import jsonschema

        cls = jsonschema.validators.validator_for(tool.parameters)
        cls.check_schema(dict(tool.parameters))
        validator = _validators[tool] = cls(tool.parameters)
    return validator


class ToolSource(Protocol):
    """Tools that depend on the workspace (and on the task: tools a client offered
    it) and change while the daemon runs."""

    async def prepare(self, workspace: Path, task_id: str | None = None) -> None:
        """Get the tools of `workspace` (and of the task) ready (bounded in time
        by the source)."""
        ...

    def tools(self, workspace: Path, task_id: str | None = None) -> Sequence[Tool]:
        """The tools a task in `workspace` (the task `task_id`, if given) has now
        (their schemas already checked)."""
        ...


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: list[ToolSource] = []
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add `tool` (its schema is checked by :meth:`warm`, or when its arguments
        are first checked)."""
        if tool.name in self._tools:
            raise ValueError(f"A tool named {tool.name!r} is registered already.")
        self._tools[tool.name] = tool

    def warm(self) -> None:
        """Import jsonschema, check every tool's schema and make its validator
        (blocking: run on a worker thread; a SchemaError names a broken tool)."""
        for tool in self._tools.values():
            validator_of(tool)

    def add_source(self, source: ToolSource) -> None:
        self._sources.append(source)

    async def prepare(self, workspace: Path, task_id: str | None = None) -> None:
        for source in self._sources:
            await source.prepare(workspace, task_id)

    def scoped(self, workspace: Path, task_id: str | None = None) -> ToolRegistry:
        """The tools a task in `workspace` (the task `task_id`, if given) has:
        these and its sources' (a source's tool never replaces one of these)."""
        if not self._sources:
            return self
        view = ToolRegistry()
        view._tools = dict(self._tools)
        for source in self._sources:
            for tool in source.tools(workspace, task_id):
                if tool.name not in view._tools:
                    view._tools[tool.name] = tool
        return view

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def names(self) -> list[str]:
        return sorted(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [spec_of(t) for t in self._tools.values()]

    def validate(self, name: str, args: Mapping[str, Any]) -> list[str]:
        """Every problem with `args`, as sentences the model can act on."""
        validator = validator_of(self._tools[name])
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
        problems = []
        for error in errors:
            where = "/".join(str(p) for p in error.absolute_path) or "(the arguments)"
            problems.append(f"{where}: {error.message}")
        return problems
