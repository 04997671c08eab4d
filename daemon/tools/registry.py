"""The tools a task can offer the model, with their arguments checked against
each tool's JSON Schema before anything runs.

Besides its own tools, a registry may have sources of tools that come and go
(MCP servers' tools, issue 23): :meth:`ToolRegistry.scoped` gives the view a
task in one workspace sees, and :meth:`ToolRegistry.prepare` lets the sources
get ready (start servers) before a task's model request.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import jsonschema

from hdsp.daemon.conversation import ToolSpec

from .base import Tool

__all__ = ["ToolRegistry", "ToolSource"]


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
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self._sources: list[ToolSource] = []
        self._source_validators: weakref.WeakKeyDictionary[Tool, jsonschema.protocols.Validator] = (
            weakref.WeakKeyDictionary()
        )
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"A tool named {tool.name!r} is registered already.")
        cls = jsonschema.validators.validator_for(tool.parameters)
        cls.check_schema(dict(tool.parameters))
        self._tools[tool.name] = tool
        self._validators[tool.name] = cls(tool.parameters)

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
        view._validators = dict(self._validators)
        for source in self._sources:
            for tool in source.tools(workspace, task_id):
                if tool.name in view._tools:
                    continue
                validator = self._source_validators.get(tool)
                if validator is None:
                    cls = jsonschema.validators.validator_for(tool.parameters)
                    validator = self._source_validators[tool] = cls(tool.parameters)
                view._tools[tool.name] = tool
                view._validators[tool.name] = validator
        return view

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def names(self) -> list[str]:
        return sorted(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name=t.name, description=t.description, parameters=dict(t.parameters))
            for t in self._tools.values()
        ]

    def validate(self, name: str, args: Mapping[str, Any]) -> list[str]:
        """Every problem with `args`, as sentences the model can act on."""
        errors = sorted(self._validators[name].iter_errors(args), key=lambda e: list(e.path))
        problems = []
        for error in errors:
            where = "/".join(str(p) for p in error.absolute_path) or "(the arguments)"
            problems.append(f"{where}: {error.message}")
        return problems
