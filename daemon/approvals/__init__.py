"""Approvals: the auto-approval policy, its settings, and the asks it leads to."""

from __future__ import annotations

from .policy import DEFAULT_FOLLOWUP_TIMEOUT, ApprovalPolicy, Decision, Verdict, command_decision
from .settings import ApprovalSettings

__all__ = [
    "DEFAULT_FOLLOWUP_TIMEOUT",
    "ApprovalPolicy",
    "ApprovalSettings",
    "Decision",
    "Verdict",
    "command_decision",
]
