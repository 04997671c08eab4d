"""An agent's part of the system prompt (seed 002, §7): its name and
instructions, the other agents with theirs, and how to call one and finish.
Nothing about providers, models or limits."""

from __future__ import annotations

from collections.abc import Sequence

from hdsp.daemon.config.agents import AgentDefinition

__all__ = ["agent_prompt", "agents_section"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def agent_prompt(agent: AgentDefinition, agents: Sequence[AgentDefinition]) -> str:
    """The prompt of `agent`, among `agents` (itself left out of the list)."""
    others = [a for a in agents if a.name != agent.name]
    lines = [f'You are "{agent.name}". {agent.instructions}', ""]
    lines.append("Available agents:")
    lines += [f"- {a.name}: {_one_line(a.instructions)}" for a in others] or ["(none)"]
    lines += [
        "",
        "Use call_agent to delegate work to other agents.",
        "Use finish to complete your task and return the result.",
    ]
    return "\n".join(lines)


def agents_section(agents: Sequence[AgentDefinition]) -> str:
    """For a task that is no agent but may call them (its mode has the agents
    group): the agents, and how to call one."""
    lines = ["Available agents:"]
    lines += [f"- {a.name}: {_one_line(a.instructions)}" for a in agents] or ["(none)"]
    lines += ["", "Use call_agent to delegate work to other agents."]
    return "\n".join(lines)
