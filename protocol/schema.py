"""The JSON Schema (draft 2020-12) of every wire message, command result and the
discovery file.

`make schema` writes it to `protocol/schema.json`; a test fails while the
committed file is stale, and another compiles it with ajv in strict mode, so it
uses no keyword outside JSON Schema:

- `$defs` names every type. `ClientMessage` and `ServerMessage` are the frames on
  `control`, `TaskEvent` the body of a frame on `events`, `Discovery` the
  discovery file; the root accepts any frame (`oneOf` the two directions).
- `$defs.CommandResults` is not a message but a table, written as an object
  schema: its property `X` is the schema of the `result` of command `X`'s Reply.
- msgspec marks tagged unions with OpenAPI's `discriminator`, which is no JSON
  Schema keyword: it is left out, and the union's description names its tag
  field instead (every member's tag is also a one-value `enum`).
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

import msgspec

from .commands import COMMANDS
from .discovery import Discovery
from .envelope import ClientMessage, ServerMessage
from .version import PROTOCOL_VERSION

__all__ = ["generate_schema", "schema_text"]

_REF = "#/$defs/{name}"


def _tidy(node: Any) -> Any:
    """`node` with each `discriminator` replaced by a description of the tag, and
    descriptions taken from docstrings dedented."""
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _tidy(value) for key, value in node.items()}
    if isinstance(out.get("description"), str):
        out["description"] = inspect.cleandoc(out["description"])
    discriminator = out.pop("discriminator", None)
    if discriminator is not None and "description" not in out:
        tag = discriminator["propertyName"]
        out["description"] = f"One of these, told apart by the value of `{tag}`."
    return out


def generate_schema() -> dict[str, Any]:
    results = sorted({spec.result for spec in COMMANDS.values()}, key=lambda t: t.__name__)
    types: list[Any] = [ClientMessage, ServerMessage, Discovery, *results]
    schemas, components = msgspec.json.schema_components(types, ref_template=_REF)
    client, server, discovery = schemas[:3]
    result_of = dict(zip(results, schemas[3:], strict=True))
    defs: dict[str, Any] = dict(components)
    defs["ClientMessage"] = {
        **client,
        "description": "A frame a client sends on `control`, told apart by `type`.",
    }
    defs["ServerMessage"] = {
        **server,
        "description": (
            "A frame the daemon sends: Ack and Reply on `control`, TaskEvent on `events` "
            "(the second frame, after the topic); told apart by `type`."
        ),
    }
    assert discovery == {"$ref": _REF.format(name="Discovery")}, discovery
    defs["CommandResults"] = {
        "description": (
            "Not a message: the `result` of a Reply to command X, by X (its `commandName`)."
        ),
        "type": "object",
        "properties": {name: result_of[spec.result] for name, spec in COMMANDS.items()},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"hdsp protocol v{PROTOCOL_VERSION}",
        "description": "Any frame on the wire; `$defs` names each type (protocol/README.md).",
        "oneOf": [
            {"$ref": _REF.format(name="ClientMessage")},
            {"$ref": _REF.format(name="ServerMessage")},
        ],
        "$defs": _tidy(defs),
    }


def schema_text() -> str:
    return json.dumps(generate_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(schema_text())
