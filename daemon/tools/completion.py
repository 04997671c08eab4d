"""attempt_completion: the agent says it is done and presents its result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hdsp.protocol import Say

from .base import Tool, ToolCategory, ToolContext, ToolResult

__all__ = ["AttemptCompletion"]


class AttemptCompletion(Tool):
    name: ClassVar[str] = "attempt_completion"
    description: ClassVar[str] = (
        "Present the final result of the task to the user once the work is done and "
        "verified. Write the result so it stands alone (no questions, no offers of "
        "further help). The user may reply to continue the conversation."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "result": {"type": "string", "description": "The final result, for the user."}
        },
        "required": ["result"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.COMPLETION

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        await ctx.say(Say.COMPLETION_RESULT, str(args["result"]))
        result = ToolResult.text("The result was presented to the user.")
        result.completes_task = True
        return result
