"""ajv (the JSON Schema validator most JavaScript clients use), run by Node.

`npm ci` installs it into tests/js/node_modules from the committed lockfile,
once per lockfile: a stamp beside the modules records the lockfile's hash, so
later runs start at once and a changed lockfile installs again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["JS_DIR", "SCHEMA", "AjvReport", "install", "run"]

JS_DIR = Path(__file__).resolve().parents[1] / "js"
SCHEMA = Path(__file__).resolve().parents[2] / "protocol" / "schema.json"
_STAMP = JS_DIR / "node_modules" / ".hdsp-lockfile-sha256"


@dataclass(frozen=True)
class AjvReport:
    #: Why the schema does not compile in strict mode; None when it does.
    strict: str | None
    #: Per case id: ajv's errors, or None when the value is valid.
    results: dict[str, list[dict[str, Any]] | None]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(
            f"{name} is not installed: the schema tests run ajv under Node.js 18 or newer "
            "(Debian: apt-get install nodejs npm)."
        )
    return path


def install() -> None:
    """Install ajv from the lockfile unless the installed copy matches it."""
    digest = hashlib.sha256((JS_DIR / "package-lock.json").read_bytes()).hexdigest()
    if _STAMP.exists() and _STAMP.read_text() == digest:
        return
    done = subprocess.run(
        [_tool("npm"), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm ci failed in {JS_DIR}:\n{done.stdout}\n{done.stderr}")
    _STAMP.write_text(digest)


def run(cases: list[tuple[str, str, Any]], schema: Path = SCHEMA) -> AjvReport:
    """Compile `schema` strictly and validate each (id, pointer, value) case."""
    install()
    request = {
        "schema": str(schema),
        "cases": [{"id": i, "ref": ref, "value": value} for i, ref, value in cases],
    }
    done = subprocess.run(
        [_tool("node"), str(JS_DIR / "validate.js")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"validate.js failed:\n{done.stderr}")
    out = json.loads(done.stdout)
    return AjvReport(strict=out["strict"], results=out["results"])
