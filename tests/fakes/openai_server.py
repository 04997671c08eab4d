"""A scriptable fake of the OpenAI Chat Completions streaming API, over real HTTP.

Tests of the provider, and of the whole daemon running as a subprocess, point the
real `openai` SDK at it. It speaks the wire format exactly (it shares its writer
with hdsp's demo server, :mod:`hdsp.daemon.llm.demo`), and misbehaves on request::

    with FakeOpenAI() as fake:                      # listens on 127.0.0.1:<free port>
        fake.script(
            Reply.text("Hello", chunk_size=2, usage=Usage(10, 5, cached=2)),
            Reply.status(429, retry_after=1.5),
            Reply.tool_calls([ToolCall("read_file", '{"path": "a.csv"}')], fragment=4),
            Reply.reasoning("Let me think.") + Reply.text("Done."),
            Reply.text("Hello world").cut_after(3),  # drops the connection mid-stream
            Reply.hang(),                            # first chunk, then waits for a cancel
            Reply.unauthorized_echoing_key(),        # 401 quoting the request's key back
            Reply.plain_status(503, "Down for maintenance"),  # a proxy's text, not JSON
            Reply.accept_and_hang(),                 # reads the request, never answers
            Reply.text("Hello world").held_after(2, gate),  # waits for gate.set() there
        )
        ...  # the SDK at fake.base_url ("http://127.0.0.1:PORT/v1")
        fake.wait_for_requests(2)                    # or: await fake.wait_for_requests_async(2)
        assert fake.requests[0]["stream_options"] == {"include_usage": True}

Each request takes the next scripted reply; with none left it gets
:attr:`FakeOpenAI.default` (a short text) so nothing hangs. Content builders
(:meth:`Reply.text`, :meth:`Reply.reasoning`, :meth:`Reply.tool_calls`) combine
with ``+``; faults are either whole replies (:meth:`Reply.status`,
:meth:`Reply.context_length_exceeded`, :meth:`Reply.unauthorized_echoing_key`,
:meth:`Reply.malformed_sse`, :meth:`Reply.error_event_midstream`, :meth:`Reply.hang`,
:meth:`Reply.plain_status`, :meth:`Reply.accept_and_hang`) or modifiers of a
streamed one (``.cut_after(n)`` (FIN), ``.reset_after(n)`` (TCP RST),
``.end_after(n)`` (a clean end, mid-reply), ``.unframed_after(n)`` (broken chunked
framing), ``.hang_after(n)``, ``.malformed_after(n)``, ``.error_after(n)``,
``.slow_first_byte(s)``, ``.without_usage()``, ``.with_finish_reason(r)``,
``.held_after(n, gate)`` (a pause until the test sets a :class:`threading.Event`)), where
``n`` counts the SSE events sent first (the role chunk is event 0).

Run it by hand, serving default replies: ``python -m tests.fakes.openai_server --port 8089``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hdsp.daemon.llm.demo import ChatExchange, CompletionUsage
from hdsp.daemon.llm.tokens import count_chat_tokens, encoding_for_model
from tests.fakes.scripted import ReceivedRequest, ScriptedReply, ScriptedServer

__all__ = [
    "FakeOpenAI",
    "ReceivedRequest",
    "Reply",
    "ToolCall",
    "Usage",
    "main",
]

#: Token counts of the final usage chunk: ``Usage(prompt, completion, cached=0)``.
Usage = CompletionUsage

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
_ERROR_MESSAGES = {
    400: "Invalid request.",
    401: "Incorrect API key provided: sk-test. You can find your API key at "
    "https://platform.openai.com/account/api-keys.",
    403: "Country, region, or territory not supported.",
    404: "The model `gpt-test` does not exist or you do not have access to it.",
    429: "Rate limit reached for requests. Please try again later.",
    500: "The server had an error while processing your request. Sorry about that!",
    503: "The engine is currently overloaded, please try again later.",
    529: "The service is overloaded, please try again later.",
}
_MALFORMED_EVENT = b'data: {"id": "chatcmpl-broken", "choices": [{"delta": {"content": "x\n\n'


@dataclass(frozen=True)
class ToolCall:
    """One tool call the fake model makes; `arguments` is streamed as given."""

    name: str
    #: JSON text, as the model would stream it; malformed on purpose if you like.
    arguments: str = "{}"
    #: None: a generated ``call_<n>`` id.
    id: str | None = None
    #: Send no id at all, as some lax servers do.
    omit_id: bool = False


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass(frozen=True)
class Reply(ScriptedReply):
    """What the fake answers to one request. Build with the class methods."""

    #: The ``delta`` objects streamed after the role chunk, one chunk each.
    deltas: tuple[Mapping[str, Any], ...] = ()
    finish_reason: str | None = "stop"
    usage: CompletionUsage | None = field(default_factory=lambda: Usage(12, 5))
    error_message: str = _ERROR_MESSAGES[500]
    #: Replace ``{key}`` in the error body's message with the request's API key
    #: (the ``Authorization: Bearer`` value), as some servers quote it back.
    echo_key: bool = False

    # ---- content -------------------------------------------------------------

    @classmethod
    def text(
        cls,
        text: str = "Hello from the fake OpenAI server.",
        *,
        chunk_size: int = 4,
        usage: CompletionUsage | None = None,
    ) -> Reply:
        """Text streamed `chunk_size` characters per chunk, finish reason "stop"."""
        return cls(
            deltas=tuple({"content": piece} for piece in _pieces(text, chunk_size)),
            usage=usage if usage is not None else Usage(12, max(1, len(text) // 4)),
        )

    @classmethod
    def reasoning(
        cls,
        text: str = "Let me think about this.",
        *,
        chunk_size: int = 4,
        key: Literal["reasoning_content", "reasoning"] = "reasoning_content",
    ) -> Reply:
        """Reasoning deltas under `key`: vLLM/DeepSeek's or Ollama/OpenRouter's name."""
        return cls(deltas=tuple({key: piece} for piece in _pieces(text, chunk_size)))

    @classmethod
    def tool_calls(
        cls,
        calls: Sequence[ToolCall],
        *,
        fragment: int = 8,
        interleave: bool = False,
        usage: CompletionUsage | None = None,
    ) -> Reply:
        """Tool calls as OpenAI streams them, finish reason "tool_calls".

        The first chunk of each call carries its index, id, type and name with
        empty arguments; then the arguments follow `fragment` characters per
        chunk. `interleave` alternates between the calls' fragments.
        """
        streams: list[list[dict[str, Any]]] = []
        for index, call in enumerate(calls):
            head: dict[str, Any] = {"index": index}
            if not call.omit_id:
                head["id"] = call.id if call.id is not None else f"call_{index}_fake"
            head["type"] = "function"
            head["function"] = {"name": call.name, "arguments": ""}
            fragments = [
                {"index": index, "function": {"arguments": piece}}
                for piece in _pieces(call.arguments, fragment)
            ]
            streams.append([head, *fragments])
        ordered: list[dict[str, Any]] = []
        if interleave:
            for position in range(max((len(s) for s in streams), default=0)):
                ordered.extend(s[position] for s in streams if position < len(s))
        else:
            ordered = [item for s in streams for item in s]
        return cls(
            deltas=tuple({"tool_calls": [item]} for item in ordered),
            finish_reason="tool_calls",
            usage=usage if usage is not None else Usage(20, 10),
        )

    def __add__(self, other: Reply) -> Reply:
        """The deltas of both; everything else (finish reason, usage...) from `other`."""
        return dataclasses.replace(other, deltas=self.deltas + other.deltas)

    # ---- whole-reply faults --------------------------------------------------

    @classmethod
    def status(
        cls,
        code: int,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        error_type: str | None = None,
        error_code: str | None = None,
    ) -> Reply:
        """An HTTP error with OpenAI's JSON error body and optional Retry-After."""
        default_type, default_code = _ERROR_TYPES.get(code, ("server_error", None))
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        if retry_after_ms is not None:
            headers["retry-after-ms"] = f"{retry_after_ms:g}"
        error = {
            "message": message if message is not None else _ERROR_MESSAGES.get(code, "Error."),
            "type": error_type if error_type is not None else default_type,
            "param": None,
            "code": error_code if error_code is not None else default_code,
        }
        return cls(status_code=code, error={"error": error}, headers=headers)

    @classmethod
    def unauthorized_echoing_key(cls) -> Reply:
        """A 401 whose body quotes the whole key the request was sent with, as
        careless providers and proxies do (OpenAI itself shows only its ends)."""
        reply = cls.status(
            401,
            "Incorrect API key provided: {key}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
        )
        return dataclasses.replace(reply, echo_key=True)

    @classmethod
    def context_length_exceeded(cls) -> Reply:
        """OpenAI's 400 for a prompt larger than the context window."""
        return cls.status(
            400,
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130532 tokens. Please reduce the length of the messages.",
            error_code="context_length_exceeded",
        )

    @classmethod
    def malformed_sse(cls) -> Reply:
        """A stream whose second event is not JSON."""
        return cls.text("Hello there").malformed_after(2)

    @classmethod
    def error_event_midstream(cls, message: str = _ERROR_MESSAGES[500]) -> Reply:
        """A stream that reports ``{"error": ...}`` after two events, as OpenAI does."""
        return cls.text("Hello there").error_after(2, message)

    @classmethod
    def hang(cls) -> Reply:
        """The role chunk and one text chunk, then nothing until the client or fake closes."""
        return cls.text("Thinking it over").hang_after(2)

    # ---- modifiers of a streamed reply ------------------------------------------

    def error_after(self, events: int, message: str = _ERROR_MESSAGES[500]) -> Reply:
        """Send `events` events, then an ``{"error": ...}`` event, then end the stream."""
        return dataclasses.replace(
            self, fault="error_event", fault_at=events, error_message=message
        )

    def without_usage(self) -> Reply:
        """No usage chunk, even when the request asks for one (as some servers do)."""
        return dataclasses.replace(self, usage=None)

    def with_finish_reason(self, reason: str | None) -> Reply:
        """Another finish reason; None sends none at all (then ``[DONE]``)."""
        return dataclasses.replace(self, finish_reason=reason)


class FakeOpenAI(ScriptedServer[Reply]):
    """The fake server; see the module docstring. Starts on ``with`` or :meth:`start`."""

    fake_name = "FakeOpenAI"
    malformed_event = _MALFORMED_EVENT

    def __init__(
        self, *, port: int = 0, default: Reply | None = None, context_window: int | None = None
    ) -> None:
        super().__init__(port=port, default=default)
        #: Set: the fake is a model with this window. It counts each request's
        #: prompt as OpenAI does (the model's tokenizer, o200k_base for names it does
        #: not know), refuses one that does not fit with the API's
        #: context_length_exceeded, and reports the count as the reply's prompt_tokens.
        self.context_window = context_window
        #: The prompt tokens of each request, in order (with `context_window` set).
        self.prompt_tokens: list[int] = []
        #: Requests refused for their length.
        self.refused_for_length = 0
        #: Set: consulted first for each request (its body); a Reply it returns
        #: answers it, None leaves it to the script. A model that answers by what
        #: it is asked, for sessions too long to script reply by reply.
        self.responder: Callable[[dict[str, Any]], Reply | None] | None = None

    # ---- serving ----------------------------------------------------------------

    def default_reply(self) -> Reply:
        return Reply.text("This is the default reply of hdsp's fake OpenAI server.")

    def model_names(self) -> list[str]:
        return ["gpt-test"]

    def _prompt_tokens(self, body: dict[str, Any]) -> int:
        model = str(body.get("model", ""))
        encoding = encoding_for_model(model) or encoding_for_model("gpt-4o")
        assert encoding is not None
        return count_chat_tokens(encoding, body.get("messages", []), body.get("tools"))

    def _take_reply(self, exchange: ChatExchange) -> Reply:
        if self.responder is None:
            return super()._take_reply(exchange)
        # Recorded first: a test may wait for the request while the responder waits.
        with self._cond:
            self._received.append(
                ReceivedRequest("POST", exchange.path, dict(exchange.headers), exchange.body)
            )
            self._cond.notify_all()
        answer = self.responder(exchange.body)
        if answer is not None:
            return answer
        with self._cond:
            return self._script.popleft() if self._script else self.default

    def handle_chat(self, exchange: ChatExchange) -> None:
        if self.context_window is not None:
            prompt = self._prompt_tokens(exchange.body)
            with self._cond:
                self.prompt_tokens.append(prompt)
            requested = exchange.body.get("max_completion_tokens") or exchange.body.get(
                "max_tokens", 0
            )
            if prompt + int(requested) > self.context_window:
                with self._cond:
                    self.refused_for_length += 1
                self._take_reply(exchange)
                message = (
                    f"This model's maximum context length is {self.context_window} tokens. "
                    f"However, your messages resulted in {prompt} tokens. Please reduce the "
                    "length of the messages."
                )
                error = {"message": message, "type": "invalid_request_error", "param": None}
                exchange.send_json(400, {"error": error | {"code": "context_length_exceeded"}})
                return
            reply = self._take_reply(exchange)
            if reply.usage is not None:
                reply = dataclasses.replace(
                    reply,
                    usage=Usage(prompt, reply.usage.completion_tokens),
                )
        else:
            reply = self._take_reply(exchange)
        if reply.first_byte_delay != 0 and not self._pause(exchange, reply.first_byte_delay):
            return
        if self.send_plain_text(exchange, reply):
            return
        if reply.status_code != 200:
            error = reply.error
            if reply.echo_key and error is not None:
                key = exchange.headers.get("authorization", "").removeprefix("Bearer ")
                inner = dict(error["error"])
                inner["message"] = str(inner["message"]).replace("{key}", key)
                error = {"error": inner}
            exchange.send_json(reply.status_code, error, reply.headers)
            return
        if exchange.body.get("stream") is not True:
            exchange.send_json(
                400,
                {
                    "error": {
                        "message": "hdsp's fake OpenAI server only answers stream=true.",
                        "type": "invalid_request_error",
                        "param": "stream",
                        "code": None,
                    }
                },
            )
            return
        events = exchange.reply_events(
            reply.deltas, finish_reason=reply.finish_reason, usage=reply.usage
        )
        self.send_stream(exchange, reply, events, reply.headers)

    def send_error_event(self, exchange: ChatExchange, reply: Reply) -> None:
        error = {"message": reply.error_message, "type": "server_error", "param": None}
        exchange.send_event({"error": error | {"code": None}})


def main(argv: Sequence[str] | None = None) -> None:
    FakeOpenAI.serve_from_command_line(
        "python -m tests.fakes.openai_server", __doc__, Reply.text, argv
    )


if __name__ == "__main__":
    main()
