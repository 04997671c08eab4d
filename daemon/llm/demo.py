"""The built-in `demo` model, and the Chat Completions streaming server it runs on.

The `demo` profile lets anyone try hdsp without a key. Rather than a special code
path in the engine, the daemon starts (once, on first use) a small
OpenAI-compatible HTTP server on 127.0.0.1 that streams canned replies, and talks
to it with the same :class:`OpenAICompatibleProvider` as for a real server. So the
demo exercises the real SDK, the real SSE parsing and the real error handling, and
every reply says plainly that it is simulated.

The server core (:class:`ChatCompletionsServer`, :class:`ChatExchange`) writes
wire-accurate Chat Completions streams: ``chat.completion.chunk`` objects as
``data: {...}`` events over HTTP/1.1 chunked transfer encoding, the final usage
chunk with empty ``choices`` when the request asked for it, then
``data: [DONE]``. The scriptable fake in ``tests/fakes/openai_server.py`` builds on
it, so the wire format is written once.

Threads, not the event loop: the server must keep answering while the event loop
is busy (and vice versa), and tests use it from synchronous code too.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import selectors
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal, Self
from urllib.parse import urlsplit

from hdsp.daemon.conversation import ModelInfo

from .openai_compat import OpenAICompatibleProvider

if TYPE_CHECKING:
    from .recipe import ProviderRecipe


__all__ = [
    "DEMO_MODEL",
    "DEMO_MODEL_INFO",
    "SSE_DONE",
    "ChatCompletionsServer",
    "ChatExchange",
    "CompletionUsage",
    "DemoServer",
    "WaitResult",
    "build",
    "demo_provider",
    "demo_reply",
    "sse_event",
]

_log = logging.getLogger(__name__)

DEMO_MODEL = "hdsp-demo"
DEMO_MODEL_INFO = ModelInfo(context_window=128_000, max_output=4_096)

#: The event that ends every Chat Completions stream.
SSE_DONE = b"data: [DONE]\n\n"

#: Why :meth:`ChatExchange.wait` returned.
WaitResult = Literal["timeout", "closing", "disconnected"]

# How often serve_forever() looks at its shutdown flag: the latency of close().
_POLL_INTERVAL = 0.05
# Bound on waiting for handler threads at close; they are woken, so this is slack.
_JOIN_TIMEOUT = 5.0


def sse_event(payload: Mapping[str, Any] | str) -> bytes:
    """One ``data:`` event, JSON as compact as OpenAI's own."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


@dataclass(frozen=True)
class CompletionUsage:
    """Token counts for the final usage chunk (OpenAI's ``CompletionUsage``)."""

    prompt_tokens: int
    completion_tokens: int
    #: ``prompt_tokens_details.cached_tokens``: part of prompt_tokens read from cache.
    cached: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }


class ChatExchange:
    """One ``POST .../chat/completions``: the decoded request and the means to answer.

    Writing methods raise ``ConnectionError`` when the client has gone; the server
    treats that as a normal end of the exchange (see :attr:`disconnected`).
    """

    def __init__(self, handler: _Handler, body: dict[str, Any]) -> None:
        self._handler = handler
        self.body = body
        #: Request headers, names in lower case.
        self.headers = {name.lower(): value for name, value in handler.headers.items()}
        self.path = urlsplit(handler.path).path
        model = body.get("model")
        self.model = model if isinstance(model, str) else "unknown"
        options = body.get("stream_options")
        self.include_usage = isinstance(options, dict) and options.get("include_usage") is True
        self.completion_id = "chatcmpl-" + secrets.token_hex(12)
        self.created = int(time.time())
        #: True once the client went away before the exchange finished.
        self.disconnected = False
        self._streaming = False

    # ---- chunk objects -----------------------------------------------------

    def chunk(self, delta: Mapping[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        """A ``chat.completion.chunk`` with one choice."""
        chunk: dict[str, Any] = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_hdsp",
            "choices": [
                {"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def usage_chunk(self, usage: CompletionUsage) -> dict[str, Any]:
        """The last chunk when ``stream_options.include_usage``: no choices, usage."""
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_hdsp",
            "choices": [],
            "usage": usage.to_wire(),
        }

    def reply_events(
        self,
        deltas: Iterable[Mapping[str, Any]],
        *,
        finish_reason: str | None,
        usage: CompletionUsage | None,
    ) -> list[bytes]:
        """The whole stream of one reply, event by event, as OpenAI sends it.

        A role chunk first, one chunk per delta, a chunk with the finish reason and
        an empty delta (unless `finish_reason` is None), the usage chunk if the request asked for usage and `usage`
        is given, then ``[DONE]``.
        """
        events = [sse_event(self.chunk({"role": "assistant", "content": "", "refusal": None}))]
        events.extend(sse_event(self.chunk(delta)) for delta in deltas)
        if finish_reason is not None:
            events.append(sse_event(self.chunk({}, finish_reason)))
        if self.include_usage and usage is not None:
            events.append(sse_event(self.usage_chunk(usage)))
        events.append(SSE_DONE)
        return events

    # ---- writing -----------------------------------------------------------

    def send_json(
        self, status: int, payload: object, headers: Mapping[str, str] | None = None
    ) -> None:
        """A complete non-streaming response (an error, a models list)."""
        self._handler.send_json(status, payload, headers)

    def start_stream(self, headers: Mapping[str, str] | None = None) -> None:
        """Status 200 and the headers of an SSE response in chunked encoding."""
        handler = self._handler
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("x-request-id", "req_" + secrets.token_hex(8))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        self._streaming = True

    def send_raw(self, data: bytes) -> None:
        """`data` as one HTTP chunk, sent at once; well-formed SSE or not."""
        if data:
            self._handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def send_event(self, payload: Mapping[str, Any] | str) -> None:
        self.send_raw(sse_event(payload))

    def end_stream(self) -> None:
        """The terminating zero-length chunk: the response is complete."""
        self._handler.wfile.write(b"0\r\n\r\n")
        self._streaming = False

    def send_text(
        self,
        status: int,
        text: str,
        content_type: str = "text/plain; charset=utf-8",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """A complete response whose body is not JSON: a proxy's or a load
        balancer's error page, as plain text or HTML."""
        self._handler.send_body(status, text.encode(), content_type, headers)

    def send_unframed(self, data: bytes) -> None:
        """`data` as it is, outside the chunked framing: the response can no longer
        be parsed (a proxy that mangles the stream). The connection is not reused."""
        self._handler.close_connection = True
        self._handler.wfile.write(data)

    def reset(self) -> None:
        """Abort the connection with a TCP RST (not the FIN of :meth:`drop`), as a
        crashed server or a firewall does."""
        self._handler.close_connection = True
        connection = self._handler.connection
        try:
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            # The descriptor itself, at once: `socket.close()` would wait for the
            # handler's file objects, and the server would send a FIN first. What
            # the handler does with the detached socket afterwards fails quietly.
            os.close(connection.detach())
        except OSError:
            pass

    def drop(self) -> None:
        """Close the connection now, mid-response if a stream is open."""
        self._handler.close_connection = True
        try:
            self._handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def wait(self, seconds: float | None) -> WaitResult:
        """Block this handler thread for up to `seconds` (None: no limit).

        Returns early when the server is closing or the client disconnects, so a
        hanging or slow reply never outlives its test or its client.
        """
        return self._handler.server.wait(self._handler.connection, seconds)


class _HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its open connections, to end them at close."""

    daemon_threads = True
    block_on_close = False  # close() joins the handlers itself, with a bound

    def __init__(self, address: tuple[str, int], owner: ChatCompletionsServer) -> None:
        self.owner = owner
        self.lock = threading.Lock()
        self.connections: dict[socket.socket, threading.Thread] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"{type(self.owner).__name__}-{client_address[1]}",
            daemon=True,
        )
        with self.lock:
            self.connections[request] = thread
        thread.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.lock:
                self.connections.pop(request, None)
            self.owner.connection_closed()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Called from inside the `except` of process_request_thread.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return  # the client went away: normal for a server, not a failure
        if exc is not None:
            self.owner.handler_failed(exc)

    def wait(self, connection: socket.socket, seconds: float | None) -> WaitResult:
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ, "closing")
            selector.register(connection, selectors.EVENT_READ, "client")
            ready = selector.select(seconds)
        if not ready:
            return "timeout"
        labels = {key.data for key, _ in ready}
        if "closing" in labels:
            return "closing"
        # A client sends nothing while its response is being written, so a readable
        # socket means end of file or a reset: the client is gone.
        return "disconnected"

    def wake_all(self) -> None:
        """Make every current and future :meth:`wait` return "closing"."""
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def close_connections(self) -> list[threading.Thread]:
        with self.lock:
            items = list(self.connections.items())
        for connection, _ in items:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return [thread for _, thread in items]

    def server_close(self) -> None:
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked responses, as real servers
    # Each event goes out as it is written, as from a real server: with Nagle's
    # algorithm a small write waits for the ACK of the one before, which the
    # client delays (up to 40 ms on Linux) on a kept-alive connection.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the daemon logs through structlog, tests read `FakeOpenAI.requests`."""

    def send_json(
        self, status: int, payload: object, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_body(status, json.dumps(payload).encode(), "application/json", headers)

    def send_body(
        self,
        status: int,
        data: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_" + secrets.token_hex(8))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error_json(self, status: int, message: str, error_type: str) -> None:
        self.send_json(status, self.server.owner.error_body(status, message, error_type))

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path.endswith("/models"):
            created = int(time.time())
            models = [
                {"id": name, "object": "model", "created": created, "owned_by": "hdsp"}
                for name in self.server.owner.model_names()
            ]
            self.send_json(200, {"object": "list", "data": models})
        else:
            self._send_error_json(404, f"Unknown path {path}.", "invalid_request_error")

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            self._send_error_json(411, "A Content-Length is required.", "invalid_request_error")
            return
        raw = self.rfile.read(int(length))
        owner = self.server.owner
        other = path if not path.endswith(owner.endpoint) else None
        if other is not None and not owner.serves(other):
            self._send_error_json(404, f"Unknown path {path}.", "invalid_request_error")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_error_json(400, "The body must be a JSON object.", "invalid_request_error")
            return
        if other is not None:
            status, answer = owner.handle_other(other, body)
            self.send_json(status, answer)
            return
        exchange = ChatExchange(self, body)
        try:
            owner.handle_chat(exchange)
        except ConnectionError:
            exchange.disconnected = True
            self.close_connection = True
        finally:
            if exchange._streaming and not exchange.disconnected:
                # The handler returned with the stream open: the response cannot
                # be framed any more, so the connection cannot be reused.
                self.close_connection = True
            owner.exchange_finished(exchange)


class ChatCompletionsServer:
    """An OpenAI Chat Completions endpoint on loopback, one thread per connection.

    Subclasses answer in :meth:`handle_chat`. :meth:`start` binds an ephemeral port
    (or `port`) and returns the base URL to give the SDK (``.../v1``);
    :meth:`close` wakes waiting handlers, ends open connections and joins the
    threads. Both are idempotent, and the server is a context manager.

    Another streaming API can reuse this plumbing by setting :attr:`base_path`,
    :attr:`endpoint` and :meth:`error_body` (the fake Anthropic Messages API in
    ``tests/fakes/anthropic_server.py`` does).
    """

    #: Appended to ``http://127.0.0.1:PORT`` to make :attr:`base_url`, what the SDK is given.
    base_path = "/v1"
    #: POSTs to a path that ends with this reach :meth:`handle_chat`; others get a 404.
    endpoint = "/chat/completions"

    def __init__(self, *, port: int = 0) -> None:
        self._port = port
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._base_url: str | None = None
        self._closed = False

    # ---- to override -------------------------------------------------------

    def handle_chat(self, exchange: ChatExchange) -> None:
        """Answer one chat completion request. Runs in the connection's thread."""
        raise NotImplementedError

    def serves(self, path: str) -> bool:
        """Whether POSTs to `path` (not the chat endpoint) reach :meth:`handle_other`."""
        return False

    def handle_other(self, path: str, body: dict[str, Any]) -> tuple[int, object]:
        """Answer a POST to another path :meth:`serves`: its status and JSON body."""
        raise NotImplementedError

    def exchange_finished(self, exchange: ChatExchange) -> None:
        """Called after every :meth:`handle_chat`, also when the client went away."""

    def handler_failed(self, exc: BaseException) -> None:
        """An exception escaped :meth:`handle_chat` (a bug): log it."""
        _log.error("chat completions handler failed", exc_info=exc)

    def connection_closed(self) -> None:
        """Called as each connection ends (in its thread), whichever side closed it."""

    def model_names(self) -> list[str]:
        """What ``GET /v1/models`` lists."""
        return []

    def error_body(self, status: int, message: str, error_type: str) -> object:
        """The JSON body of an error the plumbing answers itself (bad path, bad body)."""
        return {"error": {"message": message, "type": error_type, "param": None, "code": None}}

    # ---- life cycle --------------------------------------------------------

    def start(self) -> str:
        """Listen (on first call) and return the base URL, e.g. http://127.0.0.1:PORT/v1."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{type(self).__name__} is closed")
            if self._base_url is None:
                httpd = _HTTPServer(("127.0.0.1", self._port), self)
                port = httpd.server_address[1]
                thread = threading.Thread(
                    target=httpd.serve_forever,
                    args=(_POLL_INTERVAL,),
                    name=f"{type(self).__name__}-{port}",
                    daemon=True,
                )
                thread.start()
                self._httpd, self._thread = httpd, thread
                self._base_url = f"http://127.0.0.1:{port}{self.base_path}"
            return self._base_url

    @property
    def open_connections(self) -> int:
        """Connections from clients now open (kept-alive ones too)."""
        httpd = self._httpd
        if httpd is None:
            return 0
        with httpd.lock:
            return len(httpd.connections)

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError(f"{type(self).__name__} is not started; call start() first")
        return self._base_url

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        httpd.wake_all()
        httpd.shutdown()
        thread.join()
        deadline = time.monotonic() + _JOIN_TIMEOUT
        for handler_thread in httpd.close_connections():
            handler_thread.join(max(0.0, deadline - time.monotonic()))
        httpd.server_close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# ---- the demo model ----------------------------------------------------------

_DEMO_REASONING = (
    "Simulated reasoning from hdsp's demo model: nothing is thinking here. This canned "
    "text only shows where a real model's reasoning would appear."
)


_DEMO_PROPOSAL = (
    "[Simulated] This is hdsp's demo model, not a real one: it proposes a canned note, "
    "and hdsp asks you before writing it."
)


def _message_text(message: object) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def demo_reply(body: Mapping[str, Any]) -> tuple[str, str]:
    """The demo model's (reasoning, text) for a Chat Completions request body.

    Canned, and labelled so nobody mistakes it for a model's answer.
    """
    raw_messages = body.get("messages")
    messages = raw_messages if isinstance(raw_messages, list) else []
    user_turns = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    last = messages[-1] if messages else None
    asked = " ".join(_message_text(user_turns[-1]).split()) if user_turns else ""
    if len(asked) > 200:
        asked = asked[:197] + "..."
    label = (
        "[Simulated reply] This is hdsp's demo model: a canned reply. No real model was "
        "called and nothing you typed left this machine."
    )
    how_to = (
        "To work with a real model, start hdspd with HDSP_BASE_URL, HDSP_MODEL and "
        "HDSP_API_KEY set for any OpenAI-compatible API (OpenAI, vLLM, Ollama, ...) "
        "and choose that profile instead of `demo`."
    )
    if isinstance(last, dict) and last.get("role") == "tool":
        text = f"{label}\n\nThe demo model received a tool result but cannot read it. {how_to}"
    elif len(user_turns) <= 1:
        text = (
            f"{label}\n\nYou asked: \u201c{asked}\u201d\n\n"
            "With a real model, hdsp would now plan the analysis, run Python in your "
            "Jupyter kernel, look at the outputs and explain what it found, asking you "
            f"before anything risky.\n\n{how_to}"
        )
    else:
        text = (
            f"{label}\n\nYou said: \u201c{asked}\u201d\n\n"
            "The demo model answers every message with canned text like this one, so "
            f"you can see how a conversation flows. {how_to}"
        )
    return _DEMO_REASONING, text


_FILE_NAME = re.compile(r"\b([\w./-]+\.(?:md|txt|py|csv|json))\b")
#: A file a note goes to, and words that ask for one to be written.
_NOTE_FILE = re.compile(r"\b([\w./-]+\.(?:md|txt))\b")
_WRITE_WORDS = re.compile(r"\b(?:write|save|note|create)\b", re.IGNORECASE)
#: Where the note goes when the message names only files to read (sales.csv).
DEMO_NOTE = "hdsp-demo-note.md"


def demo_tool_call(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """The demo model's tool call, if it makes one: offered write_to_file and
    asked to write a note to a file (the last name like notes.md in a message
    that says write, save, note or create), it writes a short, clearly simulated
    note there; a message that names only other files (`Load sales.csv`) gets
    the note in hdsp-demo-note.md, never over a file it was asked to read. Once
    that result is back, it completes. So a demo session shows the approval of
    a file edit end to end."""
    tools = {
        t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)
    }
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages:
        return None
    last = messages[-1]
    if last.get("role") == "tool" and "attempt_completion" in tools:
        if _message_text(last).startswith("The user denied"):
            result = (
                "[Simulated] You denied the note, so the demo model wrote nothing. With a "
                "real model, this is where hdsp would say what it did instead."
            )
        else:
            result = (
                "[Simulated] The demo model wrote the note you approved. With a real model, "
                "this is where hdsp would summarise what it did and found."
            )
        return "attempt_completion", json.dumps({"result": result})
    if last.get("role") != "user" or "write_to_file" not in tools:
        return None
    text = _message_text(last)
    if _FILE_NAME.search(text) is None:
        return None
    notes = _NOTE_FILE.findall(text)
    path = notes[-1] if notes and _WRITE_WORDS.search(text) else DEMO_NOTE
    content = (
        "# A note from hdsp's demo model\n\n"
        "This file was written by a simulated model (no real model was called), after "
        "you approved the change in hdsp.\n"
    )
    return "write_to_file", json.dumps({"path": path, "content": content})


def _pieces(text: str) -> list[str]:
    """Word-sized pieces, as a model streams tokens."""
    return re.findall(r"\s*\S+", text) or [text]


class DemoServer(ChatCompletionsServer):
    """The demo model's server: streams :func:`demo_reply` for every request.

    `chunk_delay` paces the stream (seconds between chunks) so a person sees it
    arrive; 0, the default, sends everything at once.
    """

    def __init__(self, *, port: int = 0, chunk_delay: float = 0.0) -> None:
        super().__init__(port=port)
        self.chunk_delay = chunk_delay

    def model_names(self) -> list[str]:
        return [DEMO_MODEL]

    def handle_chat(self, exchange: ChatExchange) -> None:
        call = demo_tool_call(exchange.body)
        if call is not None and exchange.body.get("stream") is True:
            name, arguments = call
            head = {"index": 0, "id": f"call_demo_{name}", "type": "function"}
            deltas: list[Mapping[str, Any]] = []
            if name == "write_to_file":
                # Said before the ask, so nobody takes the proposal for a model's.
                deltas += [{"content": piece} for piece in _pieces(_DEMO_PROPOSAL)]
            deltas += [
                {"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]},
                *(
                    {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                    for piece in _pieces(arguments)
                ),
            ]
            exchange.start_stream()
            usage = CompletionUsage(100, max(1, len(arguments) // 4))
            for event in exchange.reply_events(deltas, finish_reason="tool_calls", usage=usage):
                exchange.send_raw(event)
            exchange.end_stream()
            return
        reasoning, text = demo_reply(exchange.body)
        prompt_tokens = max(1, len(json.dumps(exchange.body.get("messages", []))) // 4)
        usage = CompletionUsage(prompt_tokens, max(1, (len(reasoning) + len(text)) // 4))
        if exchange.body.get("stream") is not True:
            exchange.send_json(
                200,
                {
                    "id": exchange.completion_id,
                    "object": "chat.completion",
                    "created": exchange.created,
                    "model": exchange.model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text, "refusal": None},
                            "logprobs": None,
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage.to_wire(),
                },
            )
            return
        deltas = [{"reasoning_content": piece} for piece in _pieces(reasoning)]
        deltas += [{"content": piece} for piece in _pieces(text)]
        exchange.start_stream()
        for event in exchange.reply_events(deltas, finish_reason="stop", usage=usage):
            exchange.send_raw(event)
            if self.chunk_delay > 0 and exchange.wait(self.chunk_delay) != "timeout":
                exchange.drop()
                return
        exchange.end_stream()


def demo_provider(server: DemoServer) -> OpenAICompatibleProvider:
    """A provider for the demo model, starting `server` if it is not running yet."""
    return OpenAICompatibleProvider(
        model=DEMO_MODEL,
        base_url=server.start(),
        # Not a secret: the demo server accepts anything, and needs no key.
        api_key="hdsp-demo",
        model_info=DEMO_MODEL_INFO,
        name="demo",
    )


def build(recipe: ProviderRecipe) -> OpenAICompatibleProvider:
    """The provider of the profile of kind "demo" (:mod:`.recipe`): one demo
    server for the daemon, with a small delay per chunk so that the demo shows
    streaming as it is."""
    return demo_provider(recipe.shared("demo", lambda: DemoServer(chunk_delay=0.02)))
