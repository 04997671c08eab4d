"""Whether a tool call may run without asking: approve, deny, or ask a person.

This first policy approves everything; the settings-driven policy of seed 004
(per-category switches, command prefixes, protected files, request caps) keeps
this interface."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hdsp.daemon.tools.base import Tool

__all__ = ["ApprovalPolicy", "Decision", "Verdict"]


class Decision(enum.StrEnum):
    APPROVE = "approve"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    #: Why, for a denial the model reads or an ask a person reads.
    reason: str = ""


class ApprovalPolicy:
    def decide(self, tool: Tool, args: Mapping[str, Any], *, task_id: str) -> Verdict:
        return Verdict(Decision.APPROVE)
