"""A notebook's changes cell by cell, for people: which cells were added,
removed or changed, with a unified diff of each changed source and of the text
of its outputs, instead of the JSON's noise (ids, metadata, base64 images).

Cells are matched by their id when both sides have ids, else by their source
(difflib's longest matching blocks).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

__all__ = ["notebook_diff"]


def _cells(data: bytes | None) -> list[dict[str, Any]] | None:
    if data is None:
        return []
    try:
        nb = json.loads(data)
    except ValueError:
        return None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        return None
    return cells


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value) if value is not None else ""


def _outputs_text(cell: dict[str, Any]) -> str:
    lines: list[str] = []
    for out in cell.get("outputs") or []:
        if not isinstance(out, dict):
            continue
        kind = out.get("output_type")
        if kind == "stream":
            lines.append(_text(out.get("text")))
        elif kind == "error":
            lines.append(f"{out.get('ename')}: {out.get('evalue')}")
        else:
            data = out.get("data") or {}
            if "text/plain" in data:
                lines.append(_text(data["text/plain"]))
            else:
                lines.append("[" + ", ".join(sorted(data)) + "]")
    return "\n".join(line.rstrip("\n") for line in lines)


def _unified(old: str, new: str, indent: str) -> list[str]:
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2)
    return [indent + line for line in list(diff)[2:]]


def _label(cell: dict[str, Any], index: int) -> str:
    return f"cell {index} ({cell.get('cell_type', '?')})"


def _block(cell: dict[str, Any], sign: str, indent: str) -> list[str]:
    return [f"{indent}{sign} {line}" for line in _text(cell.get("source")).splitlines()]


def _pairs(
    old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> list[tuple[int | None, int | None]]:
    """Matched (old index, new index) pairs, with None for an added or removed cell."""
    if all(c.get("id") for c in old + new):
        keys_old = [str(c["id"]) for c in old]
        keys_new = [str(c["id"]) for c in new]
    else:
        keys_old = [_text(c.get("source")) for c in old]
        keys_new = [_text(c.get("source")) for c in new]
    pairs: list[tuple[int | None, int | None]] = []
    matcher = difflib.SequenceMatcher(a=keys_old, b=keys_new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += list(zip(range(i1, i2), range(j1, j2), strict=True))
        elif tag == "replace" and i2 - i1 == j2 - j1:
            pairs += list(zip(range(i1, i2), range(j1, j2), strict=True))
        else:
            pairs += [(i, None) for i in range(i1, i2)]
            pairs += [(None, j) for j in range(j1, j2)]
    return pairs


def notebook_diff(old_bytes: bytes | None, new_bytes: bytes | None) -> str | None:
    """The cell-level changes from `old_bytes` to `new_bytes` (None: the notebook
    did not exist), or None when either side is not a notebook's JSON."""
    old, new = _cells(old_bytes), _cells(new_bytes)
    if old is None or new is None:
        return None
    lines: list[str] = []
    for i, j in _pairs(old, new):
        if i is None and j is not None:
            lines.append(f"+ {_label(new[j], j)} added:")
            lines += _block(new[j], "+", "    ")
        elif j is None and i is not None:
            lines.append(f"- {_label(old[i], i)} removed:")
            lines += _block(old[i], "-", "    ")
        elif i is not None and j is not None:
            a, b = old[i], new[j]
            source = _unified(_text(a.get("source")), _text(b.get("source")), "    ")
            outputs = _unified(_outputs_text(a), _outputs_text(b), "    ")
            kind_changed = a.get("cell_type") != b.get("cell_type")
            if not (source or outputs or kind_changed):
                continue
            where = _label(b, j) + (f" (was cell {i})" if i != j else "")
            lines.append(f"~ {where} changed:")
            if kind_changed:
                lines.append(f"    type: {a.get('cell_type')} -> {b.get('cell_type')}")
            if source:
                lines.append("  source:")
                lines += source
            if outputs:
                lines.append("  outputs:")
                lines += outputs
    return "\n".join(lines)
