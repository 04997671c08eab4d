"""The tool registry checks schemas and arguments with jsonschema, which it
imports only when the daemon's warm-up (or a first check) needs it."""

from __future__ import annotations

import jsonschema
import pytest

from hdsp.daemon.agents import agent_tools
from hdsp.daemon.tools import (
    Tool,
    ToolCategory,
    ToolContext,
    ToolRegistry,
    ToolResult,
    default_tools,
)


class _Broken(Tool):
    name = "broken"
    description = "a tool whose schema is not a JSON Schema"
    parameters = {"type": "object", "properties": {"x": {"type": 12}}}
    category = ToolCategory.READ

    async def execute(self, ctx: ToolContext, args: object) -> ToolResult:
        raise AssertionError("never called")


def test_every_tool_the_daemon_makes_has_a_valid_schema() -> None:
    registry = default_tools()
    for tool in agent_tools():
        registry.register(tool)
    registry.warm()  # raises SchemaError for a broken schema
    assert "read_file" in registry.names()


def test_warm_names_a_broken_schema_and_validate_checks_arguments() -> None:
    registry = ToolRegistry([_Broken()])
    with pytest.raises(jsonschema.SchemaError):
        registry.warm()
    ok = default_tools()
    assert ok.validate("read_file", {"path": "a.txt"}) == []
    problems = ok.validate("read_file", {})
    assert problems == ["(the arguments): 'path' is a required property"]
