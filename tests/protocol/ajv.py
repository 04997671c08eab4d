"""ajv (the JSON Schema validator most JavaScript clients use), run by Node.

`npm ci` installs it into tests/js/node_modules from the committed lockfile,
once per lockfile (see tests/support/npm_locked.py).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.npm_locked import TESTS_DIR, install_locked, node_tool

__all__ = ["JS_DIR", "SCHEMA", "AjvReport", "install", "run"]

JS_DIR = TESTS_DIR / "js"
SCHEMA = Path(__file__).resolve().parents[2] / "protocol" / "schema.json"


@dataclass(frozen=True)
class AjvReport:
    #: Why the schema does not compile in strict mode; None when it does.
    strict: str | None
    #: Per case id: ajv's errors, or None when the value is valid.
    results: dict[str, list[dict[str, Any]] | None]


_PURPOSE = "the schema tests run ajv"


def install() -> None:
    """Install ajv from the lockfile unless the installed copy matches it."""
    install_locked(JS_DIR, _PURPOSE, timeout=300)


def run(cases: list[tuple[str, str, Any]], schema: Path = SCHEMA) -> AjvReport:
    """Compile `schema` strictly and validate each (id, pointer, value) case."""
    install()
    request = {
        "schema": str(schema),
        "cases": [{"id": i, "ref": ref, "value": value} for i, ref, value in cases],
    }
    done = subprocess.run(
        [node_tool("node", _PURPOSE), str(JS_DIR / "validate.js")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"validate.js failed:\n{done.stderr}")
    out = json.loads(done.stdout)
    return AjvReport(strict=out["strict"], results=out["results"])
