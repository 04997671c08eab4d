"""Approvals: the auto-approval policy, its settings, and the asks it leads to.

The policy (with pathspec and the tools' workspace behind it) is imported when
first used (PEP 562): the settings import `.settings` before the daemon answers
its first client, and need nothing else from here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .policy import (
        DEFAULT_FOLLOWUP_TIMEOUT,
        ApprovalPolicy,
        Decision,
        Verdict,
        command_decision,
    )
    from .settings import ApprovalSettings

__all__ = [
    "DEFAULT_FOLLOWUP_TIMEOUT",
    "ApprovalPolicy",
    "ApprovalSettings",
    "Decision",
    "Verdict",
    "command_decision",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = ".settings" if name == "ApprovalSettings" else ".policy"
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
