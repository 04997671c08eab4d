"""Modes, slash commands, the system prompt and the todo list on the wire.

`GetModes` and `GetCommands` are Roo's: each reply lists what the daemon knows,
and a daemon-wide `modesResponse` / `commandsResponse` event carries the same
list (Roo's shapes: `{slug, name}` for a mode, `{name, source, filePath?,
description?, argumentHint?}` for a command; hdsp adds fields, never renames).
A task's todo list is `TodoItem`s (Roo's shape), kept with the task
(`HistoryItem.todos`) and announced by `taskTodoListUpdated`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ._base import CommandBase, WireStruct

__all__ = [
    "CommandInfo",
    "CommandList",
    "GetCommands",
    "GetCommandsData",
    "GetModes",
    "GetModesData",
    "GetSystemPrompt",
    "GetSystemPromptData",
    "ModeInfo",
    "ModeList",
    "SystemPromptText",
    "TodoItem",
    "TodoStatus",
]

TodoStatus = Literal["pending", "in_progress", "completed"]


class TodoItem(WireStruct, frozen=True):
    """One line of a task's todo list (Roo's TodoItem)."""

    id: Annotated[str, Meta(description="Stable within the list: its position, from 1.")]
    content: str
    status: TodoStatus = "pending"


class ModeInfo(WireStruct, frozen=True):
    """A mode as `modesResponse` and `GetModes` list it: Roo's `{slug, name}`, and
    what hdsp adds."""

    slug: str
    name: str
    role_definition: str = ""
    when_to_use: str | None = None
    description: str | None = None
    groups: Annotated[
        list[str],
        Meta(
            description=(
                "Tool groups the mode may use: read, edit, command, kernel, notebook, mcp, agents."
            )
        ),
    ] = []
    file_regex: Annotated[
        str | None,
        Meta(description="Files the mode may edit (a Python regex on the workspace path)."),
    ] = None
    custom_instructions: str | None = None
    tools: Annotated[
        list[str], Meta(description="The tools a task in this mode is offered, by name.")
    ] = []
    source: Annotated[
        Literal["built-in", "global", "project"],
        Meta(description="Where it is defined: hdsp, the settings, or the workspace file."),
    ] = "built-in"


class ModeList(WireStruct, frozen=True):
    modes: list[ModeInfo]
    problems: Annotated[
        list[str],
        Meta(description="Why a custom modes file or setting was left out (path, line, problem)."),
    ] = []


class CommandInfo(WireStruct, frozen=True):
    """A slash command (Roo's Command)."""

    name: str
    source: Literal["global", "project", "built-in"]
    file_path: str | None = None
    description: str | None = None
    argument_hint: str | None = None
    mode: Annotated[
        str | None, Meta(description="The mode a task switches to when the command is used.")
    ] = None


class CommandList(WireStruct, frozen=True):
    commands: list[CommandInfo]
    problems: list[str] = []


class GetModesData(WireStruct, frozen=True):
    workspace: Annotated[
        str | None,
        Meta(description="Include this workspace's `.hdsp/modes.yaml` (or .json) modes."),
    ] = None


class GetCommandsData(WireStruct, frozen=True):
    workspace: Annotated[
        str | None, Meta(description="Include this workspace's `.hdsp/commands/`.")
    ] = None


class GetSystemPromptData(WireStruct, frozen=True):
    task_id: Annotated[
        str | None, Meta(description="The prompt this task's next request sends.")
    ] = None
    workspace: Annotated[
        str | None, Meta(description="Without a task: the prompt a new task here would get.")
    ] = None
    mode: Annotated[str | None, Meta(description="Without a task: in this mode.")] = None


class SystemPromptText(WireStruct, frozen=True):
    text: str
    mode: str


class GetModes(CommandBase[ModeList], tag="GetModes", frozen=True):
    """Roo's GetModes: the reply lists the modes, and a daemon-wide
    `modesResponse` event carries them too."""

    data: GetModesData = GetModesData()


class GetCommands(CommandBase[CommandList], tag="GetCommands", frozen=True):
    """Roo's GetCommands: the reply lists the slash commands, and a daemon-wide
    `commandsResponse` event carries them too."""

    data: GetCommandsData = GetCommandsData()


class GetSystemPrompt(CommandBase[SystemPromptText], tag="GetSystemPrompt", frozen=True):
    """The exact system prompt a task's next model request sends (or a new task's)."""

    data: GetSystemPromptData = GetSystemPromptData()
