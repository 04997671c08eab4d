"""A scriptable fake of the Anthropic Messages streaming API, over real HTTP.

Tests of the Anthropic provider point the real `anthropic` SDK at it. It writes the
event sequence of the real API, event by event::

    message_start (usage)  content_block_start  ping  content_block_delta*
    content_block_stop  [more blocks]  message_delta (stop_reason, usage)  message_stop

each as ``event: <type>`` + ``data: {...}`` over HTTP/1.1 chunked encoding, on the
loopback server core it shares with hdsp's demo model and the fake OpenAI API
(:class:`hdsp.daemon.llm.demo.ChatCompletionsServer`). It misbehaves on request::

    with FakeAnthropic() as fake:                   # listens on 127.0.0.1:<free port>
        fake.script(
            Reply.text("Hello", chunk_size=2, usage=Usage(10, 5, cache_read=90)),
            Reply.thinking("Let me think.", signature="sig-1") + Reply.text("Done."),
            Reply.tool_use([ToolUse("read_file", '{"path": "a.csv"}')], fragment=4),
            Reply.status(429, retry_after=2),
            Reply.overloaded(),                      # 529 overloaded_error
            Reply.prompt_too_long(),                 # 400 "prompt is too long: ..."
            Reply.text("Hello world").cut_after(3),  # drops the connection mid-stream
            Reply.hang(),                            # a few events, then waits for a cancel
            Reply.plain_status(503, "Down for maintenance"),  # a proxy's text, not JSON
            Reply.accept_and_hang(),                 # reads the request, never answers
        )
        ...  # the SDK at fake.base_url ("http://127.0.0.1:PORT": the SDK adds /v1/messages)
        fake.wait_for_requests(2)                    # or: await fake.wait_for_requests_async(2)
        assert fake.requests[0]["system"][0]["cache_control"] == {"type": "ephemeral"}

Each request takes the next scripted reply; with none left it gets
:attr:`FakeAnthropic.default` (a short text) so nothing hangs. Content builders
(:meth:`Reply.text`, :meth:`Reply.thinking`, :meth:`Reply.redacted_thinking`,
:meth:`Reply.tool_use`) combine with ``+``; faults are either whole replies
(:meth:`Reply.status`, :meth:`Reply.overloaded`, :meth:`Reply.prompt_too_long`,
:meth:`Reply.malformed_sse`, :meth:`Reply.error_event_midstream`, :meth:`Reply.hang`,
:meth:`Reply.plain_status`, :meth:`Reply.accept_and_hang`) or modifiers of a
streamed one (``.cut_after(n)`` (FIN), ``.reset_after(n)`` (TCP RST),
``.end_after(n)`` (a clean end, mid-reply), ``.unframed_after(n)`` (broken chunked
framing), ``.hang_after(n)``, ``.malformed_after(n)``, ``.error_after(n)``,
``.slow_first_byte(s)``, ``.paced(s)``, ``.held_after(n, gate)``, ``.without_stop()``,
``.with_stop_reason(r)``: those they share are :class:`tests.fakes.scripted.ScriptedReply`'s), where
``n`` counts the SSE events sent first (``message_start`` is event 0).

Like the real API, the fake refuses (400, 401) a request without a key, without
``max_tokens`` or ``stream: true``, with an empty text block, with more than four
``cache_control`` breakpoints, or with a thinking budget that does not fit
``max_tokens``: a provider bug shows up as the error the real API would give.

Run it by hand, serving default replies: ``python -m tests.fakes.anthropic_server --port 8090``.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hdsp.daemon.llm.demo import ChatExchange
from tests.fakes.scripted import ReceivedRequest, ScriptedReply, ScriptedServer

__all__ = [
    "ContentBlock",
    "FakeAnthropic",
    "ReceivedRequest",
    "Reply",
    "ToolUse",
    "Usage",
    "fake_input_tokens",
    "main",
    "named_event",
    "validate",
]

#: Error types and messages of the real API, by status.
_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "model: claude-test"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests "
        "per minute. Please try again later.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}

_MALFORMED_EVENT = (
    b"event: content_block_delta\n"
    b'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_d\n\n'
)

#: How many ``cache_control`` breakpoints the API accepts in one request.
_MAX_BREAKPOINTS = 4


@dataclass(frozen=True)
class Usage:
    """Token counts of one reply, as the API reports them (the three inputs disjoint)."""

    input_tokens: int
    output_tokens: int
    #: ``cache_read_input_tokens``: prompt tokens read from the cache.
    cache_read: int = 0
    #: ``cache_creation_input_tokens``: prompt tokens written to the cache.
    cache_write: int = 0
    #: Repeat the input counts in ``message_delta`` too (cumulative), as newer API
    #: versions do; by default it carries ``output_tokens`` only.
    repeat_in_delta: bool = False

    def at_start(self) -> dict[str, Any]:
        """``message.usage`` of ``message_start``: output barely begun."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_write,
            "cache_read_input_tokens": self.cache_read,
            "output_tokens": min(1, self.output_tokens),
            "service_tier": "standard",
        }

    def at_end(self) -> dict[str, Any]:
        """``usage`` of ``message_delta``: the final output count."""
        usage: dict[str, Any] = {"output_tokens": self.output_tokens}
        if self.repeat_in_delta:
            usage |= {
                "input_tokens": self.input_tokens,
                "cache_creation_input_tokens": self.cache_write,
                "cache_read_input_tokens": self.cache_read,
            }
        return usage


@dataclass(frozen=True)
class ToolUse:
    """One tool call the fake model makes; `input` is streamed as given."""

    name: str
    #: JSON text, streamed as ``input_json_delta`` fragments; malformed on purpose if you like.
    input: str = "{}"
    #: None: a generated ``toolu_fake_<n>`` id.
    id: str | None = None


@dataclass(frozen=True)
class ContentBlock:
    """One content block of a reply: its ``content_block_start`` payload and deltas."""

    start: Mapping[str, Any]
    deltas: tuple[Mapping[str, Any], ...] = ()


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def named_event(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """One named event, as the API writes it."""
    return f"event: {event_type}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


@dataclass(frozen=True)
class Reply(ScriptedReply):
    """What the fake answers to one request. Build with the class methods."""

    blocks: tuple[ContentBlock, ...] = ()
    #: None: ``message_delta`` says ``stop_reason: null``.
    stop_reason: str | None = "end_turn"
    usage: Usage = field(default_factory=lambda: Usage(25, 10))
    #: False: the stream ends after the content blocks, without message_delta/stop.
    finished: bool = True
    error_type: str = "overloaded_error"
    error_message: str = "Overloaded"

    # ---- content -------------------------------------------------------------

    @classmethod
    def text(
        cls,
        text: str = "Hello from the fake Anthropic server.",
        *,
        chunk_size: int = 4,
        usage: Usage | None = None,
    ) -> Reply:
        """A text block streamed `chunk_size` characters per delta, stop reason end_turn."""
        deltas = tuple({"type": "text_delta", "text": piece} for piece in _pieces(text, chunk_size))
        return cls(
            blocks=(ContentBlock({"type": "text", "text": ""}, deltas),),
            usage=usage if usage is not None else Usage(25, max(1, len(text) // 4)),
        )

    @classmethod
    def thinking(
        cls,
        text: str = "Let me think about this.",
        *,
        signature: str | None = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
        chunk_size: int = 4,
    ) -> Reply:
        """A thinking block: thinking_delta fragments, then its signature_delta.

        `signature` None sends none, as a broken proxy might.
        """
        deltas: list[Mapping[str, Any]] = [
            {"type": "thinking_delta", "thinking": piece} for piece in _pieces(text, chunk_size)
        ]
        if signature is not None:
            deltas.append({"type": "signature_delta", "signature": signature})
        start = {"type": "thinking", "thinking": "", "signature": ""}
        return cls(blocks=(ContentBlock(start, tuple(deltas)),))

    @classmethod
    def redacted_thinking(cls, data: str = "EmwKAhgBEgy3va3pzix") -> Reply:
        """A ``redacted_thinking`` block: encrypted, whole in its start event."""
        return cls(blocks=(ContentBlock({"type": "redacted_thinking", "data": data}),))

    @classmethod
    def tool_use(
        cls,
        calls: Sequence[ToolUse],
        *,
        fragment: int = 8,
        usage: Usage | None = None,
    ) -> Reply:
        """Tool calls as the API streams them, stop reason tool_use.

        Each is a ``tool_use`` block: its id and name (and ``input: {}``) in the
        start event, then the input JSON in ``input_json_delta`` fragments of
        `fragment` characters, the first one empty, as the API sends it.
        """
        blocks = []
        for position, call in enumerate(calls):
            start = {
                "type": "tool_use",
                "id": call.id if call.id is not None else f"toolu_fake_{position}",
                "name": call.name,
                "input": {},
            }
            pieces = ["", *_pieces(call.input, fragment)]
            deltas = tuple({"type": "input_json_delta", "partial_json": p} for p in pieces)
            blocks.append(ContentBlock(start, deltas))
        return cls(
            blocks=tuple(blocks),
            stop_reason="tool_use",
            usage=usage if usage is not None else Usage(40, 20),
        )

    def __add__(self, other: Reply) -> Reply:
        """The blocks of both; everything else (stop reason, usage...) from `other`."""
        return dataclasses.replace(other, blocks=self.blocks + other.blocks)

    # ---- whole-reply faults --------------------------------------------------

    @classmethod
    def status(
        cls,
        code: int,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        error_type: str | None = None,
    ) -> Reply:
        """An HTTP error with the API's JSON error body and optional ``retry-after``."""
        default_type, default_message = _ERRORS.get(
            code, ("api_error" if code >= 500 else "invalid_request_error", "Error.")
        )
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        error = {
            "type": "error",
            "error": {
                "type": error_type if error_type is not None else default_type,
                "message": message if message is not None else default_message,
            },
            "request_id": "req_" + secrets.token_hex(12),
        }
        return cls(status_code=code, error=error, headers=headers)

    @classmethod
    def overloaded(cls) -> Reply:
        """529 ``overloaded_error``: Anthropic's own status for a busy service."""
        return cls.status(529)

    @classmethod
    def prompt_too_long(cls, tokens: int = 208_310, limit: int = 200_000) -> Reply:
        """The API's 400 for a prompt larger than the context window."""
        return cls.status(400, f"prompt is too long: {tokens} tokens > {limit} maximum")

    @classmethod
    def malformed_sse(cls) -> Reply:
        """A stream whose fourth event (a delta) is not JSON."""
        return cls.text("Hello there").malformed_after(4)

    @classmethod
    def error_event_midstream(
        cls, error_type: str = "overloaded_error", message: str = "Overloaded"
    ) -> Reply:
        """A stream that reports ``event: error`` after the first text delta."""
        return cls.text("Hello there").error_after(4, error_type, message)

    @classmethod
    def hang(cls) -> Reply:
        """message_start, a text block with one delta, then nothing until a disconnect."""
        return cls.text("Thinking it over").hang_after(4)

    # ---- modifiers of a streamed reply ------------------------------------------

    def error_after(
        self, events: int, error_type: str = "overloaded_error", message: str = "Overloaded"
    ) -> Reply:
        """Send `events` events, then an ``event: error``, then end the stream."""
        return dataclasses.replace(
            self, fault="error_event", fault_at=events, error_type=error_type, error_message=message
        )

    def without_stop(self) -> Reply:
        """End the HTTP response cleanly after the blocks, with no message_delta/message_stop."""
        return dataclasses.replace(self, finished=False)

    def with_stop_reason(self, reason: str | None) -> Reply:
        """Another stop reason (max_tokens, stop_sequence, refusal, pause_turn...)."""
        return dataclasses.replace(self, stop_reason=reason)

    # ---- the wire ---------------------------------------------------------------

    def events(self, model: str) -> list[bytes]:
        """The whole stream of this reply, event by event, as the API sends it."""
        message: dict[str, Any] = {
            "id": "msg_" + secrets.token_hex(12),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage.at_start(),
        }
        events = [named_event("message_start", {"type": "message_start", "message": message})]
        pinged = False
        for index, block in enumerate(self.blocks):
            events.append(
                named_event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": block.start},
                )
            )
            if not pinged:
                events.append(named_event("ping", {"type": "ping"}))
                pinged = True
            events.extend(
                named_event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
                for delta in block.deltas
            )
            events.append(
                named_event("content_block_stop", {"type": "content_block_stop", "index": index})
            )
        if not pinged:
            events.append(named_event("ping", {"type": "ping"}))
        if self.finished:
            delta = {"stop_reason": self.stop_reason, "stop_sequence": None}
            events.append(
                named_event(
                    "message_delta",
                    {"type": "message_delta", "delta": delta, "usage": self.usage.at_end()},
                )
            )
            events.append(named_event("message_stop", {"type": "message_stop"}))
        return events


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": "req_" + secrets.token_hex(12),
    }


def _blocks_of(body: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every content block of a request: system, tools, messages, tool results."""
    system = body.get("system")
    if isinstance(system, list):
        yield from (block for block in system if isinstance(block, Mapping))
    tools = body.get("tools")
    if isinstance(tools, list):
        yield from (tool for tool in tools if isinstance(tool, Mapping))
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, Mapping):
                continue
            yield block
            inner = block.get("content")
            if block.get("type") == "tool_result" and isinstance(inner, list):
                yield from (part for part in inner if isinstance(part, Mapping))


def validate(body: Mapping[str, Any], headers: Mapping[str, str]) -> tuple[int, str, str] | None:
    """What the real API would refuse in this request: (status, error type, message)."""
    if not headers.get("x-api-key") and not headers.get("authorization"):
        return 401, "authentication_error", "x-api-key header is required"
    if body.get("stream") is not True:
        return (
            400,
            "invalid_request_error",
            "hdsp's fake Anthropic server only answers stream=true.",
        )
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return 400, "invalid_request_error", "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return 400, "invalid_request_error", "messages: at least one message is required"
    blocks = list(_blocks_of(body))
    if any(block.get("type") == "text" and not block.get("text") for block in blocks):
        return 400, "invalid_request_error", "messages: text content blocks must be non-empty"
    breakpoints = sum(1 for block in blocks if "cache_control" in block)
    if breakpoints > _MAX_BREAKPOINTS:
        return (
            400,
            "invalid_request_error",
            f"A maximum of {_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {breakpoints}.",
        )
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return 400, "invalid_request_error", "thinking.budget_tokens: must be >= 1024"
        if max_tokens <= budget:
            return (
                400,
                "invalid_request_error",
                "`max_tokens` must be greater than `thinking.budget_tokens`.",
            )
    return None


def fake_input_tokens(body: Mapping[str, Any]) -> int:
    """What the fake's count_tokens answers for a request `body`: a deterministic
    count (a token per 4 characters of its JSON), not Claude's tokenizer."""
    counted = {key: body.get(key) for key in ("system", "messages", "tools")}
    return max(1, len(json.dumps(counted, separators=(",", ":"))) // 4)


class FakeAnthropic(ScriptedServer[Reply]):
    """The fake server; see the module docstring. Starts on ``with`` or :meth:`start`."""

    base_path = ""  # the SDK appends /v1/messages to the base URL itself
    endpoint = "/v1/messages"

    fake_name = "FakeAnthropic"
    malformed_event = _MALFORMED_EVENT

    def __init__(self, *, port: int = 0, default: Reply | None = None) -> None:
        super().__init__(port=port, default=default)

        #: Whether ``/v1/messages/count_tokens`` answers (a proxy may not have it).
        self.counts_tokens = True
        #: The bodies of the count_tokens requests, in order.
        self.count_requests: list[dict[str, Any]] = []
        #: The status count_tokens answers (not 200: an ``api_error`` body, as the
        #: API sends when it fails).
        self.count_status = 200
        #: What count_tokens answers for a body, in place of :func:`fake_input_tokens`
        #: (a recorded count); None from it is a 400, as for a body it was not given.
        self.count_answer: Callable[[dict[str, Any]], int | None] | None = None

    # ---- serving ----------------------------------------------------------------

    def default_reply(self) -> Reply:
        return Reply.text("This is the default reply of hdsp's fake Anthropic server.")

    def error_body(self, status: int, message: str, error_type: str) -> object:
        return _error_body(error_type, message)

    def serves(self, path: str) -> bool:
        return self.counts_tokens and path.endswith("/v1/messages/count_tokens")

    def handle_other(self, path: str, body: dict[str, Any]) -> tuple[int, object]:
        with self._cond:
            self.count_requests.append(body)
            self._cond.notify_all()
            status = self.count_status
        if status != 200:
            return status, _error_body("api_error", "count_tokens is failing (fake)")
        if self.count_answer is not None:
            answer = self.count_answer(body)
            if answer is None:
                return 400, _error_body("invalid_request_error", "not the recorded request")
            return 200, {"input_tokens": answer}
        return 200, {"input_tokens": fake_input_tokens(body)}

    def handle_chat(self, exchange: ChatExchange) -> None:
        reply = self._take_reply(exchange)
        request_id = {"request-id": "req_" + secrets.token_hex(12)}
        if reply.first_byte_delay != 0 and not self._pause(exchange, reply.first_byte_delay):
            return
        refused = validate(exchange.body, exchange.headers)
        if refused is not None:
            status, error_type, message = refused
            exchange.send_json(status, _error_body(error_type, message), request_id)
            return
        if self.send_plain_text(exchange, reply):
            return
        if reply.status_code != 200:
            exchange.send_json(reply.status_code, reply.error, {**request_id, **reply.headers})
            return
        events = reply.events(exchange.model)
        self.send_stream(exchange, reply, events, {**request_id, **reply.headers})

    def send_error_event(self, exchange: ChatExchange, reply: Reply) -> None:
        payload = {
            "type": "error",
            "error": {"type": reply.error_type, "message": reply.error_message},
        }
        exchange.send_raw(named_event("error", payload))


def main(argv: Sequence[str] | None = None) -> None:
    FakeAnthropic.serve_from_command_line(
        "python -m tests.fakes.anthropic_server", __doc__, Reply.text, argv
    )


if __name__ == "__main__":
    main()
