"""Any OpenAI-compatible Chat Completions API: OpenAI, vLLM, Ollama, llama.cpp, ...

One provider covers every server that speaks Chat Completions with streaming,
through the official `openai` SDK's `AsyncOpenAI`:

- Requests: hdsp's neutral history becomes chat messages. The system prompt is the
  first message; images become ``image_url`` data URLs; ``tool_use`` blocks become
  the assistant's ``tool_calls``; ``tool_result`` blocks become ``role: "tool"``
  messages (their images follow in a user message, since tool messages carry only
  text); reasoning blocks are dropped, this API has no way to send them back.
- Replies stream as normalised :data:`Chunk` objects. Tool calls arrive as
  fragments keyed by index, several per reply, ids and names on the first fragment
  (or, from lax servers, no id at all); arguments are parsed once the choice
  finishes. Reasoning comes from the ``reasoning_content`` (vLLM, DeepSeek) or
  ``reasoning`` (Ollama, OpenRouter) delta fields some servers add.
- Errors: the SDK's exceptions are translated here into :mod:`.errors`, the only
  tree the engine knows. The SDK's own retries are off (``max_retries=0``):
  retrying is the engine's decision, taken with the user in view.
- Usage: :class:`UsageChunk` counts are disjoint, as Anthropic reports them:
  ``input_tokens`` is the prompt *without* the cached part, which goes to
  ``cache_read_tokens`` (OpenAI's ``prompt_tokens`` includes it). The prompt size is
  the sum of the three input counts, whatever the provider.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import anyio.to_thread
import msgspec
import openai
import structlog
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionContentPartImageParam,
    ChatCompletionContentPartParam,
    ChatCompletionContentPartTextParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.shared import ReasoningEffort

from hdsp.daemon.conversation import (
    DEFAULT_STREAM_TIMEOUTS,
    ApiMessage,
    Chunk,
    ImageBlock,
    ModelInfo,
    ModelRequest,
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
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    context_window_exceeded,
    failed_midway,
    server_said,
    status_error,
)
from .images import OPENAI_LIMITS, ImageLimits
from .sdk import (
    DEFAULT_TIMEOUT,
    SdkProvider,
    client_options,
    parse_arguments,
    transport_failure,
)
from .sdk import json_field as _field
from .tokens import count_chat_tokens, encoding_for_model

if TYPE_CHECKING:
    from .recipe import ProviderRecipe

log = structlog.get_logger("hdsp.llm")


__all__ = [
    "DEFAULT_TIMEOUT",
    "OpenAICompatibleProvider",
    "build",
    "is_reasoning_model",
    "to_chat_messages",
    "to_chat_tools",
]

_json = msgspec.json.Encoder()

_DEFAULT_KEY_HINT = "set HDSP_API_KEY (or OPENAI_API_KEY) in hdspd's environment and restart it"

# Wordings of "prompt too long" from OpenAI, vLLM, llama.cpp, LM Studio, LiteLLM...
_CONTEXT_WINDOW = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long"
    r"|exceeds? the (available )?context|reduce the length of the (messages|prompt)",
    re.IGNORECASE,
)

# o1, o3-mini, o4-mini, gpt-5, gpt-5.1, gpt-5-mini; not gpt-5-chat-latest.
_REASONING_MODEL = re.compile(r"^(?:o\d+(?:-|$)|gpt-5(?![\w.-]*chat))")


def is_reasoning_model(model: str) -> bool:
    """Whether `model` is one of OpenAI's reasoning models (o-series, gpt-5).

    They refuse ``max_tokens`` and ``temperature``, and take ``reasoning_effort``.
    A router's prefix (``openai/o3``) is ignored.
    """
    return bool(_REASONING_MODEL.match(model.strip().lower().rsplit("/", 1)[-1]))


_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class OpenAICompatibleProvider(SdkProvider[AsyncOpenAI, openai.OpenAIError]):
    """A model behind an OpenAI-compatible Chat Completions API (see module docstring).

    `base_url` None means OpenAI itself (or ``OPENAI_BASE_URL``). `api_key` None
    means the profile has no key: fine for local servers, refused up front for
    OpenAI. `name` (the profile's name) and `key_hint` (how to set the key) appear
    in error messages. `reasoning_effort` is sent to reasoning models
    (:func:`is_reasoning_model`) and ignored for others, which refuse it.
    `timeouts` bound the server's silences (:class:`StreamTimeouts`).
    """

    image_limits: ClassVar[ImageLimits] = OPENAI_LIMITS

    def __init__(
        self,
        model: str,
        base_url: str | None,
        api_key: str | None,
        model_info: ModelInfo | None = None,
        name: str = "openai-compatible",
        *,
        key_hint: str = _DEFAULT_KEY_HINT,
        reasoning_effort: ReasoningEffort = None,
        timeouts: StreamTimeouts = DEFAULT_STREAM_TIMEOUTS,
    ) -> None:
        super().__init__(
            model=model,
            info=model_info
            if model_info is not None
            else ModelInfo(known=False, supports_images=True),
            name=name,
            key_hint=key_hint,
            has_key=api_key is not None,
            client=AsyncOpenAI(
                **client_options(api_key, base_url, openai.DefaultAsyncHttpxClient, timeouts)
            ),
            sdk_error=openai.OpenAIError,
            official_host="api.openai.com",
            timeouts=timeouts,
        )
        self._reasoning = is_reasoning_model(model)
        #: Sent to reasoning models only: others refuse the parameter.
        self._reasoning_effort = reasoning_effort if self._reasoning else None
        #: The model has no OpenAI tokenizer (found by the first count, on a thread:
        #: the tokenizer's first load blocks).
        self._no_tokenizer = False

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncGenerator[AsyncIterator[Chunk]]:
        """Send `request`; the body of the ``async with`` iterates the reply
        (errors and closing: :meth:`SdkProvider._streamed`)."""
        self._require_key()
        # The body is built here in its wire form, and posted as it is: the SDK's
        # `chat.completions.create()` walks every value of it against its typed
        # dicts first, on each request, which cost milliseconds of CPU a turn and
        # grew with the history (most of a turn's CPU in the daemon). It goes as
        # bytes from msgspec, ten times faster than the SDK's json.dumps. Auth,
        # retries, errors and the stream are the SDK's as with create().
        body: dict[str, Any] = {
            "model": self._model,
            "messages": to_chat_messages(
                request.system, await self._model_messages(request.messages)
            ),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = to_chat_tools(request.tools)
        if request.max_tokens is not None:
            # OpenAI's reasoning models refuse `max_tokens` (and `temperature`,
            # never sent), wherever they are served; other servers may not know
            # `max_completion_tokens` yet.
            official = self._official or self._reasoning
            body["max_completion_tokens" if official else "max_tokens"] = request.max_tokens
        if self._reasoning_effort:
            body["reasoning_effort"] = self._reasoning_effort

        async def post() -> AsyncStream[object]:
            return await self._client.post(
                "/chat/completions",
                content=_json.encode(body),
                cast_to=ChatCompletion,
                stream=True,
                # Each chunk as its JSON: the SDK's typed models cost ~64 µs of CPU
                # per chunk to build, a third of the daemon's own work in a turn,
                # for the few fields the assembler reads.
                stream_cls=AsyncStream[object],
                options={"security": {"bearer_auth": True}},
            )

        async with self._streamed(post, _ReplyAssembler()) as chunks:
            yield chunks

    async def count_tokens(self, request: ModelRequest) -> int | None:
        """OpenAI's tokenizer of the model, if it is one of OpenAI's (a local
        server's model has none: None)."""

        if self._no_tokenizer:
            return None  # known from the first count: no trip to a thread per turn
        sent = await self._model_messages(request.messages)

        def count() -> int | None:
            encoding = encoding_for_model(self._model)
            if encoding is None:
                self._no_tokenizer = True
                return None
            tools = to_chat_tools(request.tools) if request.tools else None
            messages = to_chat_messages(request.system, sent)
            return count_chat_tokens(encoding, messages, tools, reasoning=self._reasoning)

        return await anyio.to_thread.run_sync(count)

    # ---- errors --------------------------------------------------------------

    def _translate(self, exc: openai.OpenAIError, *, midstream: bool = False) -> ProviderError:
        where = self.base_url
        if isinstance(exc, openai.APITimeoutError):
            return NetworkError(
                f"{where} did not answer in time. Check that the server is up and not "
                "overloaded; retrying may help."
            )
        if isinstance(exc, openai.APIConnectionError):
            detail = transport_failure(exc)
            if midstream:
                return self._broken(detail)
            return NetworkError(
                f"Could not connect to {where} ({detail}). Check that the server is "
                f"running and that the base URL of profile {self.name!r} is right."
            )
        if isinstance(exc, openai.APIStatusError):
            return self._status_error(exc)
        if isinstance(exc, openai.APIError):
            return self._error_event(exc)
        return ProviderError(f"The request to {where} failed: {exc}")

    def _status_error(self, exc: openai.APIStatusError) -> ProviderError:
        where, status = self.base_url, exc.status_code
        detail = _error_message(exc)
        no_quota = status == 429 and exc.code == "insufficient_quota"
        return status_error(
            status,
            detail,
            exc.response.headers,
            where=where,
            profile=self.name,
            model=self._model,
            has_key=self._has_key,
            key_hint=self._key_hint,
            rate_limited=status == 429 and not no_quota,
            overloaded=status == 529 or (status == 503 and "overload" in detail.lower()),
            out_of_credit=(
                f"The account behind profile {self.name!r} has run out of quota at "
                f"{where} ({detail}). Add credit or raise the limit, then retry."
                if no_quota
                else None
            ),
            too_long=status in (400, 413, 422) and _is_context_window(exc.code, detail),
            not_found_hint=" (it usually ends in /v1)",
            server_error_hint="the server's own logs say more",
        )

    def _error_event(self, exc: openai.APIError) -> ProviderError:
        """An ``{"error": ...}`` event in the middle of a stream."""
        where, detail = self.base_url, _error_message(exc)
        kind = f"{exc.code or ''} {exc.type or ''}".lower()
        if _is_context_window(exc.code, detail):
            return context_window_exceeded(self._model, where, detail)
        if "rate_limit" in kind:
            return RateLimited(f"{where} is rate-limiting requests ({detail}). Retry later.")
        if "overload" in kind or "overload" in detail.lower():
            return Overloaded(f"{where} is overloaded ({detail}). Retry in a little while.")
        return failed_midway(where, detail)


def _error_message(exc: openai.APIError) -> str:
    """What the server said (:func:`server_said`): the error's ``message`` in
    OpenAI's JSON is one level down in the body the SDK kept."""
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    return server_said(message, body, exc.message)


def _is_context_window(code: str | None, message: str) -> bool:
    return code == "context_length_exceeded" or bool(_CONTEXT_WINDOW.search(message))


# ---- requests ----------------------------------------------------------------


def to_chat_tools(tools: list[ToolSpec]) -> list[ChatCompletionFunctionToolParam]:
    """Tool specs as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def _image_part(block: ImageBlock) -> ChatCompletionContentPartImageParam:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{block.media_type};base64,{block.data}"},
    }


def _text_part(text: str) -> ChatCompletionContentPartTextParam:
    return {"type": "text", "text": text}


def _tool_message(
    block: ToolResultBlock,
) -> tuple[ChatCompletionToolMessageParam, list[ImageBlock]]:
    texts = [part.text for part in block.content if isinstance(part, TextBlock)]
    images = [part for part in block.content if isinstance(part, ImageBlock)]
    text = "\n\n".join(texts)
    if images:
        noun = "image follows" if len(images) == 1 else f"{len(images)} images follow"
        text = (
            f"{text}\n\n({noun} in the next message)" if text else f"({noun} in the next message)"
        )
    if block.is_error and not text.lstrip().lower().startswith("error"):
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": block.tool_use_id, "content": text}, images


def _user_messages(message: ApiMessage) -> list[ChatCompletionMessageParam]:
    # Tool results first: they must follow the assistant's tool calls directly.
    out: list[ChatCompletionMessageParam] = []
    parts: list[ChatCompletionContentPartParam] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            tool_message, images = _tool_message(block)
            out.append(tool_message)
            if images:
                parts.append(
                    _text_part(f"Images from the result of tool call {block.tool_use_id}:")
                )
                parts.extend(_image_part(image) for image in images)
        elif isinstance(block, TextBlock):
            parts.append(_text_part(block.text))
        elif isinstance(block, ImageBlock):
            parts.append(_image_part(block))
    if parts:
        user: ChatCompletionUserMessageParam
        if len(parts) == 1 and parts[0]["type"] == "text":
            user = {"role": "user", "content": parts[0]["text"]}
        else:
            user = {"role": "user", "content": parts}
        out.append(user)
    return out


def _assistant_message(message: ApiMessage) -> ChatCompletionAssistantMessageParam | None:
    texts = [block.text for block in message.content if isinstance(block, TextBlock)]
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {
            "id": block.id,
            "type": "function",
            "function": {"name": block.name, "arguments": json.dumps(block.input)},
        }
        for block in message.content
        if isinstance(block, ToolUseBlock)
    ]
    # Reasoning (and any image) has no place in an assistant message of this API.
    assistant: ChatCompletionAssistantMessageParam = {"role": "assistant"}
    text = "".join(texts)
    if text:
        assistant["content"] = text
    if calls:
        assistant["tool_calls"] = calls
    if not text and not calls:
        return None  # e.g. reasoning only: an empty assistant message is invalid
    return assistant


def to_chat_messages(system: str, messages: list[ApiMessage]) -> list[ChatCompletionMessageParam]:
    """The neutral history as chat messages, the system prompt first."""
    out: list[ChatCompletionMessageParam] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "user":
            out.extend(_user_messages(message))
        else:
            assistant = _assistant_message(message)
            if assistant is not None:
                out.append(assistant)
    return out


# ---- replies -----------------------------------------------------------------


@dataclass
class _PendingCall:
    index: int
    id: str
    id_from_server: bool
    name: str | None = None
    parts: list[str] = field(default_factory=list)
    started: bool = False


class _ReplyAssembler:
    """Turns the ``chat.completion.chunk`` objects of one reply (their JSON, as
    sent) into hdsp chunks.

    Only choice 0 counts (hdsp never asks for more). Usage is kept until the end,
    since servers that report it on every chunk (vLLM's continuous usage) would
    otherwise be counted many times. Servers vary: a field of the wrong type, or
    missing, counts as absent.
    """

    #: Usage and ``[DONE]`` follow the finish reason: a failure after it counts.
    complete = False

    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self._usage: UsageChunk | None = None
        self._calls: list[_PendingCall] = []
        self._by_server_index: dict[int, _PendingCall] = {}

    @property
    def ended(self) -> bool:
        """Choice 0 has its finish reason."""
        return self.finish_reason is not None

    def feed(self, chunk: object) -> list[Chunk]:
        out: list[Chunk] = []
        usage = _field(chunk, "usage")
        if isinstance(usage, dict):
            self._usage = _usage_chunk(usage)
        for choice in _items(_field(chunk, "choices")):
            if choice.get("index", 0) != 0 or self.finish_reason is not None:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                reasoning = _reasoning_text(delta)
                if reasoning:
                    out.append(ReasoningDelta(text=reasoning))
                for name in ("content", "refusal"):
                    text = delta.get(name)
                    if isinstance(text, str) and text:
                        out.append(TextDelta(text=text))
                for fragment in _items(delta.get("tool_calls")):
                    out.extend(self._tool_fragment(fragment))
            finish_reason = choice.get("finish_reason")
            if finish_reason is not None:
                out.extend(self._end_calls())
                self.finish_reason = str(finish_reason)
        return out

    def finish(self) -> list[Chunk]:
        """The usage and the stop reason, once the stream has ended."""
        out: list[Chunk] = []
        if self._usage is not None:
            out.append(self._usage)
        reason = self.finish_reason or "end_turn"
        if reason == "stop" and self._calls:
            reason = "tool_calls"  # some servers say "stop" after tool calls
        out.append(StopChunk(reason=_STOP_REASONS.get(reason, reason)))
        return out

    def _call_for(self, fragment: dict[str, Any]) -> _PendingCall:
        server_index = fragment.get("index")
        fragment_id = fragment.get("id")
        new_id = fragment_id if isinstance(fragment_id, str) and fragment_id else None
        if isinstance(server_index, int):
            call = self._by_server_index.get(server_index)
        else:  # servers that send each call whole, without an index
            call = self._calls[-1] if self._calls else None
        if call is not None and new_id is not None and new_id != call.id:
            if not call.id_from_server and not call.started:
                call.id, call.id_from_server = new_id, True
            elif call.id_from_server:
                call = None  # a different id: a new call reusing the index
        if call is None:
            call = _PendingCall(
                index=len(self._calls),
                id=new_id or "call_" + secrets.token_hex(12),
                id_from_server=new_id is not None,
            )
            self._calls.append(call)
            if isinstance(server_index, int):
                self._by_server_index[server_index] = call
        return call

    def _tool_fragment(self, fragment: dict[str, Any]) -> list[Chunk]:
        call = self._call_for(fragment)
        function = fragment.get("function")
        name = _field(function, "name")
        arguments = _field(function, "arguments")
        if call.name is None and isinstance(name, str) and name:
            call.name = name
        if isinstance(arguments, str) and arguments:
            call.parts.append(arguments)
        else:
            arguments = None
        out: list[Chunk] = []
        if not call.started and call.name is not None:
            out.extend(self._start(call))
        elif call.started and arguments is not None:
            out.append(ToolCallDelta(index=call.index, arguments_delta=arguments))
        return out

    @staticmethod
    def _start(call: _PendingCall) -> list[Chunk]:
        call.started = True
        out: list[Chunk] = [ToolCallStart(index=call.index, id=call.id, name=call.name or "")]
        if call.parts:  # fragments that came before the name
            out.append(ToolCallDelta(index=call.index, arguments_delta="".join(call.parts)))
        return out

    def _end_calls(self) -> list[Chunk]:
        out: list[Chunk] = []
        for call in self._calls:
            if not call.started:
                out.extend(self._start(call))
            raw = "".join(call.parts)
            out.append(
                ToolCallEnd(
                    index=call.index,
                    id=call.id,
                    name=call.name or "",
                    arguments=parse_arguments(raw),
                    raw_arguments=raw,
                )
            )
        return out


def _items(value: object) -> list[dict[str, Any]]:
    """The objects of a JSON array (an absent or malformed one has none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _count(obj: object, name: str) -> int:
    value = _field(obj, name)
    return value if isinstance(value, int) else 0


def _reasoning_text(delta: dict[str, Any]) -> str:
    for name in ("reasoning_content", "reasoning"):
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _usage_chunk(usage: dict[str, Any]) -> UsageChunk:
    details = usage.get("prompt_tokens_details")
    cached = _count(details, "cached_tokens")
    written = _count(details, "cache_write_tokens")
    return UsageChunk(
        input_tokens=max(0, _count(usage, "prompt_tokens") - cached - written),
        output_tokens=_count(usage, "completion_tokens"),
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def build(recipe: ProviderRecipe) -> OpenAICompatibleProvider:
    """The provider of a profile of kind "openai" or "openai-compatible"
    (:mod:`.recipe`)."""
    profile = recipe.profile
    if profile.options.reasoning_effort is not None and recipe.first_time(recipe.name, "effort"):
        log.warning(
            "reasoning_effort is kept in the profile but not sent yet by this version",
            profile=recipe.name,
        )
    return OpenAICompatibleProvider(
        model=profile.model,
        base_url=profile.base_url,
        api_key=recipe.key,
        model_info=recipe.model_info,
        name=recipe.name,
        key_hint=recipe.key_hint,
        timeouts=profile.options.stream_timeouts(),
    )
