"""Approvals: the auto-approval policy and the asks it leads to."""

from __future__ import annotations

from .policy import ApprovalPolicy, Decision, Verdict

__all__ = ["ApprovalPolicy", "Decision", "Verdict"]
