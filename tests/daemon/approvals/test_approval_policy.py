"""The auto-approval policy of seed 004 against the real tools and a real workspace:
switches, command prefixes (deny wins), protected paths, the request cap, the
timeouts an unattended task applies, and per-task overrides."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pydantic
import pytest

from hdsp.daemon.approvals import (
    DEFAULT_FOLLOWUP_TIMEOUT,
    ApprovalPolicy,
    Decision,
    Verdict,
)
from hdsp.daemon.config import ApprovalSettings
from hdsp.daemon.tools import (
    AskAnswer,
    AskFollowupQuestion,
    AttemptCompletion,
    EditFile,
    ExecuteCommand,
    ListFiles,
    ReadFile,
    Tool,
    ToolCategory,
    ToolContext,
    ToolResult,
    WriteToFile,
)
from tests.support.kernel_helpers import tiny_png
from tests.support.tool_context import RecordingContext


class _Stub(Tool):
    """A tool of a category no real tool here has yet (kernel code, MCP, subtasks)."""

    description: ClassVar[str] = "test"
    parameters: ClassVar[Mapping[str, Any]] = {"type": "object"}

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        return ToolResult.text("ran")


class RunCode(_Stub):
    name: ClassVar[str] = "run_code"
    category: ClassVar[ToolCategory] = ToolCategory.EXECUTE


class McpCall(_Stub):
    name: ClassVar[str] = "use_mcp_tool"
    category: ClassVar[ToolCategory] = ToolCategory.MCP


class NewTask(_Stub):
    name: ClassVar[str] = "new_task"
    category: ClassVar[ToolCategory] = ToolCategory.SUBTASK


READ = ReadFile()
WRITE = WriteToFile()
EDIT = EditFile()
SHELL = ExecuteCommand()
FOLLOWUP = AskFollowupQuestion()


def decide(policy: ApprovalPolicy, tool: Tool, task: str = "t1", **args: Any) -> Verdict:
    return policy.decide(tool, args, task_id=task)


def shell(policy: ApprovalPolicy, command: str) -> Decision:
    return decide(policy, SHELL, command=command).decision


def test_defaults_allow_reads_and_ask_for_everything_else() -> None:
    policy = ApprovalPolicy()  # no arguments: the default settings
    assert decide(policy, READ, path="a").decision is Decision.APPROVE
    assert decide(policy, ListFiles()).decision is Decision.APPROVE
    assert decide(policy, AttemptCompletion(), result="done").decision is Decision.APPROVE
    for tool, args in [
        (WRITE, {"path": "a", "content": ""}),
        (SHELL, {"command": "ls"}),
        (RunCode(), {}),
        (McpCall(), {}),
        (NewTask(), {}),
    ]:
        verdict = policy.decide(tool, args, task_id="t1")
        assert verdict.decision is Decision.ASK, tool.name
        assert verdict.reason.endswith("is off")
        assert verdict.timeout is None and verdict.on_timeout is None


@pytest.mark.parametrize(
    ("switch", "tool", "args"),
    [
        ("always_allow_write", WRITE, {"path": "a.txt", "content": ""}),
        ("always_allow_write", EDIT, {"path": "a.txt", "edits": []}),
        ("always_allow_execute", RunCode(), {}),
        ("always_allow_command", SHELL, {"command": "make"}),
        ("always_allow_mcp", McpCall(), {}),
        ("always_allow_subtasks", NewTask(), {}),
    ],
)
def test_each_switch_approves_its_category(switch: str, tool: Tool, args: dict[str, Any]) -> None:
    assert ApprovalPolicy().decide(tool, args, task_id="t").decision is Decision.ASK
    policy = ApprovalPolicy(ApprovalSettings.model_validate({switch: True}))
    assert policy.decide(tool, args, task_id="t").decision is Decision.APPROVE
    # Only its own category.
    others = [s for s in ("always_allow_write", "always_allow_command") if s != switch]
    assert all(not getattr(policy.settings, s) for s in others)


def test_reads_can_need_approval_too() -> None:
    policy = ApprovalPolicy(ApprovalSettings(always_allow_read_only=False))
    assert decide(policy, READ, path="a").decision is Decision.ASK


def test_allowed_command_prefixes() -> None:
    policy = ApprovalPolicy(ApprovalSettings(allowed_commands=["git status", "ls", "head"]))
    assert shell(policy, "git status") is Decision.APPROVE
    assert shell(policy, "git   status --short") is Decision.APPROVE
    assert shell(policy, "ls -la && git status 2>&1 | head -5") is Decision.APPROVE
    # An assignment can change what runs (PATH, LD_PRELOAD, IFS): always asks.
    assert shell(policy, "LC_ALL=C ls") is Decision.ASK
    assert shell(policy, "git push") is Decision.ASK  # a prefix is whole words
    assert shell(policy, "lsblk") is Decision.ASK
    assert shell(policy, "ls; rm -rf data") is Decision.ASK  # every part must be allowed
    assert shell(policy, "ls $(rm -rf data)") is Decision.ASK  # substitutions never are
    assert shell(policy, "ls `rm -rf data`") is Decision.ASK
    assert shell(policy, "ls > notes.txt") is Decision.ASK  # a redirection writes
    asked = decide(policy, SHELL, command="ls &>/dev/null touch pwn")
    assert asked.decision is Decision.ASK
    assert "`&>`" in asked.reason and asked.reason.endswith("always_allow_command is off")


def test_denied_commands_win_over_allowed_ones() -> None:
    settings = ApprovalSettings(
        always_allow_command=True,
        allowed_commands=["*", "git"],
        denied_commands=["git push", "rm -rf"],
    )
    policy = ApprovalPolicy(settings)
    verdict = decide(policy, SHELL, command="git push --force origin main")
    assert verdict.decision is Decision.DENY
    assert "'git push'" in verdict.reason and "denied" in verdict.reason
    assert shell(policy, "git status") is Decision.APPROVE
    assert shell(policy, "ls && rm -rf /tmp/x") is Decision.DENY
    assert shell(policy, "echo $(rm -rf data)") is Decision.DENY
    assert shell(policy, "FORCE=1 git push") is Decision.DENY
    assert shell(policy, "rm -r data") is Decision.APPROVE  # not the denied prefix


def test_without_a_matching_prefix_the_command_switch_decides() -> None:
    off = ApprovalPolicy(ApprovalSettings(allowed_commands=["ls"], denied_commands=["rm"]))
    on = ApprovalPolicy(
        ApprovalSettings(always_allow_command=True, allowed_commands=["ls"], denied_commands=["rm"])
    )
    assert shell(off, "make test") is Decision.ASK
    assert shell(on, "make test") is Decision.APPROVE
    assert shell(on, "rm x") is Decision.DENY
    # The switch approves what no prefix decides, but not what hides from the
    # deny list: a program named by an expansion could be `rm`.
    assert shell(on, "ls > out.txt") is Decision.APPROVE
    hidden = decide(on, SHELL, command="$CMD x")
    assert hidden.decision is Decision.ASK and "denied commands" in hidden.reason
    assert shell(on, "env rm x") is Decision.DENY


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "secrets").mkdir()
    (root / ".hdspignore").write_text("secrets/\n")
    (root / "notes.txt").write_text("hi\n")
    return root


def test_protected_paths_always_ask_for_writes(workspace: Path) -> None:
    policy = ApprovalPolicy(ApprovalSettings(always_allow_write=True, protected_paths=["*.lock"]))
    (workspace / "git-link").symlink_to(workspace / ".git")

    def verdict(tool: Tool, path: str) -> Verdict:
        args = {"path": path, "content": "x", "edits": []}
        return policy.decide(tool, args, task_id="t", workspace=workspace)

    for path in (".git/config", ".hdspignore", ".hdsp/settings.json", "uv.lock", "git-link/HEAD"):
        for tool in (WRITE, EDIT):
            v = verdict(tool, path)
            assert (v.decision, v.protected) == (Decision.ASK, True), (tool.name, path)
            assert "protected" in v.reason
    assert verdict(WRITE, "notes.txt").decision is Decision.APPROVE
    # Reading a protected path is no write.
    assert policy.decide(READ, {"path": ".git/config"}, task_id="t").decision is Decision.APPROVE


def test_writes_the_tool_would_refuse_are_denied_up_front(workspace: Path) -> None:
    policy = ApprovalPolicy(ApprovalSettings(always_allow_write=True))
    outside = policy.decide(
        WRITE, {"path": "../elsewhere.txt", "content": ""}, task_id="t", workspace=workspace
    )
    assert outside.decision is Decision.DENY and "outside the workspace" in outside.reason
    hidden = policy.decide(
        WRITE, {"path": "secrets/x.txt", "content": ""}, task_id="t", workspace=workspace
    )
    assert hidden.decision is Decision.DENY and ".hdspignore" in hidden.reason


def test_protected_paths_without_a_workspace_are_judged_by_spelling() -> None:
    policy = ApprovalPolicy(ApprovalSettings(always_allow_write=True))
    for path in (".git/config", "sub/.git/HEAD", "../x", "/etc/passwd", "a/../.hdsp/s.json"):
        assert decide(policy, WRITE, path=path, content="").protected, path
    assert decide(policy, WRITE, path="src/app.py", content="").decision is Decision.APPROVE


def test_the_cap_of_automatic_approvals() -> None:
    policy = ApprovalPolicy(ApprovalSettings(max_auto_approved_requests=2))
    assert decide(policy, READ, path="a").decision is Decision.APPROVE
    assert decide(policy, READ, path="b").decision is Decision.APPROVE
    # Completion and follow-ups never count.
    assert decide(policy, AttemptCompletion(), result="r").decision is Decision.APPROVE
    assert decide(policy, FOLLOWUP, question="q").decision is Decision.APPROVE
    assert policy.auto_approved_count("t1") == 2

    capped = decide(policy, READ, path="c")
    assert (capped.decision, capped.cap_reached) == (Decision.ASK, True)
    assert "2 requests were approved automatically" in capped.reason
    # Another task has its own count; an ask that is no auto-approval is no cap.
    assert decide(policy, READ, task="t2", path="c").decision is Decision.APPROVE
    assert not decide(policy, WRITE, path="x", content="").cap_reached

    policy.reset_count("t1")
    assert decide(policy, READ, path="c").decision is Decision.APPROVE
    policy.forget("t1")
    assert policy.auto_approved_count("t1") == 0


def test_the_cost_cap_of_automatic_approvals() -> None:
    policy = ApprovalPolicy(ApprovalSettings(max_auto_approved_cost=0.5))
    policy.add_cost("t1", 0.3)
    assert decide(policy, READ, path="a").decision is Decision.APPROVE
    policy.add_cost("t1", 0.2)
    assert policy.spent("t1") == 0.5
    capped = decide(policy, READ, path="b")
    assert (capped.decision, capped.cap_reached) == (Decision.ASK, True)
    assert "$0.5000" in capped.reason and "max_auto_approved_cost" in capped.reason
    # Another key has its own cost; a person's go-on starts counting afresh.
    assert decide(policy, READ, task="t2", path="b").decision is Decision.APPROVE
    policy.reset_count("t1")
    assert policy.spent("t1") == 0
    assert decide(policy, READ, path="b").decision is Decision.APPROVE
    # Roo's name for it, in a task's configuration.
    merged = ApprovalSettings().with_overrides({"allowedMaxCost": 2})
    assert merged.max_auto_approved_cost == 2


def test_approval_timeouts_deny() -> None:
    policy = ApprovalPolicy(
        ApprovalSettings(approval_timeout_seconds=30, max_auto_approved_requests=1)
    )
    asked = decide(policy, WRITE, path="a", content="")
    assert (asked.timeout, asked.on_timeout, asked.default_answer) == (30, Decision.DENY, None)
    approved = decide(policy, READ, path="a")
    assert (approved.decision, approved.timeout) == (Decision.APPROVE, None)
    capped = decide(policy, READ, path="a")
    assert capped.cap_reached and (capped.timeout, capped.on_timeout) == (30, Decision.DENY)


def test_followup_questions_get_their_first_suggestion_after_a_timeout() -> None:
    args = {"question": "Which file?", "suggestions": ["sales.csv", "costs.csv"]}
    timed = ApprovalPolicy(ApprovalSettings(followup_timeout_seconds=5))
    v = timed.decide(FOLLOWUP, args, task_id="t")
    assert (v.decision, v.timeout, v.on_timeout, v.default_answer) == (
        Decision.APPROVE,
        5,
        Decision.APPROVE,
        "sales.csv",
    )
    switch = ApprovalPolicy(ApprovalSettings(always_allow_followup=True))
    v = switch.decide(FOLLOWUP, args, task_id="t")
    assert (v.timeout, v.default_answer) == (DEFAULT_FOLLOWUP_TIMEOUT, "sales.csv")
    # Nobody configured a timeout: the question waits.
    v = ApprovalPolicy().decide(FOLLOWUP, args, task_id="t")
    assert (v.decision, v.timeout, v.on_timeout) == (Decision.APPROVE, None, None)
    # No suggestion to fall back on: an unattended task gives up as for an approval.
    unattended = ApprovalPolicy(
        ApprovalSettings(followup_timeout_seconds=5, approval_timeout_seconds=60)
    )
    v = unattended.decide(FOLLOWUP, {"question": "Why?"}, task_id="t")
    assert (v.timeout, v.on_timeout, v.default_answer) == (60, Decision.DENY, None)


def test_settings_with_overrides() -> None:
    base = ApprovalSettings(denied_commands=["rm"])
    configuration = {
        # A client's whole StartNewTask configuration: other keys are not ours.
        "apiProvider": "openai",
        "mode": "code",
        "alwaysAllowWrite": True,
        "allowed_commands": ["ls"],
        "alwaysAllowFollowupQuestions": True,
        "followupAutoApproveTimeoutMs": 1500,
        "allowedMaxRequests": 20,
        "approvalTimeoutSeconds": 300,
    }
    merged = base.with_overrides(configuration)
    assert merged.always_allow_write and merged.always_allow_followup
    assert merged.allowed_commands == ["ls"] and merged.denied_commands == ["rm"]
    assert merged.followup_timeout_seconds == 1.5
    assert merged.max_auto_approved_requests == 20
    assert merged.approval_timeout_seconds == 300
    assert not base.always_allow_write  # the original is untouched
    assert "apiProvider" not in merged.model_dump()
    with pytest.raises(pydantic.ValidationError, match="always_allow_write"):
        base.with_overrides({"alwaysAllowWrite": "sometimes"})


def test_per_task_overrides_apply_to_that_task_only() -> None:
    policy = ApprovalPolicy()
    policy.configure_task("t1", {"alwaysAllowWrite": True})
    assert decide(policy, WRITE, "t1", path="a", content="").decision is Decision.APPROVE
    assert decide(policy, WRITE, "t2", path="a", content="").decision is Decision.ASK
    # Daemon-wide changes apply live to tasks without overrides.
    policy.settings = ApprovalSettings(always_allow_command=True)
    assert decide(policy, SHELL, "t2", command="make").decision is Decision.APPROVE
    policy.forget("t1")
    assert decide(policy, WRITE, "t1", path="a", content="").decision is Decision.ASK


def test_the_settings_model_keeps_unknown_keys() -> None:
    settings = ApprovalSettings.model_validate({"always_allow_write": True, "future_switch": 1})
    assert settings.always_allow_write
    assert settings.model_dump()["future_switch"] == 1


async def test_the_followup_tool_asks_and_returns_the_answer(tmp_path: Path) -> None:
    picture = "data:image/png;base64," + base64.b64encode(tiny_png()).decode()
    ctx = RecordingContext(tmp_path, answers=[AskAnswer("messageResponse", "costs.csv", [picture])])
    args = {"question": "Which file?", "suggestions": ["sales.csv", "costs.csv"]}
    result = await FOLLOWUP.execute(ctx, args)
    [ask] = ctx.of_kind("followup")
    assert ask.type == "ask"
    assert json.loads(ask.text or "") == {
        "question": "Which file?",
        "suggest": [{"answer": "sales.csv"}, {"answer": "costs.csv"}],
    }
    assert result.content[0].text == "The user answered:\ncosts.csv\n(1 image attached.)"  # type: ignore[union-attr]
    assert result.content[1].media_type == "image/png"  # type: ignore[union-attr]
    assert not result.is_error

    ctx = RecordingContext(tmp_path, answers=[AskAnswer("yesButtonClicked")])
    result = await FOLLOWUP.execute(ctx, {"question": "Go on?"})
    assert result.content[0].text == "The user answered yes."  # type: ignore[union-attr]
    assert json.loads(ctx.of_kind("followup")[0].text or "") == {
        "question": "Go on?",
        "suggest": [],
    }
