"""Anthropic's Messages API, streamed, through the official `anthropic` SDK.

- Requests: hdsp's neutral history becomes Messages API content blocks. Anthropic
  requires user and assistant turns to alternate, and hdsp may hold two user
  messages in a row (a tool result, then the user's own words), so consecutive
  messages of one role are merged, tool results first as the API wants them.
  Images travel as base64 sources, in user messages and in tool results.
  Reasoning goes back as ``thinking`` blocks with their signature; reasoning
  without one (from another provider, or cut short) is dropped, since the API
  refuses thinking it did not sign. Empty text blocks, which it also refuses, are
  left out.
- Prompt caching: the system prompt (and with it the tools, which precede it in
  the cache's prefix) carries a ``cache_control`` breakpoint, and so does the last
  block of each of the last two user messages: the last one writes the
  conversation so far to the cache, the one before reads what the previous request
  wrote. Three breakpoints, within the API's limit of four.
- Extended thinking: with `thinking_budget`, requests ask for
  ``thinking: {"type": "enabled", "budget_tokens": ...}``; the budget has to be
  at least 1024 tokens and below ``max_tokens``.
- Replies stream as normalised :data:`Chunk` objects: ``text_delta`` as
  :class:`TextDelta`, ``thinking_delta`` as :class:`ReasoningDelta`, the block's
  ``signature_delta`` as a :class:`ReasoningDelta` with empty text and the
  signature, ``tool_use`` blocks as :class:`ToolCallStart`, :class:`ToolCallDelta`
  per ``input_json_delta`` and :class:`ToolCallEnd` with the parsed input, then
  one :class:`UsageChunk` and the :class:`StopChunk`. ``redacted_thinking``
  blocks have no neutral form and are skipped.
- Usage: Anthropic's counts are already disjoint (``input_tokens`` excludes cache
  reads and writes), as :class:`UsageChunk` wants them. ``message_start`` gives the
  input counts, ``message_delta`` the final (cumulative) output count.
- Errors: the SDK's exceptions, the ``event: error`` the API may send mid-stream,
  and broken streams are translated here into :mod:`.errors`. The SDK's own
  retries are off (``max_retries=0``): retrying is the engine's decision
  (:mod:`.retry`), taken with the user in view.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import anthropic
import msgspec
import structlog
from anthropic import AsyncAnthropic, AsyncStream
from anthropic.types import (
    ContentBlockParam,
    ImageBlockParam,
    Message,
    MessageParam,
    MessageTokensCount,
    TextBlockParam,
    ToolParam,
)
from anthropic.types.tool_result_block_param import Content as ToolResultContentParam

from hdsp.daemon.conversation import (
    DEFAULT_STREAM_TIMEOUTS,
    ApiMessage,
    Block,
    Chunk,
    ImageBlock,
    ModelInfo,
    ModelRequest,
    ReasoningBlock,
    ReasoningDelta,
    StopChunk,
    StreamTimeouts,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    UsageChunk,
)

from .errors import (
    AuthenticationFailed,
    InvalidRequest,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    context_window_exceeded,
    failed_midway,
    server_said,
    status_error,
)
from .images import ANTHROPIC_LIMITS, ImageLimits
from .models import lookup_model
from .sdk import (
    DEFAULT_TIMEOUT,
    SdkProvider,
    client_options,
    parse_arguments,
    transport_failure,
)
from .sdk import (
    json_field as _field,
)

if TYPE_CHECKING:
    from .recipe import ProviderRecipe


__all__ = [
    "DEFAULT_TIMEOUT",
    "MIN_THINKING_BUDGET",
    "AnthropicProvider",
    "build",
    "to_anthropic_messages",
    "to_anthropic_system",
    "to_anthropic_tools",
]

#: The smallest thinking budget the API accepts.
MIN_THINKING_BUDGET = 1024

_json = msgspec.json.Encoder()

log = structlog.get_logger("hdsp.llm")

_DEFAULT_KEY_HINT = "set ANTHROPIC_API_KEY in hdspd's environment and restart it"

_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}

#: How many user messages, counted from the end, carry a cache breakpoint.
_CACHED_USER_TURNS = 2

# "prompt is too long: 208310 tokens > 200000 maximum", "input length and
# `max_tokens` exceed context limit: ...", and the wordings of proxies.
_CONTEXT_WINDOW = re.compile(
    r"prompt is too long|context[ _-]?(limit|length|window)|too many (input )?tokens"
    r"|exceeds? the (maximum )?context",
    re.IGNORECASE,
)

_STOP_REASONS = {
    # The reply ran into the context window: truncated, as by max_tokens.
    "model_context_window_exceeded": "max_tokens",
}

_CACHEABLE: frozenset[str] = frozenset(("text", "image", "tool_use", "tool_result"))


class AnthropicProvider(SdkProvider[AsyncAnthropic, anthropic.AnthropicError]):
    """A Claude model behind Anthropic's Messages API (see module docstring).

    `base_url` None means Anthropic itself (or ``ANTHROPIC_BASE_URL``); a proxy
    that speaks the Messages API works too. `api_key` None means the profile has
    no key: refused up front for Anthropic, sent as a placeholder to a proxy.
    `model_info` None looks the model up in :mod:`.models`. `name` (the
    profile's name) and `key_hint` (how to set the key) appear in error messages.
    `timeouts` bound the server's silences (:class:`StreamTimeouts`).
    """

    image_limits: ClassVar[ImageLimits] = ANTHROPIC_LIMITS

    def __init__(
        self,
        model: str,
        api_key: str | None,
        base_url: str | None = None,
        model_info: ModelInfo | None = None,
        name: str = "anthropic",
        *,
        thinking_budget: int | None = None,
        key_hint: str = _DEFAULT_KEY_HINT,
        timeouts: StreamTimeouts = DEFAULT_STREAM_TIMEOUTS,
    ) -> None:
        if thinking_budget is not None and thinking_budget < MIN_THINKING_BUDGET:
            raise ValueError(
                f"The thinking budget of profile {name!r} is {thinking_budget} tokens; "
                f"Anthropic needs at least {MIN_THINKING_BUDGET}. Raise it, or unset it "
                "to turn extended thinking off."
            )
        super().__init__(
            model=model,
            info=model_info if model_info is not None else lookup_model("anthropic", model),
            name=name,
            key_hint=key_hint,
            has_key=api_key is not None,
            client=AsyncAnthropic(
                **client_options(api_key, base_url, anthropic.DefaultAsyncHttpxClient, timeouts)
            ),
            sdk_error=anthropic.AnthropicError,
            official_host="api.anthropic.com",
            timeouts=timeouts,
        )
        self._thinking_budget = thinking_budget
        #: The server answered count_tokens with "no such endpoint".
        self._count_unsupported = False

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncGenerator[AsyncIterator[Chunk]]:
        """Send `request`; the body of the ``async with`` iterates the reply
        (errors and closing: :meth:`SdkProvider._streamed`)."""
        self._require_key()
        max_tokens = request.max_tokens if request.max_tokens is not None else self._info.max_output
        if self._thinking_budget is not None and self._thinking_budget >= max_tokens:
            raise InvalidRequest(
                f"The thinking budget of profile {self.name!r} ({self._thinking_budget} "
                f"tokens) must be less than the reply's max_tokens ({max_tokens}). "
                "Lower the thinking budget or raise the output limit."
            )
        # The body is built here in its wire form, and posted as it is: the SDK's
        # `messages.create()` walks every value of it first, on each request, which
        # cost milliseconds of CPU a turn and grew with the history. It goes as bytes
        # from msgspec. Path, headers, auth, timeout and errors are the SDK's, as with
        # create() (which adds nothing else to a streamed request but its tracing
        # span's name, and deprecation warnings for some models).
        body = await self._body(request, max_tokens=max_tokens, stream=True)

        async def post() -> AsyncStream[object]:
            return await self._client.post(
                "/v1/messages",
                content=_json.encode(body),
                cast_to=Message,
                stream=True,
                # Each event as its JSON: the SDK's typed models cost tens of µs of
                # CPU per event to build, for the few fields the assembler reads. The
                # SDK still parses the SSE, skips pings and raises for ``event:
                # error``, by the event's name, as it does for create().
                stream_cls=AsyncStream[object],
            )

        async with self._streamed(post, _ReplyAssembler()) as chunks:
            yield chunks

    async def count_tokens(self, request: ModelRequest) -> int | None:
        """Anthropic's own counter (``/v1/messages/count_tokens``). None when it
        fails; a server that does not offer it (a proxy) is not asked again."""
        if self._count_unsupported or (self._official and not self._has_key):
            return None
        body = await self._body(request)
        try:
            counted = await self._client.post(
                "/v1/messages/count_tokens",
                content=_json.encode(body),
                cast_to=MessageTokensCount,
                options={"max_retries": 0},
            )
        except anthropic.APIStatusError as exc:
            if exc.status_code in (404, 405, 501):
                self._count_unsupported = True
            log.info("count_tokens failed", status=exc.status_code, profile=self.name)
            return None
        except anthropic.AnthropicError as exc:
            log.info("count_tokens failed", error=str(exc), profile=self.name)
            return None
        return counted.input_tokens

    async def _body(self, request: ModelRequest, **fields: Any) -> dict[str, Any]:
        """The request's body in its wire form, `fields` (``max_tokens``,
        ``stream``) among the model's; what a reply and a count both send."""
        body: dict[str, Any] = {
            "model": self._model,
            **fields,
            "messages": to_anthropic_messages(await self._model_messages(request.messages)),
        }
        system = to_anthropic_system(request.system)
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = to_anthropic_tools(request.tools)
        if self._thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": self._thinking_budget}
        return body

    # ---- errors --------------------------------------------------------------

    def _translate(
        self, exc: anthropic.AnthropicError, *, midstream: bool = False
    ) -> ProviderError:
        where = self.base_url
        if isinstance(exc, anthropic.APITimeoutError):
            return NetworkError(
                f"{where} did not answer in time. Check that the service is up; retrying may help."
            )
        if isinstance(exc, anthropic.APIConnectionError):
            detail = transport_failure(exc)
            if midstream:
                return self._broken(detail)
            return NetworkError(
                f"Could not connect to {where} ({detail}). Check the network, and the "
                f"base URL of profile {self.name!r}."
            )
        if isinstance(exc, anthropic.APIStatusError):
            if midstream:
                return self._error_event(exc)
            return self._status_error(exc)
        if isinstance(exc, anthropic.APIResponseValidationError):
            return NetworkError(
                f"{where} sent a reply hdsp cannot read ({exc.message}). A proxy in "
                "between may be altering it; retrying may help."
            )
        return ProviderError(f"The request to {where} failed: {exc}")

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        where, status = self.base_url, exc.status_code
        detail = _error_message(exc)
        error_type = exc.type or ""
        billing = (
            status == 402 or error_type == "billing_error" or "credit balance" in detail.lower()
        )
        return status_error(
            status,
            detail,
            exc.response.headers,
            where=where,
            profile=self.name,
            model=self._model,
            has_key=self._has_key,
            key_hint=self._key_hint,
            rate_limited=status == 429 or error_type == "rate_limit_error",
            overloaded=status == 529 or error_type == "overloaded_error",
            out_of_credit=(
                f"The account behind profile {self.name!r} cannot pay for requests to "
                f"{where} ({detail}). Add credit in the Anthropic Console, then retry."
                if billing
                else None
            ),
            too_long=status == 413 or (status == 400 and bool(_CONTEXT_WINDOW.search(detail))),
            not_found_hint="",
            server_error_hint="status.anthropic.com may say more",
        )

    def _error_event(self, exc: anthropic.APIStatusError) -> ProviderError:
        """An ``event: error`` in the middle of a stream (the HTTP status was 200)."""
        where, detail = self.base_url, _error_message(exc)
        error_type = exc.type or ""
        if error_type == "overloaded_error":
            return Overloaded(
                f"{where} became overloaded in the middle of the reply ({detail}). The "
                "partial reply was discarded; retry in a little while."
            )
        if error_type == "rate_limit_error":
            return RateLimited(f"{where} is rate-limiting requests ({detail}). Retry later.")
        if _CONTEXT_WINDOW.search(detail):
            return context_window_exceeded(self._model, where, detail)
        if error_type == "invalid_request_error":
            return InvalidRequest(
                f"{where} refused the request in the middle of the reply ({detail}). "
                f"Check the settings of profile {self.name!r}."
            )
        if error_type in ("authentication_error", "permission_error"):
            return AuthenticationFailed(
                f"{where} refused the key in the middle of the reply ({detail}); {self._key_hint}."
            )
        return failed_midway(where, detail)


def _error_message(exc: anthropic.APIStatusError) -> str:
    """What the server said (:func:`server_said`)."""
    return server_said(exc.api_message, exc.body, exc.message)


# ---- requests ----------------------------------------------------------------


def to_anthropic_system(system: str) -> list[TextBlockParam]:
    """The system prompt as one cached text block; none when it is empty."""
    if not system:
        return []
    return [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]


def to_anthropic_tools(tools: list[ToolSpec]) -> list[ToolParam]:
    """Tool specs as Messages API tools (the arguments' schema as ``input_schema``)."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def _image(block: ImageBlock) -> ImageBlockParam:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": cast(Any, block.media_type),
            "data": block.data,
        },
    }


def _tool_result(block: ToolResultBlock) -> ContentBlockParam:
    content: list[ToolResultContentParam] = []
    for part in block.content:
        if isinstance(part, TextBlock):
            if part.text:
                content.append({"type": "text", "text": part.text})
        else:
            content.append(_image(part))
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    if content:
        result["content"] = content
    if block.is_error:
        result["is_error"] = True
    return cast(ContentBlockParam, result)


def _content(role: Literal["user", "assistant"], block: Block) -> ContentBlockParam | None:
    """One neutral block as the API's, or None when it cannot (or must not) be sent."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text else None
    if role == "user":
        if isinstance(block, ImageBlock):
            return _image(block)
        if isinstance(block, ToolResultBlock):
            return _tool_result(block)
        return None  # tool calls and reasoning belong to the assistant
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ReasoningBlock) and block.signature:
        return {"type": "thinking", "thinking": block.text, "signature": block.signature}
    return None  # unsigned reasoning, images and tool results from the assistant


def _mark_cache(block: ContentBlockParam) -> bool:
    """Put a cache breakpoint on `block` if its type takes one; say whether it did."""
    if block["type"] not in _CACHEABLE:
        return False
    cast(dict[str, Any], block)["cache_control"] = dict(_EPHEMERAL)
    return True


def to_anthropic_messages(messages: list[ApiMessage]) -> list[MessageParam]:
    """The neutral history as alternating Messages API turns (see module docstring)."""
    turns: list[tuple[Literal["user", "assistant"], list[ContentBlockParam]]] = []
    for message in messages:
        content = [
            converted
            for block in message.content
            if (converted := _content(message.role, block)) is not None
        ]
        if not content:
            continue
        if turns and turns[-1][0] == message.role:
            turns[-1][1].extend(content)
        else:
            turns.append((message.role, content))
    out: list[MessageParam] = []
    for role, content in turns:
        if role == "user":
            # Tool results must open the user turn that answers the tool calls.
            content.sort(key=lambda block: block["type"] != "tool_result")
            out.append({"role": "user", "content": content})
        else:
            out.append({"role": "assistant", "content": content})
    cached = 0
    for turn in reversed(out):
        if cached == _CACHED_USER_TURNS:
            break
        if turn["role"] == "user":
            blocks = cast(list[ContentBlockParam], turn["content"])
            if _mark_cache(blocks[-1]):
                cached += 1
    return out


# ---- replies -----------------------------------------------------------------


@dataclass
class _PendingCall:
    index: int
    id: str
    name: str
    parts: list[str] = field(default_factory=list)


class _ReplyAssembler:
    """Turns the events of one Messages stream (their JSON, as sent) into hdsp chunks.

    Tool calls are numbered in order of appearance (0, 1, ...), as the other
    providers do, not by the API's content block index, which counts text and
    thinking blocks too. Proxies vary: a field that is missing, null or of the
    wrong type counts as absent.
    """

    def __init__(self) -> None:
        #: True once ``message_stop`` arrived: the reply is complete.
        self.ended = False
        self._stop_reason: str | None = None
        self._usage: dict[str, int] = {}
        #: Open tool calls by content block index (None: an event without one).
        self._calls: dict[int | None, _PendingCall] = {}
        self._count = 0

    def feed(self, event: object) -> list[Chunk]:
        if not isinstance(event, dict):
            return []
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_stop":
            call = self._calls.pop(_index(event), None)
            return [_end(call)] if call is not None else []
        if kind == "message_start":
            self._take_usage(_field(event.get("message"), "usage"))
        elif kind == "message_delta":
            stop_reason = _field(event.get("delta"), "stop_reason")
            if isinstance(stop_reason, str):
                self._stop_reason = stop_reason
            self._take_usage(event.get("usage"))
        elif kind == "message_stop":
            self.ended = True
        # The SDK skips ``ping`` and raises for ``error`` by the SSE event's name;
        # under another name, they are ignored with the types hdsp does not know.
        return []

    @property
    def complete(self) -> bool:
        """``message_stop`` is the last event: nothing after it counts."""
        return self.ended

    def finish(self) -> list[Chunk]:
        """Calls left open, the usage and the stop reason, once the reply is complete."""
        out: list[Chunk] = [_end(call) for call in self._calls.values()]
        self._calls.clear()
        usage = self._usage
        out.append(
            UsageChunk(
                input_tokens=usage.get("input_tokens", 0),
                output_tokens=usage.get("output_tokens", 0),
                cache_read_tokens=usage.get("cache_read_input_tokens", 0),
                cache_write_tokens=usage.get("cache_creation_input_tokens", 0),
            )
        )
        reason = self._stop_reason or "end_turn"
        out.append(StopChunk(reason=_STOP_REASONS.get(reason, reason)))
        return out

    def _take_usage(self, usage: object) -> None:
        # message_delta's counts are cumulative: the latest value of each wins.
        if not isinstance(usage, dict):
            return
        for name in _USAGE_FIELDS:
            value = usage.get(name)
            if type(value) is int:
                self._usage[name] = value

    def _start(self, event: dict[str, Any]) -> list[Chunk]:
        block = event.get("content_block")
        if not isinstance(block, dict):
            return []
        kind = block.get("type")
        if kind == "tool_use":
            call_id = block.get("id")
            name = block.get("name")
            call = _PendingCall(
                index=self._count,
                # Without one, the call could not be answered: an id of hdsp's.
                id=call_id if isinstance(call_id, str) and call_id else _new_call_id(),
                name=name if isinstance(name, str) else "",
            )
            self._count += 1
            self._calls[_index(event)] = call
            return [ToolCallStart(index=call.index, id=call.id, name=call.name)]
        # Start events carry empty text in practice; a proxy may put text there.
        if kind == "text":
            return _text(TextDelta, block.get("text"))
        if kind == "thinking":
            return _text(ReasoningDelta, block.get("thinking"))
        return []  # redacted_thinking, and what hdsp does not know

    def _delta(self, event: dict[str, Any]) -> list[Chunk]:
        delta = event.get("delta")
        if not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            return _text(TextDelta, delta.get("text"))
        if kind == "thinking_delta":
            return _text(ReasoningDelta, delta.get("thinking"))
        if kind == "signature_delta":
            signature = delta.get("signature")
            if not isinstance(signature, str):
                return []
            return [ReasoningDelta(text="", signature=signature)]
        if kind == "input_json_delta":
            call = self._calls.get(_index(event))
            partial = delta.get("partial_json")
            if call is None or not isinstance(partial, str) or not partial:
                return []
            call.parts.append(partial)
            return [ToolCallDelta(index=call.index, arguments_delta=partial)]
        return []  # citations


_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def _text(kind: type[TextDelta] | type[ReasoningDelta], value: object) -> list[Chunk]:
    """A text or thinking chunk of `value`, if it is text (and not empty)."""
    return [kind(text=value)] if isinstance(value, str) and value else []


def _index(event: dict[str, Any]) -> int | None:
    """The content block index of `event`; None when it has none (or not a number)."""
    index = event.get("index")
    return index if type(index) is int else None


def _new_call_id() -> str:
    return "toolu_hdsp_" + secrets.token_hex(12)


def _end(call: _PendingCall) -> ToolCallEnd:
    raw = "".join(call.parts)
    return ToolCallEnd(
        index=call.index,
        id=call.id,
        name=call.name,
        arguments=parse_arguments(raw),
        raw_arguments=raw,
    )


def build(recipe: ProviderRecipe) -> AnthropicProvider:
    """The provider of a profile of kind "anthropic" (:mod:`.recipe`)."""
    profile = recipe.profile
    return AnthropicProvider(
        profile.model,
        recipe.key,
        profile.base_url,
        model_info=recipe.model_info,
        name=recipe.name,
        thinking_budget=profile.options.thinking_budget,
        key_hint=recipe.key_hint,
        timeouts=profile.options.stream_timeouts(),
    )
