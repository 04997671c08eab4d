"""Agents that call agents (seed 002): their definitions, their prompt, and the
`call_agent` and `finish` tools. The child tasks themselves are the task
manager's (:mod:`hdsp.daemon.tasks.subtasks`)."""

from __future__ import annotations

from .catalog import BUILT_IN_AGENTS, AgentCatalog, UnknownAgent
from .prompt import agent_prompt, agents_section
from .tools import CALL_AGENT, FINISH, AgentCaller, CallAgent, Finish, agent_tools

__all__ = [
    "BUILT_IN_AGENTS",
    "CALL_AGENT",
    "FINISH",
    "AgentCaller",
    "AgentCatalog",
    "CallAgent",
    "Finish",
    "UnknownAgent",
    "agent_prompt",
    "agent_tools",
    "agents_section",
]
