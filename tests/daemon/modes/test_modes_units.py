"""The pure parts of modes: the group table, refusals, the modes file's errors,
rules assembly and limits, slash commands' front matter and expansion, and the
todo checklist."""

from __future__ import annotations

from pathlib import Path

import pytest

from hdsp.daemon.modes import (
    ALWAYS_AVAILABLE,
    BUILT_IN_MODES,
    TOOL_GROUPS,
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
