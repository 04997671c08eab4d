"""Checkpoints (issue 20): shadow git repositories of workspaces, checkpoints
tied to tasks and their messages, diffs, restores, and kernel state by replay."""

from __future__ import annotations

from .executions import NO_REPLAY_MARK, ExecutionRecord, replay_plan
from .notebook_diff import notebook_diff
from .pending import PendingReplay
from .replay import VARIABLES_CODE, replay_kernel, skip_reason
from .service import Announce, CheckpointService
from .shadow import (
    REFUSED_WORKSPACES,
    GitFailed,
    SavedTree,
    ShadowRepo,
    WorkspaceRefused,
    refusal,
)

__all__ = [
    "NO_REPLAY_MARK",
    "REFUSED_WORKSPACES",
    "VARIABLES_CODE",
    "Announce",
    "CheckpointService",
    "ExecutionRecord",
    "GitFailed",
    "PendingReplay",
    "SavedTree",
    "ShadowRepo",
    "WorkspaceRefused",
    "notebook_diff",
    "refusal",
    "replay_kernel",
    "replay_plan",
    "skip_reason",
]
