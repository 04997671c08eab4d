"""What a task's next model request holds: the system prompt of its mode (and
of its agent, or of the agents it may call), the API history as a request sends
it, and the tools its mode allows.
"""

from __future__ import annotations

from pathlib import Path

from hdsp.daemon.agents import UnknownAgent, agent_prompt, agents_section
from hdsp.daemon.conversation import ApiMessage, ModelRequest
from hdsp.daemon.modes import Mode, instruction_sources, instructions_text
from hdsp.protocol import HistoryItem

from .deps import TaskDeps
from .prompt import system_prompt

__all__ = ["task_request", "task_system_prompt"]


def task_system_prompt(deps: TaskDeps, item: HistoryItem, mode: Mode) -> str:
    """The system prompt of the next request of the task `item`, in `mode`."""
    workspace = Path(item.workspace or ".")
    tools = deps.tools.scoped(workspace, item.id)
    kernels = deps.kernels
    sources = instruction_sources(
        workspace=workspace,
        mode=mode,
        global_instructions=deps.custom_instructions,
        task_instructions=item.custom_instructions,
    )
    return system_prompt(
        workspace=str(workspace),
        mode=f"{mode.slug} ({mode.name})",
        tools=[n for n in tools.names() if mode.allows(tools[n])],
        kernel=kernels.describe_for_task(item.id, workspace) if kernels else None,
        role=_agent_role(deps, item, mode) or mode.definition.role_definition,
        instructions=instructions_text(sources),
    )


def _agent_role(deps: TaskDeps, item: HistoryItem, mode: Mode) -> str | None:
    """An agent's task: the agent's part of the prompt (seed 002, §7); a task
    of a mode that may call agents: its role and the agents."""
    agents = deps.agents
    if item.agent is None:
        call_agent = deps.tools.get("call_agent")
        if call_agent is None or not mode.allows(call_agent):
            return None
        return mode.definition.role_definition + "\n\n" + agents_section(agents.all())
    try:
        return agent_prompt(agents.get(item.agent), agents.all())
    except UnknownAgent:
        return None


def task_request(
    deps: TaskDeps, item: HistoryItem, mode: Mode, messages: list[ApiMessage]
) -> ModelRequest:
    """The request of the task `item` in `mode` that sends `messages` (its API
    history, as a request sends it)."""
    tools = deps.tools.scoped(Path(item.workspace or "."), item.id)
    return ModelRequest(
        system=task_system_prompt(deps, item, mode),
        messages=messages,
        tools=[spec for spec in tools.specs() if mode.allows(tools[spec.name])],
    )
