"""`switch_mode`: the model asks to put its task in another mode (a person
approves unless `always_allow_mode_switch`). The task checks that the mode
exists, switches, and every client gets `taskModeSwitched`; the next request
offers the new mode's tools and prompt."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from .base import Tool, ToolCategory, ToolContext, ToolError, ToolResult

__all__ = ["SwitchMode", "TaskModes"]


class TaskModes(Protocol):
    """What the tool asks of its task (the service "modes")."""

    async def switch_mode(self, slug: str) -> str:
        """Switch; returns the mode's name. Raises ValueError for an unknown mode."""
        ...


class SwitchMode(Tool):
    name: ClassVar[str] = "switch_mode"
    description: ClassVar[str] = (
        "Ask to switch the task to another mode (for example from plan to analyst once the "
        "plan is agreed). A person may have to approve. The new mode's tools and "
        "instructions apply from the next step on."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "mode_slug": {"type": "string", "description": "The slug of the mode, e.g. analyst."},
            "reason": {"type": "string", "description": "Why the switch is needed."},
        },
        "required": ["mode_slug"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.MODE

    def approval_text(self, args: Mapping[str, Any]) -> str:
        return json.dumps(
            {"tool": "switchMode", "mode": args.get("mode_slug"), "reason": args.get("reason")}
        )

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        modes: TaskModes = ctx.service("modes")
        try:
            name = await modes.switch_mode(str(args["mode_slug"]))
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return ToolResult.text(
            f"Switched to {name} mode ({args['mode_slug']}). Its tools and instructions "
            "apply from now on."
        )
