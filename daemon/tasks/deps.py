"""What a task needs from the rest of the daemon, handed in typed: the store and
its journal, the providers, the tools, the approval policy, the retry policy,
the kernels (as the narrow :class:`TaskKernels` protocol, so that `tasks` knows
no kernel class), the limits and the clock.

The TaskManager builds one :class:`TaskDeps` and hands it to every task it loads;
changing a field (new settings) changes it for all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hdsp.daemon.agents import AgentCaller, AgentCatalog
from hdsp.daemon.approvals import ApprovalPolicy
from hdsp.daemon.checkpoints import CheckpointService
from hdsp.daemon.llm.registry import Providers
from hdsp.daemon.llm.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from hdsp.daemon.memory import SpikeReturn
from hdsp.daemon.modes import ModeCatalog, SlashCommands
from hdsp.daemon.store import Journal, Store
from hdsp.daemon.tools import ToolRegistry

from .call_limits import CallLimits

__all__ = ["MISTAKE_LIMIT", "TaskDeps", "TaskKernels", "now_ms"]

#: Consecutive tool errors before a task asks mistake_limit_reached.
MISTAKE_LIMIT = 3


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch (message timestamps)."""
    return int(time.time() * 1000)


class TaskKernels(Protocol):
    """What tasks ask of the kernel service (hdsp.daemon.kernels.KernelService)."""

    def describe_for_task(self, task_id: str, workspace: Path) -> str:
        """Which kernel the task's code runs in, in a line for the system prompt."""
        ...

    def has_kernel(self, kernel_id: str) -> bool: ...

    def check_provider(self, provider: str | None, profile: str | None) -> None:
        """Raise the kernel service's error (with what to do) when kernels cannot
        run where `provider` and `profile` say (no Jupyter server configured)."""
        ...

    def bind_task(self, task_id: str, kernel_id: str) -> None:
        """Run the task's code in the kernel `kernel_id` from now on."""
        ...

    def prewarm_for_task(self, task_id: str, workspace: str) -> None:
        """The task started: start its kernel ahead of its first code."""
        ...

    async def release_task(self, task_id: str) -> None:
        """The task is closed: shut down a kernel it started, forget its binding."""
        ...


@dataclass
class TaskDeps:
    """A task's collaborators. `closing` says whether the daemon is stopping (a
    finished turn then starts no queued message)."""

    store: Store
    journal: Journal
    providers: Providers
    tools: ToolRegistry
    approvals: ApprovalPolicy
    retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY
    kernels: TaskKernels | None = None
    #: Checkpoints of the workspace before each change (issue 20); None: none.
    checkpoints: CheckpointService | None = None
    mistake_limit: int = MISTAKE_LIMIT
    clock: Callable[[], int] = now_ms
    closing: Callable[[], bool] = field(default=lambda: False)
    #: The modes tasks can be in (built-in and the settings' custom ones).
    modes: ModeCatalog = field(default_factory=ModeCatalog)
    #: The `custom_instructions` setting: first in every prompt's instructions.
    custom_instructions: str = ""
    #: Slash commands (`/name` at the start of a prompt).
    slash_commands: SlashCommands = field(default_factory=SlashCommands)
    #: The agents tasks can run and call (seed 002), with the tree limits.
    agents: AgentCatalog = field(default_factory=AgentCatalog)
    #: Runs call_agent's child tasks (the task manager); None: no agent calls.
    subtasks: AgentCaller | None = None
    #: The limits on tool calls (per reply, at once per task and daemon-wide),
    #: with the daemon's slots: one object for every task (issue 32).
    call_limits: CallLimits = field(default_factory=CallLimits)
    #: Gives a turn's spike of memory back when it ends (a big plot's, say).
    memory: SpikeReturn = field(default_factory=SpikeReturn)
