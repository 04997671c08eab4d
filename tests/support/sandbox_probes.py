"""Python that probes what a kernel's sandbox lets it reach: each probe prints
`label ALLOWED`, or `label refused: ErrorType` (the security tests)."""

from __future__ import annotations

__all__ = ["probe_code"]

_PROBE = """
import os, pathlib
def probe(label, action):
    try:
        action()
    except Exception as exc:
        print(label, "refused:", type(exc).__name__)
    else:
        print(label, "ALLOWED")
"""


def probe_code(probes: str, **names: object) -> str:
    """Code that binds `names` to their values (written as reprs), defines
    `probe(label, action)`, then runs `probes`, lines that call it."""
    bound = "; ".join(f"{name} = {value!r}" for name, value in names.items())
    return bound + _PROBE + probes
