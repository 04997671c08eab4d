"""Which tool group each tool belongs to: the one table a mode's tool list and
its refusals are computed from.

A tool named here is in that group; a tool named in `ALWAYS_AVAILABLE` is in
every mode (finishing, asking, switching mode, the todo list). A tool in neither
(one added later) falls in the group of its approval category, so it is never in
a mode by accident: a READ tool is read, a WRITE tool edit, and so on. Adding a
tool: add its row here.
"""

from __future__ import annotations

from typing import Final

from hdsp.daemon.config.modes import ToolGroup
from hdsp.daemon.tools.base import Tool, ToolCategory

__all__ = ["ALWAYS_AVAILABLE", "EDIT_GROUPS", "TOOL_GROUPS", "group_of"]

TOOL_GROUPS: Final[dict[str, ToolGroup]] = {
    # read: files, notebooks and kernel variables, looked at, never changed
    "read_file": ToolGroup.READ,
    "list_files": ToolGroup.READ,
    "search_files": ToolGroup.READ,
    "read_notebook": ToolGroup.READ,
    "list_variables": ToolGroup.READ,
    "describe_variable": ToolGroup.READ,
    # edit: files in the workspace
    "write_to_file": ToolGroup.EDIT,
    "edit_file": ToolGroup.EDIT,
    # command: the shell
    "execute_command": ToolGroup.COMMAND,
    # kernel: code run in a Jupyter kernel
    "execute_code": ToolGroup.KERNEL,
    "run_cell": ToolGroup.KERNEL,
    # notebook: changes to a notebook's cells
    "insert_cell": ToolGroup.NOTEBOOK,
    "edit_cell": ToolGroup.NOTEBOOK,
    "delete_cell": ToolGroup.NOTEBOOK,
    "move_cell": ToolGroup.NOTEBOOK,
    # mcp: none yet (use_mcp_tool when it lands)
    "use_mcp_tool": ToolGroup.MCP,
    "access_mcp_resource": ToolGroup.MCP,
    # agents: calling an agent, and returning to the caller (seed 002)
    "call_agent": ToolGroup.AGENTS,
    "finish": ToolGroup.AGENTS,
}

#: Tools every mode has.
ALWAYS_AVAILABLE: Final = frozenset(
    {"attempt_completion", "ask_followup_question", "switch_mode", "update_todo_list"}
)

#: Groups whose tools write files: a mode's `file_regex` restricts them.
EDIT_GROUPS: Final = frozenset({ToolGroup.EDIT, ToolGroup.NOTEBOOK})

_BY_CATEGORY: Final[dict[ToolCategory, ToolGroup]] = {
    ToolCategory.READ: ToolGroup.READ,
    ToolCategory.WRITE: ToolGroup.EDIT,
    ToolCategory.EXECUTE: ToolGroup.KERNEL,
    ToolCategory.COMMAND: ToolGroup.COMMAND,
    ToolCategory.MCP: ToolGroup.MCP,
    ToolCategory.SUBTASK: ToolGroup.AGENTS,
}


def group_of(tool: Tool) -> ToolGroup | None:
    """The group of `tool`; None for a tool every mode has."""
    if tool.name in ALWAYS_AVAILABLE:
        return None
    found = TOOL_GROUPS.get(tool.name)
    if found is not None:
        return found
    # A tool without a row: its approval category says what it does.
    return _BY_CATEGORY.get(tool.category, ToolGroup.COMMAND)
