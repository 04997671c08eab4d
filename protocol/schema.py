"""The JSON Schema of every wire message and command result.

`make schema` writes it to `protocol/schema.json`; a test fails while the
committed file is stale.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import msgspec

from .commands import COMMANDS
from .envelope import ClientMessage, ServerMessage

__all__ = ["generate_schema", "schema_text"]


def generate_schema() -> dict[str, Any]:
    results = sorted({spec.result for spec in COMMANDS.values()}, key=lambda t: t.__name__)
    types: list[Any] = [ClientMessage, ServerMessage, *results]
    schemas, components = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "hdsp protocol v1",
        "oneOf": [schemas[0], schemas[1]],
        "x-results": {
            name: schemas[2 + results.index(spec.result)] for name, spec in COMMANDS.items()
        },
        "$defs": components,
    }


def schema_text() -> str:
    return json.dumps(generate_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(schema_text())
