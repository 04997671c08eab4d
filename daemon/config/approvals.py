"""The auto-approval settings of seed 004: which tool calls run without asking a
person, which commands are always allowed or always refused, which paths always
need a person, and how long an unattended task waits for an answer.

They are a pydantic model so that the daemon's settings file can hold them (the
settings model nests this one) and so that a client's per-task configuration
(`StartNewTask.configuration`) is validated before it changes anything; see
`ApprovalSettings.with_overrides`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ApprovalSettings"]

#: Names a client may use in a per-task configuration besides the field names
#: themselves and their camelCase spellings: Roo-Code's own settings keys for the
#: same switches, so that a Roo-style configuration object works unchanged.
#: (Roo's `alwaysAllowExecute` means shell commands; in hdsp it is the camelCase of
#: `always_allow_execute`, code in a kernel, and keeps that meaning.)
_ROO_NAMES: dict[str, str] = {
    "alwaysAllowFollowupQuestions": "always_allow_followup",
    "allowedMaxRequests": "max_auto_approved_requests",
    "allowedMaxCost": "max_auto_approved_cost",
}

#: Roo's timeout keys are in milliseconds; hdsp's fields are in seconds.
_ROO_MILLISECONDS: dict[str, str] = {
    "followupAutoApproveTimeoutMs": "followup_timeout_seconds",
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class ApprovalSettings(BaseModel):
    """What may run without a person saying yes (seed 004, section 4)."""

    model_config = ConfigDict(extra="allow")

    #: read_file, list_files, search_files.
    always_allow_read_only: bool = True
    #: write_to_file, edit_file (protected paths still ask).
    always_allow_write: bool = False
    #: Code run in a Jupyter kernel.
    always_allow_execute: bool = False
    #: Shell commands (execute_command), after `allowed_commands`/`denied_commands`.
    always_allow_command: bool = False
    always_allow_mcp: bool = False
    always_allow_subtasks: bool = False
    #: Follow-up questions with suggestions are answered with the first suggestion
    #: when nobody answers within `followup_timeout_seconds` (60 s when unset).
    always_allow_followup: bool = False
    #: update_todo_list (the model's own checklist; Roo's alwaysAllowUpdateTodoList).
    always_allow_update_todo_list: bool = True
    #: switch_mode (Roo's alwaysAllowModeSwitch); off: a person is asked.
    always_allow_mode_switch: bool = False
    #: Command prefixes run without asking ("git status", "ls"); "*" allows all.
    allowed_commands: list[str] = []
    #: Command prefixes always refused; a denial wins over an allowance.
    denied_commands: list[str] = []
    #: Extra gitignore-style patterns whose writes always ask a person, on top of
    #: `.hdspignore`, `.git/` and `.hdsp/`.
    protected_paths: list[str] = []
    #: After this many auto-approved calls in one task, a person is asked
    #: (`auto_approval_max_req_reached`) before the next one; None: no cap.
    max_auto_approved_requests: int | None = None
    #: Once the task's model requests cost this much (USD, the task's tree of
    #: agents counted as one) a person is asked, as at `max_auto_approved_requests`,
    #: before the next automatic approval; None: no cap.
    max_auto_approved_cost: float | None = Field(default=None, ge=0)
    #: A waiting approval is denied after this long (unattended runs); None: wait.
    approval_timeout_seconds: float | None = None
    #: A follow-up question with suggestions is answered with its first suggestion
    #: after this long; None: wait (unless `always_allow_followup`).
    followup_timeout_seconds: float | None = None

    def with_overrides(self, overrides: Mapping[str, Any]) -> ApprovalSettings:
        """A copy with the approval keys of `overrides` applied and validated.

        `overrides` is typically a client's whole `StartNewTask.configuration`, so
        keys that are not approval settings are ignored. Keys may be field names,
        their camelCase spellings, or Roo-Code's names for the same switches.
        Raises pydantic's ValidationError (a ValueError) for a bad value, naming it.
        """
        names: dict[str, str] = {}
        for field in type(self).model_fields:
            names[field] = field
            names[_camel(field)] = field
        names.update(_ROO_NAMES)
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            if key in names:
                changes[names[key]] = value
            elif key in _ROO_MILLISECONDS and isinstance(value, int | float):
                changes[_ROO_MILLISECONDS[key]] = value / 1000
        if not changes:
            return self.model_copy()
        merged = self.model_dump()
        merged.update(changes)
        return type(self).model_validate(merged)
