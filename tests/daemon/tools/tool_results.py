"""What the file tools' tests read back: a tool's text, a folder's names."""

from __future__ import annotations

from pathlib import Path

from hdsp.daemon.tools import ToolResult

__all__ = ["names_in", "text_of"]


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def text_of(result: ToolResult) -> str:
    assert not result.is_error
    return "".join(getattr(block, "text", "") for block in result.content)
