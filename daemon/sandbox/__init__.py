"""The OS sandbox for everything the agent runs (shell commands and kernels);
see :mod:`.sandbox` for the policy, the mechanism and the modes."""

from __future__ import annotations

from .environment import child_environment
from .layout import MountLayout, bwrap_argv
from .sandbox import HIDDEN_IN_HOME, Sandbox, SandboxUnavailable

__all__ = [
    "HIDDEN_IN_HOME",
    "MountLayout",
    "Sandbox",
    "SandboxUnavailable",
    "bwrap_argv",
    "child_environment",
]
