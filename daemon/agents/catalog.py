"""The agents a task can be or call: the built-in ones, useful for data science,
and the settings' own (`agents`), which take a built-in one's name to replace it.

=========  ===============================================================
analyst    explores and models data in a kernel, edits notebooks and files
reviewer   checks an analysis, code or notebook and reports what is wrong
=========  ===============================================================

An agent's tools are its mode's if it names one, else its `groups`' (as a mode
of its own, `agent-NAME`); every agent may call agents and finish.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hdsp.daemon.config.agents import AgentDefinition, AgentLimits
from hdsp.daemon.config.modes import ModeDefinition, ToolGroup
from hdsp.daemon.errors import HdspError
from hdsp.daemon.modes import Mode, ModeCatalog
from hdsp.protocol import ErrorCode

__all__ = ["BUILT_IN_AGENTS", "AgentCatalog", "UnknownAgent"]

BUILT_IN_AGENTS: tuple[AgentDefinition, ...] = (
    AgentDefinition(
        name="analyst",
        instructions=(
            "A data analyst: loads, explores and models data by running Python in a "
            "Jupyter kernel, edits notebooks and files, and reports findings with the "
            "numbers that support them."
        ),
        groups=[
            ToolGroup.READ,
            ToolGroup.KERNEL,
            ToolGroup.NOTEBOOK,
            ToolGroup.EDIT,
            ToolGroup.AGENTS,
        ],
    ),
    AgentDefinition(
        name="reviewer",
        instructions=(
            "A careful reviewer: checks an analysis, code or notebook for mistakes "
            "(wrong statistics, data leakage, bugs, claims the numbers do not support) "
            "and reports what is wrong and how to fix it; changes nothing."
        ),
        groups=[ToolGroup.READ, ToolGroup.AGENTS],
    ),
)


class UnknownAgent(HdspError, LookupError):
    """No agent has the name asked for."""

    code = ErrorCode.INVALID_REQUEST


class AgentCatalog:
    """The built-in agents and the settings' (`custom`), with the tree limits."""

    def __init__(
        self,
        custom: Sequence[AgentDefinition] = (),
        limits: AgentLimits | None = None,
    ) -> None:
        found = {a.name: a for a in BUILT_IN_AGENTS}
        found.update({a.name: a for a in custom})
        self._agents = found
        self.limits = limits or AgentLimits()

    def all(self) -> list[AgentDefinition]:
        return list(self._agents.values())

    def get(self, name: str) -> AgentDefinition:
        agent = self._agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self._agents)) or "none"
            raise UnknownAgent(f"There is no agent named {name!r}. The agents are: {known}.")
        return agent

    def mode_of(self, agent: AgentDefinition, modes: ModeCatalog, workspace: Path) -> Mode:
        """The mode an agent's task works in: its own mode, or one made of its groups."""
        if agent.mode is not None:
            return modes.get(agent.mode, workspace)
        slug = "agent-" + agent.name.replace("_", "-")[:33]
        groups = list(agent.groups)
        if ToolGroup.AGENTS not in groups:
            groups.append(ToolGroup.AGENTS)  # every agent may call agents and finish
        definition = ModeDefinition(
            slug=slug, name=agent.name, role_definition=agent.instructions, groups=groups
        )
        return Mode(definition)
