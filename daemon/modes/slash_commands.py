"""Slash commands: markdown files a prompt names as `/name args`.

A command is a file `NAME.md` in the workspace's `.hdsp/commands/` (source
"project") or in the global directory, `commands/` under hdsp's configuration
directory (platformdirs: `~/.config/hdsp/commands/` on Linux; source "global").
A project command hides a global one of the same name. The file may start with
YAML front matter::

    ---
    description: Profile a data set
    argument-hint: <path to a csv>
    mode: analyst
    ---
    Load $ARGUMENTS and describe each column ($1 is the first argument).

A prompt whose first word is `/NAME` is replaced by the command's body, with
`$ARGUMENTS` replaced by the rest of the prompt and `$1`...`$9` by its words
(split as a shell would); a body with neither gets the arguments appended after
a blank line. A command with `mode` puts the task in that mode; a project
command (untrusted workspace content) only if that narrows the task's mode (the
task manager decides, with :meth:`Mode.widens`). A prompt that names no known
command is sent as it is.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hdsp.protocol import CommandInfo

from . import workspace_yaml

__all__ = [
    "MAX_COMMAND_BYTES",
    "ExpandedPrompt",
    "SlashCommand",
    "SlashCommands",
    "global_commands_dir",
]

#: A larger command file is refused.
MAX_COMMAND_BYTES = 64 * 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_INVOCATION = re.compile(r"\A/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?:[ \t]+|\r?\n|\Z)")
_POSITIONAL = re.compile(r"\$([1-9])")


def _inside(workspace: Path, path: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(workspace))


def global_commands_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir("hdsp")) / "commands"


@dataclass(frozen=True)
class SlashCommand:
    name: str
    source: Literal["global", "project"]
    path: Path
    body: str
    description: str | None = None
    argument_hint: str | None = None
    mode: str | None = None

    def info(self) -> CommandInfo:
        return CommandInfo(
            name=self.name,
            source=self.source,
            file_path=str(self.path),
            description=self.description,
            argument_hint=self.argument_hint,
            mode=self.mode,
        )

    def expand(self, arguments: str) -> str:
        try:
            words = shlex.split(arguments)
        except ValueError:
            words = arguments.split()
        body = self.body
        used = "$ARGUMENTS" in body or _POSITIONAL.search(body) is not None
        body = body.replace("$ARGUMENTS", arguments)
        body = _POSITIONAL.sub(
            lambda m: words[int(m[1]) - 1] if int(m[1]) <= len(words) else "", body
        )
        if not used and arguments:
            body = body.rstrip() + "\n\n" + arguments
        return body


@dataclass(frozen=True)
class ExpandedPrompt:
    text: str
    command: SlashCommand


def _parse(
    path: Path, source: Literal["global", "project"]
) -> tuple[SlashCommand | None, str | None]:
    name = path.stem
    if not _NAME.match(name):
        return None, f"{path}: {name!r} is not a command name (letters, digits, _ . -)"
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, f"{path}: cannot be read ({exc.strerror or exc})"
    if len(data) > MAX_COMMAND_BYTES:
        return None, f"{path}: too large ({len(data)} bytes; at most {MAX_COMMAND_BYTES})"
    text = data.decode("utf-8", errors="replace")
    meta: dict[str, Any] = {}
    match = _FRONT_MATTER.match(text)
    if match is not None:
        import yaml  # (the warm-up's: see `workspace_yaml`)

        try:
            refused = workspace_yaml.refusal(match[1])
            if refused is not None:
                # Lines counted from the file's first, the opening `---`.
                return None, f"{path}:{refused[0] + 1}: front matter: {refused[1]}"
            loaded = yaml.safe_load(match[1])
        except yaml.MarkedYAMLError as exc:
            line = exc.problem_mark.line + 2 if exc.problem_mark else 1
            return None, f"{path}:{line}: the front matter is not valid YAML: {exc.problem}"
        except yaml.YAMLError as exc:
            return None, f"{path}: the front matter is not valid YAML: {exc}"
        if loaded is not None and not isinstance(loaded, dict):
            return None, f"{path}:2: the front matter must be `key: value` lines"
        meta = loaded or {}
        text = text[match.end() :]

    def field(*keys: str) -> str | None:
        for key in keys:
            value = meta.get(key)
            if value is not None:
                return str(value)
        return None

    return (
        SlashCommand(
            name=name,
            source=source,
            path=path,
            body=text.strip(),
            description=field("description"),
            argument_hint=field("argument-hint", "argument_hint", "argumentHint"),
            mode=field("mode"),
        ),
        None,
    )


class SlashCommands:
    """Finds the commands of a workspace (and the global ones) when asked: the
    files are read each time, so an edit takes effect at once."""

    def __init__(self, global_dir: Path | None = None) -> None:
        self.global_dir = global_dir if global_dir is not None else global_commands_dir()

    def list(self, workspace: Path | None) -> tuple[list[SlashCommand], list[str]]:
        found: dict[str, SlashCommand] = {}
        problems: list[str] = []
        dirs: list[tuple[Path, Literal["global", "project"]]] = [(self.global_dir, "global")]
        if workspace is not None:
            dirs.append((workspace / ".hdsp" / "commands", "project"))
        for directory, source in dirs:
            if not directory.is_dir():
                continue
            for path in sorted(directory.glob("*.md")):
                if not path.is_file():
                    continue
                if source == "project" and workspace is not None and not _inside(workspace, path):
                    problems.append(f"{path}: refused: it leads out of the workspace")
                    continue
                command, problem = _parse(path, source)
                if command is not None:
                    found[command.name] = command
                if problem is not None:
                    problems.append(problem)
        return sorted(found.values(), key=lambda c: c.name), problems

    def expand(self, text: str, workspace: Path | None) -> ExpandedPrompt | None:
        """`text` with its leading `/name` expanded; None if it names no command."""
        match = _INVOCATION.match(text)
        if match is None:
            return None
        commands, _ = self.list(workspace)
        for command in commands:
            if command.name == match[1]:
                return ExpandedPrompt(command.expand(text[match.end() :].strip()), command)
        return None
