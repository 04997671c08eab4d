"""The tools a task can offer the model, with their arguments checked against
each tool's JSON Schema before anything runs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema

from hdsp.daemon.conversation import ToolSpec

from .base import Tool

__all__ = ["ToolRegistry"]


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"A tool named {tool.name!r} is registered already.")
        cls = jsonschema.validators.validator_for(tool.parameters)
        cls.check_schema(dict(tool.parameters))
        self._tools[tool.name] = tool
        self._validators[tool.name] = cls(tool.parameters)

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
