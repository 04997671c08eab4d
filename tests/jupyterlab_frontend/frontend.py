"""The JupyterLab panel's TypeScript half (clients/jupyterlab/frontend), run by Node.

`npm ci` installs its packages from the committed lockfile, once per lockfile: a
stamp beside the modules records the lockfile's hash (as tests/protocol/ajv.py
does for ajv), so later runs start at once and a changed lockfile installs again.
`make labext` installs the same way.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["FRONTEND", "install", "run"]

FRONTEND = Path(__file__).resolve().parents[2] / "clients" / "jupyterlab" / "frontend"
_STAMP = FRONTEND / "node_modules" / ".hdsp-lockfile-sha256"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(
            f"{name} is not installed: the JupyterLab panel's frontend builds and tests "
            "under Node.js 18 or newer (Debian: apt-get install nodejs npm)."
        )
    return path


def install() -> None:
    """Install the frontend's packages from the lockfile unless they match it."""
    digest = hashlib.sha256((FRONTEND / "package-lock.json").read_bytes()).hexdigest()
    if _STAMP.exists() and _STAMP.read_text() == digest:
        return
    done = subprocess.run(
        [_tool("npm"), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=FRONTEND,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm ci failed in {FRONTEND}:\n{done.stdout}\n{done.stderr}")
    _STAMP.write_text(digest)


def run(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run `node ARGS...` in the frontend's folder (installed first)."""
    install()
    return subprocess.run(
        [_tool("node"), *args],
        cwd=FRONTEND,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
