"""Agents (seed 002) on the wire: `ListAgents` lists the agents a task can run
(`TaskConfiguration.agent`) and call (`call_agent`): the built-in ones and the
settings' (`agents`, which `UpdateSettings` changes)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ._base import CommandBase, WireStruct

__all__ = ["AgentInfo", "AgentList", "ListAgents"]


class AgentInfo(WireStruct, frozen=True):
    name: str
    instructions: str
    profile: Annotated[
        str | None, Meta(description="The provider profile it uses; None: its caller's.")
    ] = None
    groups: Annotated[list[str], Meta(description="The tool groups it may use.")] = []
    mode: Annotated[
        str | None, Meta(description="A mode whose tools it takes instead of `groups`.")
    ] = None
    source: Literal["built-in", "settings"] = "built-in"


class AgentList(WireStruct, frozen=True):
    agents: list[AgentInfo]
    max_depth: Annotated[
        int, Meta(description="How deep a tree of agents may grow (agent_limits).")
    ] = 0
    max_fan_out: Annotated[
        int, Meta(description="How many agent calls of one task may run at once.")
    ] = 0


class ListAgents(CommandBase[AgentList], tag="ListAgents", frozen=True):
    """The agents, built-in and the settings'."""
