"""How an agent is written in the settings (`agents`), and the operator's limits
on trees of agents (`agent_limits`); see :mod:`hdsp.daemon.agents`.

An agent has a name (what `call_agent` names it by), instructions (its part of
the system prompt), an optional profile (the model it talks to; the caller's
when absent), the tool groups it may use, and an optional mode whose groups and
role it takes instead. Unknown keys are refused, so a typo is an error.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .modes import ToolGroup

__all__ = ["AGENT_NAME_PATTERN", "AgentDefinition", "AgentLimits"]

#: An agent's name: a word a model writes without quoting.
AGENT_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class AgentDefinition(_Strict):
    name: str = Field(pattern=AGENT_NAME_PATTERN)
    instructions: str = Field(min_length=1, max_length=20_000)
    #: The provider profile its requests use; None: its caller's.
    profile: str | None = None
    groups: list[ToolGroup] = [ToolGroup.READ]
    #: A mode (slug) whose tool groups and file restriction it takes instead of `groups`.
    mode: str | None = None


class AgentLimits(_Strict):
    """An operator's safety net for trees of agents (never said in a prompt:
    the model hears of a limit only as the error of the call that hit it)."""

    #: How deep a tree may grow: a task at this depth (the root is 0) calls no agent.
    max_depth: int = Field(default=12, ge=1, le=1000)
    #: How many agent calls of one task may run at once.
    max_fan_out: int = Field(default=32, ge=1, le=10_000)
