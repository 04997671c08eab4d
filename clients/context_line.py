"""One line that says what context a user's message carried (the notebook, cell,
selection and outline of `PromptContext`), for the CLI's views. Unescaped: the
views escape it with the rest of the message (a path is untrusted text)."""

from __future__ import annotations

from hdsp.protocol import PromptContext

__all__ = ["context_line"]


def context_line(context: PromptContext | None) -> str | None:
    """ "about nb.ipynb · cell 3 · a selection (40 chars) · an outline (12 cells)";
    None when the message carried no context."""
    if context is None:
        return None
    parts = []
    if context.notebook:
        parts.append(context.notebook)
    if context.cell is not None:
        parts.append(f"cell {context.cell.index}")
    if context.selection:
        parts.append(f"a selection ({len(context.selection)} chars)")
    if context.outline is not None:
        more = "+" if context.truncated else ""
        parts.append(f"an outline ({len(context.outline)}{more} cells)")
    if context.kernel_id:
        parts.append("in the notebook's kernel")
    return "about " + " · ".join(parts) if parts else None
