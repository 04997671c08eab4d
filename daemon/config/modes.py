"""How a custom mode is written, in the settings (`custom_modes`) and in a
workspace's `.hdsp/modes.yaml` / `.json` (see :mod:`hdsp.daemon.modes`).

Roo's shape is accepted as it is (camelCase keys, `groups` items that are a
group name or `[group, {fileRegex, description}]`), and so are snake_case keys.
Unknown keys are refused, so a typo is an error, never a silently ignored
restriction; and nothing in a mode can approve anything: approvals stay in the
approval settings.
"""

from __future__ import annotations

import enum
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

__all__ = ["GroupOptions", "ModeDefinition", "ToolGroup"]


class ToolGroup(enum.StrEnum):
    """What a mode may do, tool by tool (the table is :mod:`hdsp.daemon.modes.groups`)."""

    READ = "read"
    EDIT = "edit"
    COMMAND = "command"
    KERNEL = "kernel"
    NOTEBOOK = "notebook"
    MCP = "mcp"
    AGENTS = "agents"


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class GroupOptions(_Strict):
    #: Only files whose workspace path matches this (Python `re.search`) may be edited.
    file_regex: str | None = None
    description: str | None = None

    @field_validator("file_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return _compiled(value)


class ModeDefinition(_Strict):
    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")
    name: str = Field(min_length=1, max_length=80)
    role_definition: str = Field(min_length=1, max_length=20_000)
    when_to_use: str | None = None
    description: str | None = None
    custom_instructions: str | None = Field(default=None, max_length=20_000)
    groups: list[ToolGroup] = []
    #: Edits (the edit and notebook groups) only to files matching this.
    file_regex: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _roo_groups(cls, data: Any) -> Any:
        """Roo writes `["edit", {"fileRegex": "..."}]` for a restricted group."""
        if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
            return data
        groups: list[Any] = []
        regex = data.get("fileRegex", data.get("file_regex"))
        for entry in data["groups"]:
            if isinstance(entry, list | tuple):
                if len(entry) != 2 or not isinstance(entry[1], dict):
                    raise ValueError(
                        f"a group is a name or [name, {{fileRegex, description}}], not {entry!r}"
                    )
                options = GroupOptions.model_validate(entry[1])
                if options.file_regex is not None:
                    regex = options.file_regex
                entry = entry[0]
            groups.append(entry)
        data = {k: v for k, v in data.items() if k not in ("fileRegex", "file_regex")}
        data["groups"] = groups
        if regex is not None:
            data["file_regex"] = regex
        return data

    @field_validator("file_regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        return _compiled(value)


def _compiled(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from None
    return value
