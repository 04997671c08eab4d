"""What the tools' tests read back: a tool's text, a folder's names."""

from __future__ import annotations

from pathlib import Path

from hdsp.daemon.tools import ToolResult

__all__ = ["names_in", "text_in", "text_of"]


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def text_in(result: ToolResult) -> str:
    """The text of `result`, an error's too."""
    return "".join(getattr(block, "text", "") for block in result.content)


def text_of(result: ToolResult) -> str:
    """The text of `result`, which is no error."""
    assert not result.is_error
    return text_in(result)
