"""Counting a request's tokens before it is sent, so that the history is reduced
before a provider refuses it, not after.

Three counters, best first:

- the provider's own (Anthropic's ``/v1/messages/count_tokens``, in
  :mod:`.anthropic`): exact, one extra round trip;
- a local tokenizer for OpenAI's models (:func:`count_chat_tokens`): OpenAI's
  BPE tables (``o200k_base``, ``cl100k_base``) over the text the model reads,
  not the JSON sent: each message framed as OpenAI's cookbook documents (3
  tokens, 1 more for a name, the reply's priming), the functions declared as
  the server declares them (a TypeScript namespace in the system message), a
  tool call as a message to ``functions.NAME`` (parallel calls as one to
  ``multi_tool_use.parallel``), a result as a message from it. Exact for plain
  messages, within 3% with tools, calls and results on the recorded requests of
  tests/daemon/llm/recorded_usage.json (GPT-4, GPT-4o, GPT-4.1, o3, gpt-5);
- an estimate for every other model (:func:`estimate_request_tokens`): about
  four characters a token, plus a fixed price per message and image, scaled by
  a :class:`Calibration` that each reply's reported usage corrects. Before the
  first reply it can be off by half: tables of numbers take a token per 2.3
  characters, English prose one per 5.4 (CJK text more still); after a reply its
  error is that of the change in the history's kinds of text, within 10% on a
  session of code and tables (the tests measure it).

The tokenizer (``bpe_openai``: OpenAI's tables in its wheel, which tiktoken would
download) loads its tables when it is imported, about half a second of CPU: it is
imported on first use, and callers count on a worker thread.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

from hdsp.daemon.conversation import (
    ApiMessage,
    ImageBlock,
    ModelRequest,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "Calibration",
    "count_chat_tokens",
    "encoding_for_model",
    "estimate_request_tokens",
]

#: The estimate's characters per token (English prose and code average about 4).
CHARS_PER_TOKEN = 4.0
#: What one image costs, roughly: Anthropic's ~1600 for a 1568 px side, OpenAI's
#: 765 for a 1024 px square in high detail. The estimate takes the larger.
IMAGE_TOKENS = 1600
#: Per message of the estimate: role and framing.
_MESSAGE_TOKENS = 4

#: The Chat Completions framing (OpenAI's cookbook, "How to count tokens with tiktoken").
_TOKENS_PER_MESSAGE = 3
_TOKENS_PER_NAME = 1
#: An image in a chat message, high detail, 1024x1024 (85 + 4 tiles x 170).
_CHAT_IMAGE_TOKENS = 765


@dataclass(frozen=True)
class _ChatFormat:
    """How a family of OpenAI models frames a Chat Completions request: what
    primes the reply, what a request with tools adds besides the functions'
    declarations, and what each (single or parallel) tool call adds besides its
    name and arguments. Fitted to the prompt_tokens the API reported for
    recorded requests (tests/daemon/llm/recorded_usage.json)."""

    reply_priming: int
    tools_overhead: int
    call_overhead: int


#: GPT-3.5, GPT-4, GPT-4o, GPT-4.1: the functions are declared in the system message.
_CHAT = _ChatFormat(reply_priming=3, tools_overhead=-2, call_overhead=2)
#: The reasoning models (o-series, gpt-5): a request with tools also carries
#: about 80 tokens of instructions about them, and a call's framing is longer.
_REASONING = _ChatFormat(reply_priming=2, tools_overhead=80, call_overhead=7)


#: An encoding of `bpe_openai` (untyped: the package ships no annotations).
Encoding = Any

_import_lock = threading.Lock()


def _tokenizer() -> ModuleType:
    """`bpe_openai`, imported on first use (its import loads every table)."""
    with _import_lock, warnings.catch_warnings():
        # Its loader uses importlib.resources' deprecated open_binary.
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return cast(ModuleType, bpe_openai)


def encoding_for_model(model: str) -> Encoding | None:
    """OpenAI's tokenizer of `model` (loaded once), None for a model it does not
    know (a local or another vendor's model). Blocking the first time."""
    name = _encoding_name(model.rsplit("/", 1)[-1])
    return None if name is None else _encoding(name)


def _encoding_name(model: str) -> str | None:
    bpe = _tokenizer()
    try:
        name: str = bpe.encoding_name_for_model(model)
        return name
    except (bpe.UnsupportedModelError, KeyError, ValueError):
        pass
    # Newer names the table may not list yet.
    if model.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")):
        return "o200k_base"
    if model.startswith(("gpt-4", "gpt-3.5")):
        return "cl100k_base"
    return None


@functools.cache
def _encoding(name: str) -> Encoding:
    return _tokenizer().get_encoding(name)


def _text_tokens(encoding: Encoding, text: str) -> int:
    # Special-token text in untrusted content is counted as the text it is.
    return len(encoding.encode_ordinary(text))


def count_chat_tokens(
    encoding: Encoding,
    messages: Iterable[Mapping[str, Any]],
    tools: Iterable[Mapping[str, Any]] | None = None,
    *,
    reasoning: bool = False,
) -> int:
    """The prompt tokens of a Chat Completions request: `messages` and `tools`
    as they go on the wire, framed as OpenAI's models see them (`reasoning`: an
    o-series or gpt-5 model).

    The server turns the functions into a TypeScript-like declaration in the
    system message (:func:`_declare_functions`), a tool call into a message to
    ``functions.NAME`` (several calls at once into one to
    ``multi_tool_use.parallel``), and a tool result into a message from
    ``functions.NAME``; what is counted here is that text, not the JSON sent."""
    fmt = _REASONING if reasoning else _CHAT
    declared = list(tools or ())
    total = fmt.reply_priming
    names: dict[str, str] = {}  # tool call id -> function name
    for index, message in enumerate(messages):
        role = str(message.get("role", ""))
        content = message.get("content")
        text, images = _chat_content(content)
        total += images * _CHAT_IMAGE_TOKENS
        if index == 0 and declared and role in ("system", "developer"):
            text = f"{text}\n\n{_declare_functions(declared)}"
            declared = []
        calls = [c for c in message.get("tool_calls") or () if isinstance(c, Mapping)]
        if role == "assistant" and calls:
            if text:
                total += (
                    _TOKENS_PER_MESSAGE
                    + _text_tokens(encoding, role)
                    + _text_tokens(encoding, text)
                )
            total += _calls_tokens(encoding, calls, names) + fmt.call_overhead
            continue
        if role == "tool":
            author = "functions." + names.get(str(message.get("tool_call_id")), "")
            total += (
                _TOKENS_PER_MESSAGE + _text_tokens(encoding, author) + _text_tokens(encoding, text)
            )
            continue
        total += _TOKENS_PER_MESSAGE + _text_tokens(encoding, role) + _text_tokens(encoding, text)
        name = message.get("name")
        if isinstance(name, str):
            total += _TOKENS_PER_NAME + _text_tokens(encoding, name)
    if tools:
        total += fmt.tools_overhead
        if declared:  # no system message to carry them: one of their own
            total += _TOKENS_PER_MESSAGE + _text_tokens(encoding, "system")
            total += _text_tokens(encoding, _declare_functions(declared))
    return total


def _chat_content(content: object) -> tuple[str, int]:
    """The text and the number of images of a message's `content`."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return "", 0
    texts: list[str] = []
    images = 0
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        else:
            images += 1
    return "".join(texts), images


def _calls_tokens(encoding: Encoding, calls: list[Mapping[str, Any]], names: dict[str, str]) -> int:
    """One assistant message's tool calls, as the model sees them."""
    functions = []
    for call in calls:
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = str(function.get("name", ""))
        names[str(call.get("id"))] = name
        functions.append((name, str(function.get("arguments") or "")))
    if len(functions) == 1:
        name, arguments = functions[0]
        recipient = f"assistant to=functions.{name}"
        return (
            _TOKENS_PER_MESSAGE
            + _text_tokens(encoding, recipient)
            + _text_tokens(encoding, arguments)
        )
    uses = [
        {"recipient_name": f"functions.{name}", "parameters": _arguments(arguments)}
        for name, arguments in functions
    ]
    wrapped = json.dumps({"tool_uses": uses}, separators=(",", ":"))
    return (
        _TOKENS_PER_MESSAGE
        + _text_tokens(encoding, "assistant to=multi_tool_use.parallel")
        + _text_tokens(encoding, wrapped)
    )


def _arguments(arguments: str) -> object:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # a model's broken JSON goes back as it came


def _declare_functions(tools: list[Mapping[str, Any]]) -> str:
    """The functions as the server declares them to the model (a TypeScript
    namespace; each description a comment)."""
    lines = ["# Tools", "", "## functions", "", "namespace functions {", ""]
    for tool in tools:
        function = tool.get("function", tool)
        if not isinstance(function, Mapping):
            continue
        description = function.get("description")
        if description:
            lines.append(f"// {description}")
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        if properties:
            lines.append(f"type {function.get('name', '')} = (_: {{")
            lines.extend(_declare_properties(cast(Mapping[str, Any], parameters)))
            lines.extend(["}) => any;", ""])
        else:
            lines.extend([f"type {function.get('name', '')} = () => any;", ""])
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _declare_properties(schema: Mapping[str, Any]) -> list[str]:
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    lines: list[str] = []
    properties = schema.get("properties")
    for name, prop in properties.items() if isinstance(properties, Mapping) else ():
        prop = prop if isinstance(prop, Mapping) else {}
        description = prop.get("description")
        if description:
            lines.append(f"// {description}")
        line = f"{name}{'' if name in required else '?'}: {_declared_type(prop)},"
        if "default" in prop:
            line += f" // default: {json.dumps(prop['default'])}"
        lines.append(line)
    return lines


def _declared_type(schema: Mapping[str, Any]) -> str:
    """A JSON schema as a TypeScript type."""
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(value) for value in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            return " | ".join(_declared_type(o if isinstance(o, Mapping) else {}) for o in options)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_declared_type({**schema, "type": k}) for k in kind)
    if kind == "array":
        items = schema.get("items")
        item = _declared_type(items if isinstance(items, Mapping) else {})
        return f"Array<{item}>" if " " in item else f"{item}[]"
    if kind == "object" or "properties" in schema:
        if not schema.get("properties"):
            return "object"
        return "{\n" + "\n".join(_declare_properties(schema)) + "\n}"
    return _TS_TYPES.get(str(kind), "any")


_TS_TYPES = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
}


def _message_chars(message: ApiMessage) -> tuple[int, int]:
    """Characters and images of one message."""
    chars = images = 0
    for block in message.content:
        match block:
            case TextBlock(text=text) | ReasoningBlock(text=text):
                chars += len(text)
            case ImageBlock():
                images += 1
            case ToolUseBlock(name=name, input=arguments):
                chars += len(name) + len(json.dumps(arguments))
            case ToolResultBlock(content=content):
                for part in content:
                    if isinstance(part, TextBlock):
                        chars += len(part.text)
                    else:
                        images += 1
    return chars, images


#: Characters of each tool spec recently counted, by its name and its schema's
#: identity: (the schema, kept so that its id stays its own; the characters).
#: A task's tools are the same objects turn after turn (see ToolRegistry.specs),
#: and encoding their schemas again for each count was most of the estimate.
_tool_chars_seen: dict[tuple[str, str, int], tuple[Mapping[str, Any], int]] = {}
_TOOL_CHARS_KEPT = 1024


def _tool_chars(tool: ToolSpec) -> int:
    key = (tool.name, tool.description, id(tool.parameters))
    seen = _tool_chars_seen.get(key)
    if seen is not None and seen[0] is tool.parameters:
        return seen[1]
    chars = len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    if len(_tool_chars_seen) >= _TOOL_CHARS_KEPT:
        _tool_chars_seen.clear()
    _tool_chars_seen[key] = (tool.parameters, chars)
    return chars


def estimate_request_tokens(request: ModelRequest) -> int:
    """A model-independent estimate of `request`'s prompt tokens (uncalibrated)."""
    chars = len(request.system)
    images = 0
    for message in request.messages:
        c, i = _message_chars(message)
        chars += c
        images += i
    for tool in request.tools:
        chars += _tool_chars(tool)
    tokens = chars / CHARS_PER_TOKEN
    return math.ceil(tokens) + images * IMAGE_TOKENS + _MESSAGE_TOKENS * len(request.messages)


class Calibration:
    """The ratio between a provider's reported prompt tokens and the estimate,
    learned from each reply (a moving average, bounded so that one odd reply
    cannot make the estimate absurd)."""

    #: How much one reply moves the ratio.
    WEIGHT = 0.5
    BOUNDS = (0.25, 4.0)

    def __init__(self) -> None:
        self.ratio = 1.0
        self.samples = 0

    def apply(self, estimate: int) -> int:
        return math.ceil(estimate * self.ratio)

    def observe(self, estimate: int, reported: int) -> None:
        """A reply reported `reported` prompt tokens for a request estimated at `estimate`."""
        if estimate <= 0 or reported <= 0:
            return
        seen = min(max(reported / estimate, self.BOUNDS[0]), self.BOUNDS[1])
        weight = 1.0 if self.samples == 0 else self.WEIGHT
        self.ratio = self.ratio * (1 - weight) + seen * weight
        self.samples += 1
