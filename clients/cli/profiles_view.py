"""`hdsp profile list`'s table: one line per profile, its columns lined up."""

from __future__ import annotations

from collections.abc import Sequence

from hdsp.protocol import ProfileInfo

from .columns import columns

__all__ = ["profile_lines"]


def profile_lines(profiles: Sequence[ProfileInfo]) -> list[str]:
    """`*` marks the current profile; then its name, provider, model (and base
    URL), where it comes from, and its key's secret and whether it is set."""
    rows = []
    for info in profiles:
        key = ""
        if info.secret is not None:
            key = f"key: {info.secret} ({'set' if info.secret_set else 'NOT SET'})"
        model = f"{info.model} {info.base_url}" if info.base_url else info.model
        mark = "*" if info.current else " "
        rows.append([f"{mark} {info.name}", info.provider, model, f"[{info.source}]", key])
    return columns(rows)
