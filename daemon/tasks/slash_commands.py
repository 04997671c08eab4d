"""A prompt's leading `/command`, expanded for a task (StartNewTask,
SendMessage): its text, and the mode it puts the task in. A workspace command
is untrusted: it may narrow the task's mode, never widen it."""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread

from hdsp.daemon.modes import Mode, ModeCatalog, SlashCommands

__all__ = ["expand_command"]


async def expand_command(
    commands: SlashCommands, modes: ModeCatalog, text: str, workspace: Path, current: Mode
) -> tuple[str, str | None]:
    """`text` with a leading `/command` expanded, and the mode the command
    puts the task in (None: it stays in `current`). A workspace command is
    untrusted: it may narrow the mode, never widen it; then the task stays
    and the text says why (the model may call switch_mode, which asks)."""
    expanded = await anyio.to_thread.run_sync(commands.expand, text, workspace)
    if expanded is None:
        return text, None
    command = expanded.command
    if command.mode is None:
        return expanded.text, None
    wanted = await anyio.to_thread.run_sync(modes.get, command.mode, workspace)
    wider = wanted.widens(current) if command.source == "project" else []
    if not wider:
        return expanded.text, wanted.slug
    try:
        where = str(command.path.relative_to(workspace))
    except ValueError:
        where = str(command.path)
    note = (
        f"[hdsp: /{command.name} ({where}, a workspace file) asks for {wanted.slug} mode, "
        f"which would add {' and '.join(wider)} to {current.slug} mode. A workspace "
        f"command may not widen a task's mode, so the task stays in {current.slug} mode; "
        f"to work in {wanted.slug} mode, call switch_mode (the user decides).]"
    )
    return expanded.text + "\n\n" + note, None
