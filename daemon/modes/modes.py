"""Modes: what a task is for, and which tools it may use.

A mode has a slug, a name, a role definition (the first lines of the system
prompt), when-to-use text, the tool groups it may use (:mod:`.groups`), an
optional `file_regex` that limits what its edit tools may write, and custom
instructions. The built-in modes fit data science:

=============  =========================================================
ask            read files and notebooks, inspect variables; runs nothing
plan           read and propose; writes only a plan file
analyst        runs code in kernels and edits notebooks
code           files and the shell (the default)
orchestrator   delegates to other agents (call_agent) and reads
=============  =========================================================

Custom modes come from the settings (`custom_modes`) and from the workspace's
`.hdsp/modes.yaml` (or `.json`), in Roo's shape (`customModes: [...]`); a
settings mode overrides a built-in one of the same slug. The workspace file is
untrusted (a cloned repository wrote it): it may add modes, and it may redefine
a built-in or settings mode (or a Roo slug that stands for one) only to narrow
it: no tool group the mode lacks, and the mode's file restriction kept as it is.
A redefinition that widens is left out, with a problem that says what it adds;
so `ask` stays read-only whatever a workspace says. A file that does not parse
or a mode that does not validate is left out, with a problem that names the
file, the line and what is wrong.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from hdsp.daemon.config.modes import ModeDefinition, ToolGroup
from hdsp.daemon.errors import HdspError
from hdsp.daemon.tools.base import Tool
from hdsp.protocol import ErrorCode

from . import workspace_yaml
from .groups import EDIT_GROUPS, group_of

if TYPE_CHECKING:
    import yaml

__all__ = [
    "BUILT_IN_MODES",
    "DEFAULT_MODE",
    "MAX_MODES_FILE_BYTES",
    "MODES_FILES",
    "ROO_ALIASES",
    "Mode",
    "ModeCatalog",
    "UnknownMode",
    "group_names",
    "load_modes_file",
]

DEFAULT_MODE = "code"
#: Roo's built-in slugs that hdsp has no mode of its own for (a Roo client sends
#: them): the hdsp mode each stands for, unless a custom mode takes the slug.
ROO_ALIASES = {"architect": "plan", "debug": "code"}
#: The workspace files custom modes are read from (the first that exists).
MODES_FILES = (".hdsp/modes.yaml", ".hdsp/modes.yml", ".hdsp/modes.json")
#: A larger modes file is refused (it is hand-written configuration).
MAX_MODES_FILE_BYTES = 256 * 1024

_DS_ROLE = "You are hdsp, a data-science agent that works in Jupyter. "


@dataclass(frozen=True)
class Mode:
    definition: ModeDefinition
    source: Literal["built-in", "global", "project"] = "built-in"

    @property
    def slug(self) -> str:
        return self.definition.slug

    @property
    def name(self) -> str:
        return self.definition.name

    def widens(self, than: Mode) -> list[str]:
        """What this mode may do that `than` may not (empty: it is as narrow or
        narrower). File restrictions are compared as written: a mode that may
        edit, replacing one whose edits are restricted, must keep its regex."""
        mine, theirs = self.definition, than.definition
        added = [str(g) for g in mine.groups if g not in theirs.groups]
        found = []
        if added:
            found.append(f"the tool groups {', '.join(added)}")
        edits = any(g in EDIT_GROUPS for g in mine.groups)
        if edits and theirs.file_regex is not None and mine.file_regex != theirs.file_regex:
            found.append(
                f"edits to files outside /{theirs.file_regex}/"
                if mine.file_regex is None
                else f"edits restricted by /{mine.file_regex}/ instead of /{theirs.file_regex}/"
            )
        return found

    def held_to(self, groups: Sequence[str], file_regex: str | None) -> Mode:
        """This mode, allowed no more than `groups` and edits matching
        `file_regex` (the limits a task entered it with); itself if it allows no
        more than those."""
        limit = self.definition.model_copy(
            update={"groups": [g for g in ToolGroup if g in groups], "file_regex": file_regex}
        )
        if not self.widens(Mode(limit, self.source)):
            return self
        held = self.definition.model_copy(
            update={
                "groups": [g for g in self.definition.groups if g in limit.groups],
                "file_regex": file_regex if file_regex is not None else self.definition.file_regex,
            }
        )
        return Mode(held, self.source)

    def allows(self, tool: Tool) -> bool:
        group = group_of(tool)
        return group is None or group in self.definition.groups

    def refusal(self, tool: Tool, args: dict[str, Any] | None) -> str | None:
        """Why `tool` may not run with `args` in this mode, for the model; None if it may."""
        group = group_of(tool)
        if group is not None and group not in self.definition.groups:
            allowed = ", ".join(self.definition.groups) or "none"
            return (
                f"{tool.name} is not available in {self.name} mode ({self.slug}): it belongs "
                f"to the {group} tool group, and this mode may use only: {allowed}. Use "
                "another tool, or call switch_mode to ask for a mode that allows it."
            )
        regex = self.definition.file_regex
        if regex is not None and group in EDIT_GROUPS and args is not None:
            for path in tool.written_paths(args):
                shown = path.removeprefix("./")
                if not re.search(regex, shown):
                    return (
                        f"{tool.name} may not write {shown!r} in {self.name} mode ({self.slug}): "
                        f"this mode may only edit files matching the regular expression "
                        f"{regex!r}. Write such a file, or call switch_mode."
                    )
        return None


def _builtin(**fields: Any) -> Mode:
    return Mode(ModeDefinition.model_validate(fields))


BUILT_IN_MODES: tuple[Mode, ...] = (
    _builtin(
        slug="ask",
        name="Ask",
        role_definition=_DS_ROLE
        + "In this mode you answer questions about the user's data, code and notebooks: "
        "you read and explain, and you change and run nothing.",
        when_to_use="Questions, explanations, reading files and notebooks, with nothing run "
        "or changed.",
        groups=["read"],
        custom_instructions="Answer from what you read. If an answer needs code to run or "
        "a file to change, say what you would do and suggest switching to analyst or code mode.",
    ),
    _builtin(
        slug="plan",
        name="Plan",
        role_definition=_DS_ROLE
        + "In this mode you plan an analysis before anything runs: you read the data and "
        "the code, and you write the plan down.",
        when_to_use="Planning an analysis or a change before letting an agent run anything.",
        groups=["read", "edit"],
        file_regex=r"(^|/)PLAN\.md$|^plans/[^/]+\.md$",
        custom_instructions="Write your plan to PLAN.md (or plans/NAME.md): steps, the data "
        "each needs, and how to check the results. Do not change any other file; when the "
        "plan is ready, suggest switching to analyst or code mode to carry it out.",
    ),
    _builtin(
        slug="analyst",
        name="Analyst",
        role_definition=_DS_ROLE
        + "In this mode you explore and analyse data in Jupyter kernels and notebooks: "
        "you run code, inspect results and keep the notebook tidy.",
        when_to_use="Running analyses in a kernel, editing and running notebook cells.",
        groups=["read", "kernel", "notebook", "mcp"],
    ),
    _builtin(
        slug="code",
        name="Code",
        role_definition=_DS_ROLE
        + "You help the user explore data, write and run code, and explain results. Be "
        "concise and precise; show code when it helps; say plainly when you are unsure.",
        when_to_use="Writing and changing files, running shell commands and code.",
        groups=["read", "edit", "command", "kernel", "notebook", "mcp"],
    ),
    _builtin(
        slug="orchestrator",
        name="Orchestrator",
        role_definition=_DS_ROLE
        + "In this mode you coordinate: you break the work into parts and hand each to "
        "the mode or agent that fits it.",
        when_to_use="Large pieces of work split into parts for other modes or agents.",
        groups=["read", "agents"],
        custom_instructions="Read what you need, write the plan as a todo list "
        "(update_todo_list), and hand each part to the agent that fits it with call_agent; "
        "calls in one reply run at once. Put their results together for the user.",
    ),
)


def _line_of(node: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    """The 1-based line of the YAML node at `loc` (pydantic's error location)."""
    import yaml

    line = None
    for key in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.SequenceNode) and isinstance(key, int):
            node = node.value[key] if key < len(node.value) else None
        elif isinstance(node, yaml.MappingNode):
            found = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and (
                    k.value == key or _camel(str(key)) == k.value
                ):
                    found = v
            node = found
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line


def _inside(workspace: Path, path: Path) -> bool:
    """Whether `path` (symlinks followed) is in `workspace`."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(workspace))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def load_modes_file(path: Path) -> tuple[list[ModeDefinition], list[str]]:
    """The modes of one file and the problems found in it (`path:line: what`).

    YAML parses the JSON form too, with the same line numbers."""
    found, problems = _load_modes_file(path)
    return [definition for definition, _ in found], problems


def _load_modes_file(path: Path) -> tuple[list[tuple[ModeDefinition, int | None]], list[str]]:
    """load_modes_file, with the line each mode starts on."""
    import yaml  # (the warm-up's: see `workspace_yaml`)

    try:
        size = path.stat().st_size
        if size > MAX_MODES_FILE_BYTES:
            return [], [f"{path}: too large ({size} bytes; at most {MAX_MODES_FILE_BYTES})"]
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        return [], [f"{path}: cannot be read ({exc.strerror or exc})"]
    try:
        refused = workspace_yaml.refusal(text)
        if refused is not None:
            return [], [f"{path}:{refused[0]}: {refused[1]}"]
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        return [], [f"{path}{line}: not valid YAML/JSON: {exc.problem or exc.context}"]
    except yaml.YAMLError as exc:
        return [], [f"{path}: not valid YAML/JSON: {exc}"]
    entries_node: yaml.Node | None = root
    if isinstance(data, dict) and "customModes" in data:
        entries, prefix = data["customModes"], ["customModes"]
        entries_node = root
    elif data is None:
        return [], []
    else:
        entries, prefix = data, []
    if not isinstance(entries, list):
        return [], [f"{path}:1: expected `customModes:` followed by a list of modes"]
    modes: list[tuple[ModeDefinition, int | None]] = []
    problems: list[str] = []
    for index, entry in enumerate(entries):
        try:
            definition = ModeDefinition.model_validate(entry)
            modes.append((definition, _line_of(entries_node, [*prefix, index])))
        except ValidationError as exc:
            for error in exc.errors():
                loc: list[int | str] = [*prefix, index, *error["loc"]]
                found_line = _line_of(entries_node, loc)
                where = ".".join(str(p) for p in error["loc"]) or "(the mode)"
                slug = entry.get("slug") if isinstance(entry, dict) else None
                named = f" (mode {slug!r})" if isinstance(slug, str) else f" (mode #{index + 1})"
                problems.append(
                    f"{path}{f':{found_line}' if found_line else ''}: {where}{named}: {error['msg']}"
                )
    return modes, problems


class ModeCatalog:
    """The modes a task can be in: built-in, then the settings', then the
    workspace's (a later one with the same slug replaces an earlier one; a
    workspace mode only if it does not widen the one it replaces)."""

    def __init__(self, custom: Sequence[ModeDefinition] = ()) -> None:
        self.custom = list(custom)

    def modes(self, workspace: Path | None) -> tuple[list[Mode], list[str]]:
        found: dict[str, Mode] = {m.slug: m for m in BUILT_IN_MODES}
        for definition in self.custom:
            found[definition.slug] = Mode(definition, "global")
        problems: list[str] = []
        if workspace is not None:
            for name in MODES_FILES:
                path = workspace / name
                if path.is_file() and not _inside(workspace, path):
                    problems = [f"{path}: refused: it leads out of the workspace"]
                    break
                if path.is_file():
                    defined, problems = _load_modes_file(path)
                    trusted = dict(found)
                    for definition, line in defined:
                        mode = Mode(definition, "project")
                        replaced = trusted.get(definition.slug) or trusted.get(
                            ROO_ALIASES.get(definition.slug, "")
                        )
                        wider = mode.widens(replaced) if replaced is not None else []
                        if wider:
                            assert replaced is not None
                            where = f"{path}:{line}" if line else str(path)
                            problems.append(
                                f"{where}: mode {definition.slug!r} is left out: it redefines "
                                f"the {replaced.source} mode {replaced.slug!r} and would add "
                                f"{' and '.join(wider)}. A workspace file may only narrow a "
                                "mode it redefines; give the mode a slug of its own, or "
                                "define it in the settings (custom_modes)."
                            )
                            continue
                        found[definition.slug] = mode
                    break
        return list(found.values()), problems

    def get(self, slug: str, workspace: Path | None) -> Mode:
        """The mode `slug` (or the hdsp mode a Roo built-in slug stands for);
        raises UnknownMode (saying why) if there is none."""
        modes, problems = self.modes(workspace)
        for wanted in (slug, ROO_ALIASES.get(slug)):
            for mode in modes:
                if mode.slug == wanted:
                    return mode
        raise UnknownMode(slug, [m.slug for m in modes], problems)


class UnknownMode(HdspError, ValueError):
    """No mode has the slug asked for (a command naming it is refused)."""

    code = ErrorCode.INVALID_REQUEST

    def __init__(self, slug: str, known: list[str], problems: list[str]) -> None:
        text = f"There is no mode {slug!r}; the modes are: {', '.join(known)}."
        if problems:
            text += " Problems with custom modes: " + "; ".join(problems)
        super().__init__(text)
        self.problems = problems


def group_names(mode: Mode) -> list[str]:
    return [str(g) for g in mode.definition.groups]
