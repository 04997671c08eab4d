"""Lines of a table a person reads (`hdsp profile list`, `hdsp asks`): each
column as wide as its widest cell, measured as the terminal shows it (escaped
control characters, wide characters), so that the columns line up."""

from __future__ import annotations

from collections.abc import Sequence

from ..escape import escape_controls

__all__ = ["columns"]


def columns(rows: Sequence[Sequence[str]], gap: str = "  ") -> list[str]:
    """`rows` of cells as lines: every cell on one line and escaped, every
    column but the last padded to the width of its widest cell, trailing blanks
    dropped."""
    from rich.cells import cell_len  # (rich: only for the commands that draw tables)

    cells = [[escape_controls(" ".join(cell.split("\n"))) for cell in row] for row in rows]
    count = max((len(row) for row in cells), default=0)
    widths = [
        max((cell_len(row[i]) for row in cells if i < len(row)), default=0) for i in range(count)
    ]
    lines = []
    for row in cells:
        padded = [
            cell + " " * (widths[i] - cell_len(cell)) if i < len(row) - 1 else cell
            for i, cell in enumerate(row)
        ]
        lines.append(gap.join(padded).rstrip())
    return lines
