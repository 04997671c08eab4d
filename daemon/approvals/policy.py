"""Whether a tool call may run without asking: approve, deny, or ask a person.

The rules are seed 004's auto-approval, driven by `ApprovalSettings`:

1. attempt_completion always runs; so does a follow-up question (asking *is* the
   person's turn), with a default answer after a timeout when configured.
2. A write to a path outside the workspace or hidden by `.hdspignore` is denied
   (the tool would refuse it; asking a person first would waste their time).
3. Shell commands are parsed (`commands.py`): a command that runs anything
   matching a denied prefix is denied, whatever else says yes; with a deny list,
   one the parser cannot see into asks; one whose every simple command matches
   an allowed prefix, with nothing else that runs or writes, is approved;
   otherwise `always_allow_command` decides.
4. A write to a protected path (`.hdspignore`, `.git/`, `.hdsp/`, the user's
   `protected_paths`) always asks, even with `always_allow_write`.
5. Otherwise the category's always-allow switch decides: on approves, off asks.
6. Every automatic approval counts against the task's `max_auto_approved_requests`,
   and what its model requests cost (`add_cost`) against `max_auto_approved_cost`;
   at a cap the verdict asks instead and says why (`cap_reached`), and the task
   asks `auto_approval_max_req_reached` and calls `reset_count` on a yes.

The counts are kept by the key the task gives (a tree of agents gives its root's,
so its caps count the whole tree).

A verdict that asks carries the timeout after which an unattended task stops
waiting, and what happens then (`on_timeout`, `default_answer`). The policy only
decides; the task posts the asks and applies the timeouts.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from hdsp.daemon.config.approvals import ApprovalSettings
from hdsp.daemon.tools.base import Tool, ToolCategory, ToolError
from hdsp.daemon.tools.workspace import Workspace, gitignore_spec

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

from .commands import Judgement, judge_command

__all__ = [
    "DEFAULT_FOLLOWUP_TIMEOUT",
    "ApprovalPolicy",
    "Decision",
    "Verdict",
    "command_decision",
]

#: Seconds before a follow-up question is answered with its first suggestion when
#: `always_allow_followup` is on and `followup_timeout_seconds` is unset (Roo's).
DEFAULT_FOLLOWUP_TIMEOUT = 60.0


class Decision(enum.StrEnum):
    APPROVE = "approve"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    #: Why, for a denial the model reads or an ask a person reads.
    reason: str = ""
    #: Seconds the task waits for an answer to the ask this verdict leads to (the
    #: approval, or for a follow-up question the question itself); None: no limit.
    timeout: float | None = None
    #: What the task does when `timeout` passes unanswered: DENY (an approval, or a
    #: question without suggestions) or APPROVE with `default_answer` (a follow-up
    #: question answered with its first suggestion).
    on_timeout: Decision | None = None
    #: The answer a follow-up question gets on timeout.
    default_answer: str | None = None
    #: The task's cap of automatic approvals is reached: ask
    #: `auto_approval_max_req_reached`, and on a yes call `reset_count` and run it.
    cap_reached: bool = False
    #: The call writes to a protected path (Roo's `isProtected` for the ask).
    protected: bool = False


# ---- shell commands ----------------------------------------------------------------

_JUDGED: dict[Judgement, Decision | None] = {
    Judgement.ALLOWED: Decision.APPROVE,
    Judgement.DENIED: Decision.DENY,
    Judgement.UNSEEN: Decision.ASK,
    Judgement.UNDECIDED: None,
}


def command_decision(
    command: str, allowed: list[str], denied: list[str]
) -> tuple[Decision | None, str]:
    """DENY when a command it runs matches a denied prefix; ASK when a deny list
    applies but part of it cannot be seen into; APPROVE when every command it
    runs matches an allowed prefix and nothing else can run or be written; else
    None (no opinion), with the reason an allowed prefix was not enough. The
    command is parsed with a shell grammar: see `commands.judge_command`."""
    judged = judge_command(command, allowed, denied)
    return _JUDGED[judged.judgement], judged.reason


# ---- the policy ------------------------------------------------------------------------

_SWITCHES: dict[ToolCategory, str] = {
    ToolCategory.READ: "always_allow_read_only",
    ToolCategory.WRITE: "always_allow_write",
    ToolCategory.EXECUTE: "always_allow_execute",
    ToolCategory.COMMAND: "always_allow_command",
    ToolCategory.MCP: "always_allow_mcp",
    ToolCategory.SUBTASK: "always_allow_subtasks",
    ToolCategory.MODE: "always_allow_mode_switch",
    ToolCategory.TODO: "always_allow_update_todo_list",
}


class ApprovalPolicy:
    """Seed 004's auto-approval for every task of the daemon, with per-task
    settings (a client's `StartNewTask.configuration`) and per-task counters."""

    def __init__(self, settings: ApprovalSettings | None = None) -> None:
        #: The daemon-wide settings; assign a new object to change them live.
        self.settings = settings if settings is not None else ApprovalSettings()
        self._task_settings: dict[str, ApprovalSettings] = {}
        self._counts: dict[str, int] = {}
        #: What model requests cost (USD) since the count was last reset.
        self._costs: dict[str, float] = {}
        self._workspaces: dict[tuple[str, tuple[str, ...]], Workspace] = {}

    # ---- per task ---------------------------------------------------------------

    def settings_for(self, task_id: str) -> ApprovalSettings:
        return self._task_settings.get(task_id, self.settings)

    def configure_task(self, task_id: str, overrides: Mapping[str, Any]) -> ApprovalSettings:
        """Give `task_id` the daemon's settings with `overrides` applied (see
        `ApprovalSettings.with_overrides`); raises ValueError for a bad value."""
        settings = self.settings.with_overrides(overrides)
        self._task_settings[task_id] = settings
        return settings

    def auto_approved_count(self, task_id: str) -> int:
        return self._counts.get(task_id, 0)

    def add_cost(self, task_id: str, dollars: float) -> None:
        """Count what a model request of `task_id` cost, against its cost cap."""
        if dollars > 0:
            self._costs[task_id] = self._costs.get(task_id, 0.0) + dollars

    def spent(self, task_id: str) -> float:
        """What `task_id`'s model requests cost since the count was last reset."""
        return self._costs.get(task_id, 0.0)

    def reset_count(self, task_id: str) -> None:
        """Start counting automatic approvals and cost afresh (a person said go on)."""
        self._counts.pop(task_id, None)
        self._costs.pop(task_id, None)

    def forget(self, task_id: str) -> None:
        """Drop what the policy keeps for a task that is closed."""
        self._counts.pop(task_id, None)
        self._costs.pop(task_id, None)
        self._task_settings.pop(task_id, None)

    # ---- deciding -----------------------------------------------------------------

    def decide(
        self,
        tool: Tool,
        args: Mapping[str, Any],
        *,
        task_id: str,
        workspace: str | os.PathLike[str] | None = None,
    ) -> Verdict:
        """The verdict on one call. Pass the task's `workspace` so that protected
        and hidden paths are judged as the tools will resolve them; without it,
        paths are judged by their spelling (and any absolute path asks)."""
        settings = self.settings_for(task_id)
        category = tool.category
        if category is ToolCategory.COMPLETION:
            return Verdict(Decision.APPROVE)
        if category is ToolCategory.FOLLOWUP:
            return self._followup(settings, args)

        protected = False
        command_why = ""
        if written := tool.written_paths(args):
            try:
                protected = self._protected(settings, written, workspace)
            except ToolError as exc:
                return Verdict(Decision.DENY, str(exc))

        if category is ToolCategory.COMMAND and isinstance(args.get("command"), str):
            decision, why = command_decision(
                args["command"], settings.allowed_commands, settings.denied_commands
            )
            if decision is Decision.DENY:
                return Verdict(Decision.DENY, why)
            if decision is Decision.ASK:
                return self._ask(settings, why, protected=protected)
            if decision is Decision.APPROVE and not protected:
                return self._approve(settings, task_id, why)
            command_why = why

        if protected:
            return self._ask(settings, "it writes to a protected path", protected=True)
        if category is ToolCategory.MCP and tool.always_allowed:
            return self._approve(settings, task_id, "alwaysAllow in the MCP server's configuration")
        switch = _SWITCHES.get(category)
        if switch is None:
            return self._ask(settings, f"{category} tools always ask")
        if getattr(settings, switch):
            return self._approve(settings, task_id, switch)
        if command_why:
            return self._ask(settings, f"{command_why}; {switch} is off")
        return self._ask(settings, f"{switch} is off")

    def _approve(self, settings: ApprovalSettings, task_id: str, why: str) -> Verdict:
        cap = settings.max_auto_approved_requests
        count = self._counts.get(task_id, 0)
        cost_cap = settings.max_auto_approved_cost
        spent = self._costs.get(task_id, 0.0)
        reached = None
        if cap is not None and count >= cap:
            reached = (
                f"{count} requests were approved automatically, the limit of "
                "max_auto_approved_requests; a person must say whether to go on"
            )
        elif cost_cap is not None and spent >= cost_cap:
            reached = (
                f"the model requests cost ${spent:.4f} since a person last said go on, "
                f"the limit of max_auto_approved_cost (${cost_cap:g}); a person must "
                "say whether to go on"
            )
        if reached is not None:
            return Verdict(
                Decision.ASK,
                reached,
                timeout=settings.approval_timeout_seconds,
                on_timeout=Decision.DENY if settings.approval_timeout_seconds else None,
                cap_reached=True,
            )
        self._counts[task_id] = count + 1
        return Verdict(Decision.APPROVE, why)

    @staticmethod
    def _ask(settings: ApprovalSettings, why: str, *, protected: bool = False) -> Verdict:
        timeout = settings.approval_timeout_seconds
        return Verdict(
            Decision.ASK,
            why,
            timeout=timeout,
            on_timeout=Decision.DENY if timeout is not None else None,
            protected=protected,
        )

    @staticmethod
    def _followup(settings: ApprovalSettings, args: Mapping[str, Any]) -> Verdict:
        suggestions = [str(s) for s in args.get("suggestions") or []]
        timeout = settings.followup_timeout_seconds
        if suggestions and (timeout is not None or settings.always_allow_followup):
            return Verdict(
                Decision.APPROVE,
                "follow-up questions need no approval",
                timeout=timeout if timeout is not None else DEFAULT_FOLLOWUP_TIMEOUT,
                on_timeout=Decision.APPROVE,
                default_answer=suggestions[0],
            )
        # No answer to fall back on: an unattended task gives up like an approval.
        approval_timeout = settings.approval_timeout_seconds
        return Verdict(
            Decision.APPROVE,
            "follow-up questions need no approval",
            timeout=approval_timeout,
            on_timeout=Decision.DENY if approval_timeout is not None else None,
        )

    def _protected(
        self,
        settings: ApprovalSettings,
        paths: list[str],
        workspace: str | os.PathLike[str] | None,
    ) -> bool:
        """Whether any of `paths` is protected; raises the tool's ToolError for a
        path no write may use (outside the workspace, hidden)."""
        if workspace is None:
            spec = gitignore_spec([*Workspace.DEFAULT_PROTECTED, *settings.protected_paths])
            return any(_spelled_protected(spec, p) for p in paths)
        key = (os.fspath(workspace), tuple(settings.protected_paths))
        ws = self._workspaces.get(key)
        if ws is None:
            ws = self._workspaces[key] = Workspace(workspace, protected=settings.protected_paths)
        for path in paths:
            ws.resolve_for_write(path)
        return any(ws.is_protected(p) for p in paths)


def _spelled_protected(spec: GitIgnoreSpec, path: str) -> bool:
    """Protection judged from the path's spelling alone (no workspace to resolve it)."""
    normal = os.path.normpath(path.strip() or ".")
    if Path(normal).is_absolute() or normal == ".." or normal.startswith("../"):
        return True
    parts = PurePosixPath(normal).parts
    return any(
        spec.match_file("/".join(parts[:depth]) + "/") for depth in range(1, len(parts))
    ) or bool(spec.match_file(normal))
