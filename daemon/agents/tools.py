"""`call_agent` and `finish` (seed 002, §3 and §4), the tools by which agents
call each other: a call runs the named agent as a child task with a fresh
context, and what it returns (its `finish` message, or its last reply's text
when it ends without a tool call) becomes the caller's tool result.

The tool knows nothing of tasks: it asks the "agents" service of its context
(an :class:`AgentCaller`, the task manager's) to run the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from hdsp.daemon.tools.base import Tool, ToolCategory, ToolContext, ToolResult
from hdsp.protocol import Say

__all__ = ["CALL_AGENT", "FINISH", "AgentCaller", "CallAgent", "Finish", "agent_tools"]

CALL_AGENT = "call_agent"
FINISH = "finish"


class AgentCaller(Protocol):
    async def call_agent(
        self, caller_task_id: str, call_id: str, agent_name: str, message: str
    ) -> str:
        """Run `agent_name` with `message` as a child task of `caller_task_id` (or
        attach to the one call `call_id` started before a restart) and return what
        it returns; a ToolError says why it could not."""
        ...


class CallAgent(Tool):
    name: ClassVar[str] = CALL_AGENT
    description: ClassVar[str] = (
        "Call another agent. The agent will process your message and return a result when done."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "agent_name": {"type": "string", "description": "Name of the agent to call"},
            "message": {"type": "string", "description": "Message to send to the agent"},
        },
        "required": ["agent_name", "message"],
    }
    category: ClassVar[ToolCategory] = ToolCategory.SUBTASK

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        caller: AgentCaller = ctx.service("agents")
        call_id = str(ctx.service("call_key"))
        returned = await caller.call_agent(
            ctx.task_id, call_id, str(args["agent_name"]), str(args["message"])
        )
        return ToolResult.text(returned)


class Finish(Tool):
    name: ClassVar[str] = FINISH
    description: ClassVar[str] = (
        "Finish the current task and return a result to the caller. The caller may be a "
        "user or another agent."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "Result message to return"}},
        "required": ["message"],
    }
    category: ClassVar[ToolCategory] = ToolCategory.COMPLETION

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        await ctx.say(Say.COMPLETION_RESULT, str(args["message"]))
        result = ToolResult.text("The result was returned to the caller.")
        result.completes_task = True
        return result


def agent_tools() -> list[Tool]:
    return [CallAgent(), Finish()]
