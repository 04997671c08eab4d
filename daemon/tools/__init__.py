"""Tools the agent can call, and their registry."""

from __future__ import annotations

from .base import AskAnswer, Tool, ToolCategory, ToolContext, ToolError, ToolResult
from .completion import AttemptCompletion
from .registry import ToolRegistry

__all__ = [
    "AskAnswer",
    "AttemptCompletion",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "default_tools",
]


def default_tools() -> ToolRegistry:
    """The tools every task gets."""
    return ToolRegistry([AttemptCompletion()])
