"""The system prompt: role, rules and environment."""

from __future__ import annotations

import platform
import time

__all__ = ["system_prompt"]

_ROLE = (
    "You are hdsp, a data-science agent that works in Jupyter. You help the user "
    "explore data, write and run code, and explain results. Be concise and precise; "
    "show code when it helps; say plainly when you are unsure."
)


def system_prompt(
    *,
    workspace: str,
    mode: str,
    tools: list[str],
    kernel: str | None = None,
    role: str | None = None,
    instructions: str = "",
) -> str:
    """`kernel` describes the Jupyter kernel the task's code runs in, if any.

    The prompt's parts, in order: the mode's `role` (hdsp's own without one),
    ENVIRONMENT, TOOLS (the mode's), then the `instructions` section
    (:func:`hdsp.daemon.modes.instructions_text`: settings, mode, rules files,
    AGENTS.md, each with its source)."""
    lines = [
        role or _ROLE,
        "",
        "====",
        "",
        "ENVIRONMENT",
        f"- Workspace: {workspace}",
        f"- Mode: {mode}",
        *([f"- Jupyter kernel (execute_code, run_cell): {kernel}"] if kernel else []),
        f"- Operating system: {platform.system()} {platform.release()}",
        f"- Current time: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
    ]
    if tools:
        lines += ["", "TOOLS", *(f"- {name}" for name in tools)]
    if instructions:
        lines += ["", "====", "", instructions]
    return "\n".join(lines)
