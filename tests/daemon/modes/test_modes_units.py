"""The pure parts of modes: the group table, refusals, the modes file's errors,
rules assembly and limits, slash commands' front matter and expansion, and the
todo checklist."""

from __future__ import annotations

from pathlib import Path

import pytest

from hdsp.daemon.config.modes import ModeDefinition
from hdsp.daemon.modes import (
    ALWAYS_AVAILABLE,
    BUILT_IN_MODES,
    TOOL_GROUPS,
    Mode,
    ModeCatalog,
    SlashCommands,
    UnknownMode,
    instruction_sources,
    instructions_text,
    load_modes_file,
)
from hdsp.daemon.tools import ReadFile, WriteToFile, default_tools
from hdsp.daemon.tools.todo_list import parse_todo_markdown, render_todo_markdown


def test_every_default_tool_has_a_group_or_is_always_available() -> None:
    for name in default_tools().names():
        assert name in TOOL_GROUPS or name in ALWAYS_AVAILABLE, name


def test_roo_s_built_in_slugs_stand_for_hdsp_modes(tmp_path: Path) -> None:
    catalog = ModeCatalog()
    assert catalog.get("architect", tmp_path).slug == "plan"
    assert catalog.get("debug", tmp_path).slug == "code"
    with pytest.raises(UnknownMode, match="the modes are: ask, plan, analyst, code, orchestrator"):
        catalog.get("nope", tmp_path)


def test_refusals_name_the_group_and_the_regex() -> None:
    ask, plan = BUILT_IN_MODES[0], BUILT_IN_MODES[1]
    assert ask.refusal(ReadFile(), {"path": "a"}) is None
    assert "edit tool group" in (ask.refusal(WriteToFile(), {"path": "a"}) or "")
    assert plan.refusal(WriteToFile(), {"path": "./PLAN.md"}) is None
    assert plan.refusal(WriteToFile(), {"path": "plans/q3.md"}) is None
    assert "may not write 'x.py'" in (plan.refusal(WriteToFile(), {"path": "x.py"}) or "")


def test_a_bare_list_and_an_empty_file_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    path.write_text("- slug: a\n  name: A\n  role_definition: r\n  groups: [read]\n")
    modes, problems = load_modes_file(path)
    assert [m.slug for m in modes] == ["a"] and problems == []
    path.write_text("")
    assert load_modes_file(path) == ([], [])
    path.write_text("customModes: 3\n")
    assert load_modes_file(path)[1] == [
        f"{path}:1: expected `customModes:` followed by a list of modes"
    ]


def test_a_mode_cannot_carry_approvals(tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    path.write_text(
        "customModes:\n  - slug: a\n    name: A\n    roleDefinition: r\n"
        "    alwaysAllowExecute: true\n"
    )
    [problem] = load_modes_file(path)[1]
    assert problem == f"{path}:5: alwaysAllowExecute (mode 'a'): Extra inputs are not permitted"


def test_rules_outside_the_workspace_are_not_read(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".hdsp" / "rules").mkdir(parents=True)
    (tmp_path / "secret.md").write_text("TOKEN-4711")
    (ws / ".hdsp" / "rules" / "link.md").symlink_to(tmp_path / "secret.md")
    (ws / ".hdsp" / "rules" / "ok.md").write_text("fine")
    sources = instruction_sources(
        workspace=ws, mode=BUILT_IN_MODES[3], global_instructions="", task_instructions=None
    )
    text = instructions_text(sources)
    assert "TOKEN-4711" not in text and "fine" in text


def test_slash_commands_front_matter_and_expansion(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    project = ws / ".hdsp" / "commands"
    project.mkdir(parents=True)
    global_dir = tmp_path / "global"
    global_dir.mkdir()
    (global_dir / "same.md").write_text("global body")
    (project / "same.md").write_text("project body $1")
    (project / "bad.md").write_text("---\ndescription: [oops\n---\nbody")
    commands = SlashCommands(global_dir)
    found, problems = commands.list(ws)
    assert [(c.name, c.source) for c in found] == [("same", "project")]
    assert problems and problems[0].startswith(f"{project / 'bad.md'}:")
    expanded = commands.expand("/same 'two words' x", ws)
    assert expanded is not None and expanded.text == "project body two words"
    assert commands.expand("/missing", ws) is None
    assert commands.expand("not /same", ws) is None


def test_todo_checklist_round_trip() -> None:
    items = parse_todo_markdown("- [ ] a\n* [x] b\n1. [-] c\n\n[~] d\n")
    assert [(i.id, i.status) for i in items] == [
        ("1", "pending"),
        ("2", "completed"),
        ("3", "in_progress"),
        ("4", "in_progress"),
    ]
    assert render_todo_markdown(items) == "- [ ] a\n- [x] b\n- [-] c\n- [-] d"
    with pytest.raises(ValueError, match="line 2 is not a checklist item"):
        parse_todo_markdown("- [ ] a\n- b")


def test_yaml_aliases_and_files_leading_out_are_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".hdsp" / "commands").mkdir(parents=True)
    path = ws / ".hdsp" / "modes.yaml"
    path.write_text("a: &x [1, 2]\nb: [*x, *x]\n")
    assert load_modes_file(path)[1] == [f"{path}:2: YAML aliases (*name) are not allowed"]
    path.unlink()
    (tmp_path / "outside.yaml").write_text("customModes: []\n")
    path.symlink_to(tmp_path / "outside.yaml")
    assert ModeCatalog().modes(ws)[1] == [f"{path}: refused: it leads out of the workspace"]
    (tmp_path / "cmd.md").write_text("secret body")
    (ws / ".hdsp" / "commands" / "leak.md").symlink_to(tmp_path / "cmd.md")
    found, problems = SlashCommands(tmp_path / "none").list(ws)
    assert found == [] and "leads out of the workspace" in problems[0]


def test_a_workspace_file_may_narrow_a_mode_it_redefines_never_widen_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".hdsp").mkdir(parents=True)
    path = ws / ".hdsp" / "modes.yaml"
    path.write_text(
        "customModes:\n"
        "  - slug: ask\n"  # line 2: read-only made to run commands
        "    name: Ask\n"
        "    roleDefinition: r\n"
        "    groups: [read, command]\n"
        "  - slug: plan\n"  # line 6: the plan file restriction dropped
        "    name: Plan\n"
        "    roleDefinition: r\n"
        "    groups: [read, edit]\n"
        "  - slug: architect\n"  # line 10: Roo's slug for plan, widened
        "    name: Architect\n"
        "    roleDefinition: r\n"
        "    groups: [read, kernel]\n"
        "  - slug: code\n"  # narrower: accepted
        "    name: Code\n"
        "    roleDefinition: mine\n"
        "    groups: [read, kernel]\n"
        "  - slug: reviewer\n"  # a settings mode, widened
        "    name: Reviewer\n"
        "    roleDefinition: r\n"
        "    groups: [read, edit]\n"
        "    fileRegex: '.*'\n"
        "  - slug: wide\n"  # a slug of its own may have any groups
        "    name: Wide\n"
        "    roleDefinition: r\n"
        "    groups: [read, edit, command, kernel, notebook, mcp, agents]\n"
    )
    settings_mode = {
        "slug": "reviewer",
        "name": "Reviewer",
        "roleDefinition": "r",
        "groups": ["read", ["edit", {"fileRegex": r"\.md$"}]],
    }
    catalog = ModeCatalog([ModeDefinition.model_validate(settings_mode)])
    modes, problems = catalog.modes(ws)
    by_slug = {m.slug: m for m in modes}
    assert (by_slug["ask"].source, by_slug["ask"].definition.groups) == ("built-in", ["read"])
    assert by_slug["plan"].source == "built-in"
    assert by_slug["reviewer"].source == "global"
    assert catalog.get("architect", ws).slug == "plan"
    assert (by_slug["code"].source, by_slug["code"].definition.role_definition) == (
        "project",
        "mine",
    )
    assert by_slug["wide"].source == "project"
    assert problems == [
        f"{path}:2: mode 'ask' is left out: it redefines the built-in mode 'ask' and would add "
        "the tool groups command. A workspace file may only narrow a mode it redefines; give "
        "the mode a slug of its own, or define it in the settings (custom_modes).",
        f"{path}:6: mode 'plan' is left out: it redefines the built-in mode 'plan' and would "
        r"add edits to files outside /(^|/)PLAN\.md$|^plans/[^/]+\.md$/. A workspace file may "
        "only narrow a mode it redefines; give the mode a slug of its own, or define it in the "
        "settings (custom_modes).",
        f"{path}:10: mode 'architect' is left out: it redefines the built-in mode 'plan' and "
        "would add the tool groups kernel. A workspace file may only narrow a mode it "
        "redefines; give the mode a slug of its own, or define it in the settings "
        "(custom_modes).",
        f"{path}:18: mode 'reviewer' is left out: it redefines the global mode 'reviewer' and "
        r"would add edits restricted by /.*/ instead of /\.md$/. A workspace file may only "
        "narrow a mode it redefines; give the mode a slug of its own, or define it in the "
        "settings (custom_modes).",
    ]


def test_a_mode_is_held_to_the_limits_a_task_entered_it_with() -> None:
    def project(groups: list[str], regex: str | None = None) -> Mode:
        fields = {"slug": "m", "name": "M", "role_definition": "r", "groups": groups}
        return Mode(ModeDefinition.model_validate({**fields, "file_regex": regex}), "project")

    narrow = project(["read", "edit"], r"\.md$")
    assert narrow.held_to(["read", "edit", "kernel"], None) is narrow
    held = project(["read", "edit", "command"]).held_to(["read", "edit"], r"\.md$")
    assert (held.definition.groups, held.definition.file_regex) == (["read", "edit"], r"\.md$")
    assert held.refusal(WriteToFile(), {"path": "x.py"}) is not None
    assert held.refusal(WriteToFile(), {"path": "notes.md"}) is None
    # Narrowed meanwhile (the kernel group taken away): the narrower mode holds.
    assert project(["read"]).held_to(["read", "kernel"], None).definition.groups == ["read"]


def test_rules_the_user_hides_with_hdspignore_are_not_read(tmp_path: Path) -> None:
    # .hdspignore keeps files from the agent; the prompt is the agent's too.
    ws = tmp_path / "ws"
    (ws / ".hdsp" / "rules" / "team").mkdir(parents=True)
    (ws / ".hdspignore").write_text("AGENTS.md\n.hdsp/rules/private.md\n")
    (ws / "AGENTS.md").write_text("TOKEN-AGENTS")
    (ws / ".hdsp" / "rules" / "private.md").write_text("TOKEN-RULES")
    (ws / ".hdsp" / "rules" / "b.md").write_text("second")
    (ws / ".hdsp" / "rules" / "team" / "a.md").write_text("first")
    sources = instruction_sources(
        workspace=ws, mode=BUILT_IN_MODES[3], global_instructions="", task_instructions=None
    )
    assert [(s.source, s.text) for s in sources] == [
        (".hdsp/rules/b.md", "second"),
        (".hdsp/rules/team/a.md", "first"),
    ]


def test_yaml_nested_without_end_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    # PyYAML's parser recurses per level: 50,000 levels would raise RecursionError.
    path = tmp_path / "modes.yaml"
    path.write_text("customModes: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert load_modes_file(path) == ([], [f"{path}:1: nested more than 20 levels deep"])
    path.write_text("".join(f"{'  ' * i}k{i}:\n" for i in range(30)) + "  " * 30 + "v\n")
    assert load_modes_file(path)[1] == [f"{path}:21: nested more than 20 levels deep"]
    commands = tmp_path / "commands"
    commands.mkdir()
    (commands / "deep.md").write_text("---\ndescription: " + "{a: " * 5_000 + "\n---\nbody")
    found, problems = SlashCommands(commands).list(None)
    assert found == [] and problems == [
        f"{commands / 'deep.md'}:2: front matter: nested more than 20 levels deep"
    ]
