"""The conversation's vocabulary, shared by every layer of the daemon: the
provider-neutral API history (content blocks, :class:`ApiMessage`), what a model is
asked (:class:`ToolSpec`, :class:`ModelRequest`), what hdsp knows of a model
(:class:`ModelInfo`, :class:`StreamTimeouts`), and the normalised stream of chunks
every provider yields.

It sits below the providers (:mod:`hdsp.daemon.llm`), the kernels, the tools and
the tasks, and imports nothing of the daemon: the settings, a tool's result and a
provider's request all speak it without importing each other.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "DEFAULT_STREAM_TIMEOUTS",
    "ApiMessage",
    "Block",
    "Chunk",
    "ImageBlock",
    "ModelInfo",
    "ModelRequest",
    "ReasoningBlock",
    "ReasoningDelta",
    "StopChunk",
    "StreamTimeouts",
    "TextBlock",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "UsageChunk",
]


class _Struct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


# ---- API history (durable, provider-neutral) --------------------------------


class TextBlock(_Struct, tag="text", frozen=True):
    text: str


class ImageBlock(_Struct, tag="image", frozen=True):
    media_type: str
    #: base64, no data: prefix
    data: str


class ReasoningBlock(_Struct, tag="reasoning", frozen=True):
    text: str
    #: Provider's opaque signature to send back (Anthropic thinking), if any.
    signature: str | None = None


class ToolUseBlock(_Struct, tag="tool_use", frozen=True):
    id: str
    name: str
    input: dict[str, Any]
    #: What the model sent as the arguments when it was not a JSON object (then
    #: `input` is empty): kept as it came, so the history shows the mistake. The
    #: providers send `input` back (a server may parse the arguments it is sent),
    #: and the call's error result quotes this.
    raw_input: str | None = None


class ToolResultBlock(_Struct, tag="tool_result", frozen=True):
    tool_use_id: str
    content: list[TextBlock | ImageBlock]
    is_error: bool = False


Block = TextBlock | ImageBlock | ReasoningBlock | ToolUseBlock | ToolResultBlock


class ApiMessage(_Struct, frozen=True):
    role: Literal["user", "assistant"]
    content: list[Block]
    ts: int
    # Non-destructive context management (seeds 001/004): messages are tagged,
    # never deleted.
    condense_id: str | None = None
    condense_parent: str | None = None
    truncation_id: str | None = None
    truncation_parent: str | None = None
    is_summary: bool | None = None
    is_truncation_marker: bool | None = None


class ToolSpec(_Struct, frozen=True):
    name: str
    description: str
    #: JSON Schema of the arguments object.
    parameters: dict[str, Any]


class ModelRequest(_Struct, frozen=True):
    system: str
    messages: list[ApiMessage]
    tools: list[ToolSpec] = []
    max_tokens: int | None = None


class StreamTimeouts(_Struct, frozen=True):
    """How long a model server may keep silent before hdsp gives up on a request.

    Two bounds, because the two silences mean different things: the server not
    answering at all (`first_byte`, from sending the request to the first byte of
    the response, its status line) and a reply that stops (`idle`, the longest gap
    between two events once it streams: Anthropic's pings count). Either expires
    into a retryable :class:`~hdsp.daemon.llm.errors.NetworkError` that says which. In seconds.
    """

    #: Well under a minute: a hosted API answers in a second or two, and waiting
    #: longer in silence only hides a dead server. A local server that loads its
    #: model before answering may need more (a profile option).
    first_byte: float = 30.0
    #: Generous: a model may think, or a proxy buffer, between two events.
    idle: float = 120.0

    def __post_init__(self) -> None:
        for name in ("first_byte", "idle"):
            value = getattr(self, name)
            if not (value > 0 and value != float("inf")):
                raise ValueError(f"the {name} timeout must be a positive number of seconds")


#: The bounds a provider made without any uses.
DEFAULT_STREAM_TIMEOUTS = StreamTimeouts()


class ModelInfo(_Struct, frozen=True):
    context_window: int = 128_000
    max_output: int = 8_192
    #: USD per million tokens.
    input_price: float = 0.0
    output_price: float = 0.0
    cache_read_price: float = 0.0
    cache_write_price: float = 0.0
    supports_images: bool = False
    #: False when the model came from no table (defaults apply).
    known: bool = True


# ---- the normalised stream --------------------------------------------------


class TextDelta(_Struct, tag="text", frozen=True):
    text: str


class ReasoningDelta(_Struct, tag="reasoning", frozen=True):
    text: str
    #: The provider's signature of the reasoning so far (Anthropic's signature_delta),
    #: sent at the end of a thinking block with empty `text`. Keep it in the
    #: ReasoningBlock: Anthropic refuses thinking sent back without it.
    signature: str | None = None


class ToolCallStart(_Struct, tag="tool_call_start", frozen=True):
    index: int
    id: str
    name: str


class ToolCallDelta(_Struct, tag="tool_call_delta", frozen=True):
    index: int
    arguments_delta: str


class ToolCallEnd(_Struct, tag="tool_call_end", frozen=True):
    index: int
    id: str
    name: str
    #: Parsed arguments, or None when the model sent JSON that does not parse.
    arguments: dict[str, Any] | None
    #: The raw argument text, kept for the error that goes back to the model.
    raw_arguments: str = ""


class UsageChunk(_Struct, tag="usage", frozen=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class StopChunk(_Struct, tag="stop", frozen=True):
    #: "end_turn", "tool_use", "max_tokens", "stop_sequence", or the provider's own.
    reason: str


Chunk = (
    TextDelta
    | ReasoningDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageChunk
    | StopChunk
)
