"""Tools the agent can call, and their registry.

The daemon imports this package with the rest of its engine, after it answers its
first client (see :mod:`hdsp.daemon.app`): jsonschema and the kernel service come
with it.
"""

from __future__ import annotations

from hdsp.daemon.sandbox import Sandbox

from .base import AskAnswer, Tool, ToolCategory, ToolContext, ToolContextBase, ToolError, ToolResult
from .completion import AttemptCompletion
from .files import EditFile, ListFiles, ReadFile, SearchFiles, WriteToFile
from .followup import AskFollowupQuestion
from .kernel_tools import ExecuteCodeTool
from .notebook_hosts import NotebookHosts
from .notebook_tools import notebook_tools
from .registry import ToolRegistry
from .shell import ExecuteCommand
from .switch_mode import SwitchMode
from .todo_list import UpdateTodoList
from .variable_tools import DescribeVariableTool, ListVariablesTool
from .workspace import IgnoredPathError, OutsideWorkspaceError, PathNotFoundError, Workspace

__all__ = [
    "AskAnswer",
    "AskFollowupQuestion",
    "AttemptCompletion",
    "DescribeVariableTool",
    "EditFile",
    "ExecuteCodeTool",
    "ExecuteCommand",
    "IgnoredPathError",
    "ListFiles",
    "ListVariablesTool",
    "OutsideWorkspaceError",
    "PathNotFoundError",
    "ReadFile",
    "SearchFiles",
    "SwitchMode",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolContextBase",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "UpdateTodoList",
    "Workspace",
    "WriteToFile",
    "default_tools",
]


def default_tools(
    sandbox: Sandbox | None = None, *, documents: NotebookHosts | None = None
) -> ToolRegistry:
    """The tools every task gets; shell commands run in `sandbox`; the notebook
    tools edit the notebooks `documents` holds open there."""
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
            ListVariablesTool(),
            DescribeVariableTool(),
            *notebook_tools(documents=documents),
            SwitchMode(),
            UpdateTodoList(),
        ]
    )
