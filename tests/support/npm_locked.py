"""Node.js packages the tests run, each folder under tests/ with a package.json
and its committed package-lock.json (tests/js: ajv; tests/js-inspector: the MCP
Inspector; tests/js-mcp-servers: server-everything).

`npm ci` installs a folder's packages from its lockfile, once per lockfile: a
stamp beside the modules records the lockfile's hash, so later runs start at
once and a changed lockfile installs again. Without node or npm the test fails
and says how to install them (never a silent skip).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

__all__ = ["TESTS_DIR", "install_locked", "node_tool"]

TESTS_DIR = Path(__file__).resolve().parents[1]


def node_tool(name: str, purpose: str) -> str:
    """The path of `node` or `npm`; RuntimeError saying what needs it if absent."""
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(
            f"{name} is not installed: {purpose} under Node.js 20 or newer "
            "(Debian: apt-get install nodejs npm)."
        )
    return path


def install_locked(folder: Path, purpose: str, *, timeout: float = 600) -> Path:
    """`npm ci` in `folder` unless its node_modules match its lockfile; returns
    node_modules. `purpose` says what the packages are for, in an error."""
    modules = folder / "node_modules"
    stamp = modules / ".hdsp-lockfile-sha256"
    digest = hashlib.sha256((folder / "package-lock.json").read_bytes()).hexdigest()
    if stamp.is_file() and stamp.read_text() == digest:
        return modules
    done = subprocess.run(
        [node_tool("npm", purpose), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm ci failed in {folder}:\n{done.stdout}\n{done.stderr}")
    stamp.write_text(digest)
    return modules
