"""Tools the agent can call, and their registry.

The names below are imported when first used (PEP 562), not with the package. The
daemon's config imports the approvals, which need only `.base` and `.workspace`,
before the daemon answers its first client; the tools themselves, with jsonschema
and the kernel service behind them, are loaded after that (see
:mod:`hdsp.daemon.app`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hdsp.daemon.sandbox import Sandbox

    from .base import AskAnswer, Tool, ToolCategory, ToolContext, ToolError, ToolResult
    from .completion import AttemptCompletion
    from .files import EditFile, ListFiles, ReadFile, SearchFiles, WriteToFile
    from .followup import AskFollowupQuestion
    from .kernel_tools import ExecuteCodeTool
    from .registry import ToolRegistry
    from .shell import ExecuteCommand
    from .workspace import IgnoredPathError, OutsideWorkspaceError, PathNotFoundError, Workspace

__all__ = [
    "AskAnswer",
    "AskFollowupQuestion",
    "AttemptCompletion",
    "EditFile",
    "ExecuteCodeTool",
    "ExecuteCommand",
    "IgnoredPathError",
    "ListFiles",
    "OutsideWorkspaceError",
    "PathNotFoundError",
    "ReadFile",
    "SearchFiles",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "Workspace",
    "WriteToFile",
    "default_tools",
]

#: Where each public name lives.
_MODULES: dict[str, str] = {
    "AskAnswer": ".base",
    "Tool": ".base",
    "ToolCategory": ".base",
    "ToolContext": ".base",
    "ToolError": ".base",
    "ToolResult": ".base",
    "AttemptCompletion": ".completion",
    "EditFile": ".files",
    "ListFiles": ".files",
    "ReadFile": ".files",
    "SearchFiles": ".files",
    "WriteToFile": ".files",
    "AskFollowupQuestion": ".followup",
    "ExecuteCodeTool": ".kernel_tools",
    "ToolRegistry": ".registry",
    "ExecuteCommand": ".shell",
    "IgnoredPathError": ".workspace",
    "OutsideWorkspaceError": ".workspace",
    "PathNotFoundError": ".workspace",
    "Workspace": ".workspace",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULES})


def default_tools(sandbox: Sandbox | None = None) -> ToolRegistry:
    """The tools every task gets; shell commands run in `sandbox`."""
    from .completion import AttemptCompletion
    from .files import EditFile, ListFiles, ReadFile, SearchFiles, WriteToFile
    from .followup import AskFollowupQuestion
    from .kernel_tools import ExecuteCodeTool
    from .notebook_tools import notebook_tools
    from .registry import ToolRegistry
    from .shell import ExecuteCommand

    return ToolRegistry(
        [
            AttemptCompletion(),
            ReadFile(),
            WriteToFile(),
            EditFile(),
            ListFiles(),
            SearchFiles(),
            ExecuteCommand(sandbox=sandbox),
            AskFollowupQuestion(),
            ExecuteCodeTool(),
            *notebook_tools(),
        ]
    )
