"""Modes (what a task may do), the instructions and rules its system prompt
carries, and slash commands.

The daemon's tasks ask a :class:`ModeCatalog` for a task's mode, filter the
tools they offer and refuse calls with :meth:`Mode.refusal`, and build the
prompt's instructions with :mod:`.rules`; :mod:`.slash_commands` expands a
prompt's `/name`.
"""

from __future__ import annotations

from .groups import ALWAYS_AVAILABLE, EDIT_GROUPS, TOOL_GROUPS, group_of
from .modes import (
    BUILT_IN_MODES,
    DEFAULT_MODE,
    MODES_FILES,
    Mode,
    ModeCatalog,
    UnknownMode,
    group_names,
    load_modes_file,
)
from .rules import (
    MAX_SOURCE_CHARS,
    MAX_TOTAL_CHARS,
    InstructionSource,
    instruction_sources,
    instructions_text,
)
from .slash_commands import ExpandedPrompt, SlashCommand, SlashCommands, global_commands_dir

__all__ = [
    "ALWAYS_AVAILABLE",
    "BUILT_IN_MODES",
    "DEFAULT_MODE",
    "EDIT_GROUPS",
    "MAX_SOURCE_CHARS",
    "MAX_TOTAL_CHARS",
    "MODES_FILES",
    "TOOL_GROUPS",
    "ExpandedPrompt",
    "InstructionSource",
    "Mode",
    "ModeCatalog",
    "SlashCommand",
    "SlashCommands",
    "UnknownMode",
    "global_commands_dir",
    "group_names",
    "group_of",
    "instruction_sources",
    "instructions_text",
    "load_modes_file",
]
