"""Approvals: the auto-approval policy and the asks it leads to.

Its settings (:class:`~hdsp.daemon.config.ApprovalSettings`) live with the other
settings in :mod:`hdsp.daemon.config`; this package decides with them.
"""

from __future__ import annotations

from .policy import (
    DEFAULT_FOLLOWUP_TIMEOUT,
    ApprovalPolicy,
    Decision,
    Verdict,
    command_decision,
)

__all__ = [
    "DEFAULT_FOLLOWUP_TIMEOUT",
    "ApprovalPolicy",
    "Decision",
    "Verdict",
    "command_decision",
]
