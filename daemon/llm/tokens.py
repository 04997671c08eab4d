"""Counting a request's tokens before it is sent, so that the history is reduced
before a provider refuses it, not after.

Three counters, best first:

- the provider's own (Anthropic's ``/v1/messages/count_tokens``, in
  :mod:`.anthropic`): exact, one extra round trip;
- a local tokenizer for OpenAI's models (:func:`count_chat_tokens`): OpenAI's
  BPE tables (``o200k_base``, ``cl100k_base``) with the framing the Chat
  Completions API adds to each message (3 tokens, 1 more for a name, 3 that
  prime the reply), as OpenAI's cookbook documents it; within a few tokens of
  the API's ``prompt_tokens`` for text (see tests/daemon/llm/test_tokens.py);
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
from types import ModuleType
from typing import Any, cast

from hdsp.daemon.conversation import (
    ApiMessage,
    ImageBlock,
    ModelRequest,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
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
_REPLY_PRIMING = 3
#: An image in a chat message, high detail, 1024x1024 (85 + 4 tiles x 170).
_CHAT_IMAGE_TOKENS = 765
#: The tool list's framing around its JSON (measured against the API: small).
_TOOLS_OVERHEAD = 12


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
) -> int:
    """The prompt tokens of a Chat Completions request: `messages` and `tools`
    as they go on the wire."""
    total = _REPLY_PRIMING
    for message in messages:
        total += _TOKENS_PER_MESSAGE
        for key, value in message.items():
            if key == "name":
                total += _TOKENS_PER_NAME
            if isinstance(value, str):
                total += _text_tokens(encoding, value)
            elif key == "content" and isinstance(value, list):
                for part in value:
                    if part.get("type") == "text":
                        total += _text_tokens(encoding, part.get("text", ""))
                    else:
                        total += _CHAT_IMAGE_TOKENS
            elif key == "tool_calls" and isinstance(value, list):
                for call in value:
                    function = call.get("function", {})
                    total += _TOKENS_PER_MESSAGE
                    total += _text_tokens(encoding, function.get("name", ""))
                    total += _text_tokens(encoding, function.get("arguments", ""))
    if tools:
        total += _TOOLS_OVERHEAD + _text_tokens(
            encoding, json.dumps(list(tools), separators=(",", ":"))
        )
    return total


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


def estimate_request_tokens(request: ModelRequest) -> int:
    """A model-independent estimate of `request`'s prompt tokens (uncalibrated)."""
    chars = len(request.system)
    images = 0
    for message in request.messages:
        c, i = _message_chars(message)
        chars += c
        images += i
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
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
