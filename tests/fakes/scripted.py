"""What the scriptable fakes share: a queue of replies, a log of requests, waiting.

:class:`ScriptedServer` is the loopback server core of hdsp's demo model
(:class:`hdsp.daemon.llm.demo.ChatCompletionsServer`) plus the scripting and
inspection the fakes of the OpenAI and Anthropic APIs
(``tests.fakes.openai_server``, ``tests.fakes.anthropic_server``) offer: replies
queued with :meth:`~ScriptedServer.script` and taken one per request (the
fake's :attr:`~ScriptedServer.default` when none is left), every request
recorded, disconnects counted, and ways to wait for them (and for open
connections to fall), from threads or async tests. Subclasses say how a reply
goes on the wire; :class:`ScriptedReply` holds what their replies share (an
error answer in place of a stream, delays, and faults midway), and
:meth:`~ScriptedServer.send_stream` sends a stream as a reply says.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar

import anyio.to_thread

from hdsp.daemon.llm.demo import ChatCompletionsServer, ChatExchange

__all__ = ["Fault", "ReceivedRequest", "ScriptedReply", "ScriptedServer"]

Fault = Literal["cut", "hang", "malformed", "error_event", "reset", "end", "unframed"]


@dataclass(frozen=True)
class ScriptedReply:
    """What the replies of every fake share: an answer that is not a stream, the
    pace of a stream, and the faults and pauses in the middle of one. A fake's
    ``Reply`` adds its content; the fakes' module docstrings show them in use."""

    #: Not 200: answer with this status and `error` as the JSON body, no stream.
    status_code: int = 200
    error: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Not None (with a status that is not 200): the body as this text, not JSON.
    body_text: str | None = None
    content_type: str = "text/plain; charset=utf-8"
    #: Seconds before the status line; None: never (until the client leaves).
    first_byte_delay: float | None = 0.0
    #: Seconds between two SSE events (a model that streams at reading pace).
    event_interval: float = 0.0
    fault: Fault | None = None
    #: How many SSE events go out before the fault.
    fault_at: int = 0
    #: Not None: after `hold_at` SSE events, wait until the test sets this event.
    hold: threading.Event | None = None
    hold_at: int = 0

    # ---- whole-reply faults --------------------------------------------------

    @classmethod
    def plain_status(
        cls,
        code: int,
        text: str = "Service Unavailable: the upstream server is restarting.",
        *,
        content_type: str = "text/plain; charset=utf-8",
        retry_after: float | None = None,
    ) -> Self:
        """An HTTP error whose body is not the API's JSON: a proxy's text or HTML page."""
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(status_code=code, body_text=text, content_type=content_type, headers=headers)

    @classmethod
    def accept_and_hang(cls) -> Self:
        """Read the request, then send nothing at all (not even the status line)
        until the client leaves or the fake closes."""
        return cls(first_byte_delay=None)

    # ---- modifiers of a streamed reply ------------------------------------------

    def cut_after(self, events: int) -> Self:
        """Drop the connection after `events` events, mid-response."""
        return dataclasses.replace(self, fault="cut", fault_at=events)

    def paced(self, seconds: float) -> Self:
        """The same reply with `seconds` between its SSE events."""
        return dataclasses.replace(self, event_interval=seconds)

    def hang_after(self, events: int) -> Self:
        """Send `events` events, then block until the client disconnects or the fake closes."""
        return dataclasses.replace(self, fault="hang", fault_at=events)

    def malformed_after(self, events: int) -> Self:
        """Send `events` events, then one whose data is not JSON, then end the stream."""
        return dataclasses.replace(self, fault="malformed", fault_at=events)

    def reset_after(self, events: int) -> Self:
        """Send `events` events, then abort the connection with a TCP RST."""
        return dataclasses.replace(self, fault="reset", fault_at=events)

    def end_after(self, events: int) -> Self:
        """Send `events` events, then end the HTTP response cleanly, mid-reply."""
        return dataclasses.replace(self, fault="end", fault_at=events)

    def unframed_after(self, events: int) -> Self:
        """Send `events` events, then bytes that break the HTTP chunked framing."""
        return dataclasses.replace(self, fault="unframed", fault_at=events)

    def held_after(self, events: int, gate: threading.Event) -> Self:
        """Send `events` events, then wait until `gate` is set (the test releases
        the stream when it has seen what it wanted part-way), then the rest."""
        return dataclasses.replace(self, hold=gate, hold_at=events)

    def slow_first_byte(self, seconds: float) -> Self:
        """Wait `seconds` before the status line (less if the client leaves)."""
        return dataclasses.replace(self, first_byte_delay=seconds)


R = TypeVar("R", bound=ScriptedReply)


@dataclass(frozen=True)
class ReceivedRequest:
    """One HTTP request the fake answered (or began to)."""

    method: str
    path: str
    #: Header names in lower case.
    headers: dict[str, str]
    body: dict[str, Any]


class ScriptedServer(ChatCompletionsServer, Generic[R]):
    """A fake answering each request with the next scripted reply of type `R`.

    Starts on ``with`` or :meth:`start`; :meth:`close` (or leaving the ``with``)
    fails if the subclass's handler raised, so a bug in a fake fails its test.
    """

    #: The fake's name in error messages.
    fake_name = "ScriptedServer"

    def __init__(self, *, port: int = 0, default: R | None = None) -> None:
        super().__init__(port=port)
        #: The reply when the script is empty (None given: :meth:`default_reply`).
        self.default = default if default is not None else self.default_reply()
        self._cond = threading.Condition()
        self._script: deque[R] = deque()
        self._received: list[ReceivedRequest] = []
        self._disconnects = 0
        self._failures: list[BaseException] = []
        self._stopping = False

    def default_reply(self) -> R:
        """The fake's own reply for a script that is empty, a short text."""
        raise NotImplementedError

    # ---- scripting and inspection -------------------------------------------

    def script(self, *replies: R) -> None:
        """Queue replies, taken one per request in order."""
        with self._cond:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._cond:
            return len(self._script)

    @property
    def received(self) -> list[ReceivedRequest]:
        """Every request to the endpoint so far, in order of arrival."""
        with self._cond:
            return list(self._received)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The decoded JSON bodies of :attr:`received`."""
        return [request.body for request in self.received]

    @property
    def disconnects(self) -> int:
        """How many clients went away before their response was complete."""
        with self._cond:
            return self._disconnects

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until `count` requests have arrived; return their bodies."""
        self._wait(lambda: len(self._received) >= count, timeout, f"{count} request(s)")
        return self.requests

    def wait_for_disconnects(self, count: int, timeout: float = 10.0) -> None:
        """Block until `count` clients have gone away mid-response."""
        self._wait(lambda: self._disconnects >= count, timeout, f"{count} disconnect(s)")

    async def wait_for_requests_async(self, count: int) -> list[dict[str, Any]]:
        """:meth:`wait_for_requests` for async tests; the caller sets the deadline."""
        await self._wait_async(lambda: len(self._received) >= count, f"{count} request(s)")
        return self.requests

    async def wait_for_disconnects_async(self, count: int) -> None:
        """:meth:`wait_for_disconnects` for async tests; the caller sets the deadline."""
        await self._wait_async(lambda: self._disconnects >= count, f"{count} disconnect(s)")

    async def wait_for_open_connections_async(self, at_most: int) -> None:
        """Wait until at most `at_most` client connections are open; the caller
        sets the deadline."""
        await self._wait_async(
            lambda: self.open_connections <= at_most, f"at most {at_most} open connection(s)"
        )

    def _wait(self, condition: Callable[[], bool], timeout: float | None, what: str) -> None:
        with self._cond:
            done = self._cond.wait_for(lambda: condition() or self._stopping, timeout)
            if self._stopping and not condition():
                raise RuntimeError(f"{self.fake_name} closed while waiting for {what}")
            if not done:
                raise TimeoutError(
                    f"{self.fake_name} saw {len(self._received)} request(s) and "
                    f"{self._disconnects} disconnect(s) in {timeout} s, waiting for {what}"
                )

    async def _wait_async(self, condition: Callable[[], bool], what: str) -> None:
        # The condition variable lives in the fake's threads, so a worker thread
        # waits on it. On cancellation that thread is abandoned, and released at
        # once through `given_up`, so none outlives the wait.
        given_up = threading.Event()

        def wait() -> None:
            self._wait(lambda: condition() or given_up.is_set(), None, what)

        try:
            await anyio.to_thread.run_sync(wait, abandon_on_cancel=True)
        finally:
            given_up.set()
            with self._cond:
                self._cond.notify_all()

    # ---- serving ----------------------------------------------------------------

    def _take_reply(self, exchange: ChatExchange) -> R:
        """Record the request of `exchange`; return the reply it gets."""
        with self._cond:
            reply = self._script.popleft() if self._script else self.default
            self._received.append(
                ReceivedRequest("POST", exchange.path, dict(exchange.headers), exchange.body)
            )
            self._cond.notify_all()
        return reply

    #: The fake's ``malformed`` fault: an SSE event whose data is not JSON.
    malformed_event: ClassVar[bytes]

    def send_stream(
        self, exchange: ChatExchange, reply: R, events: Sequence[bytes], headers: Mapping[str, str]
    ) -> None:
        """Stream `events` with `headers`, at `reply`'s pace, with its pause and its fault."""
        exchange.start_stream(headers)
        for position in range(len(events) + 1):
            if reply.fault is not None and position == reply.fault_at:
                self._fault(exchange, reply)
                return
            if reply.hold is not None and position == reply.hold_at:
                if not self._hold(exchange, reply.hold):
                    return
            if position < len(events):
                if (
                    position
                    and reply.event_interval
                    and not self._pause(exchange, reply.event_interval)
                ):
                    return
                exchange.send_raw(events[position])
        exchange.end_stream()

    def send_plain_text(self, exchange: ChatExchange, reply: R) -> bool:
        """Send `reply` if it is a :meth:`ScriptedReply.plain_status` (a body of
        text, not the API's JSON); whether it was one."""
        if reply.body_text is None:
            return False
        exchange.send_text(reply.status_code, reply.body_text, reply.content_type, reply.headers)
        return True

    def send_error_event(self, exchange: ChatExchange, reply: R) -> None:
        """The ``error_event`` fault: the API's error event in the middle of a stream."""
        raise NotImplementedError

    def _fault(self, exchange: ChatExchange, reply: R) -> None:
        if reply.fault == "cut":
            exchange.drop()
        elif reply.fault == "reset":
            exchange.reset()
        elif reply.fault == "end":
            exchange.end_stream()
        elif reply.fault == "unframed":
            exchange.send_unframed(b"this is not an HTTP chunk\r\n\r\n")
        elif reply.fault == "hang":
            self._pause(exchange, None)
        elif reply.fault == "malformed":
            exchange.send_raw(self.malformed_event)
            exchange.end_stream()
        elif reply.fault == "error_event":
            self.send_error_event(exchange, reply)
            exchange.end_stream()

    def _hold(self, exchange: ChatExchange, gate: threading.Event) -> bool:
        """Wait for `gate`; False (connection dropped) if the client left or the
        fake closes first. The event is checked every 50 ms between waits that
        also watch the client's socket."""
        while not gate.is_set():
            if not self._pause(exchange, 0.05):
                return False
        return True

    def _pause(self, exchange: ChatExchange, seconds: float | None) -> bool:
        """Wait; False (connection dropped) if the client left or the fake closes."""
        result = exchange.wait(seconds)
        if result == "timeout":
            return True
        if result == "disconnected":
            exchange.disconnected = True
        exchange.drop()
        return False

    def exchange_finished(self, exchange: ChatExchange) -> None:
        if exchange.disconnected:
            with self._cond:
                self._disconnects += 1
                self._cond.notify_all()

    def connection_closed(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def handler_failed(self, exc: BaseException) -> None:
        """A bug in the fake: fail the test at close rather than print and go on."""
        with self._cond:
            self._failures.append(exc)

    @classmethod
    def serve_from_command_line(
        cls, prog: str, doc: str | None, text_reply: Callable[[str], R], argv: Sequence[str] | None
    ) -> None:
        """A fake's `main()`: serve default replies (or `--text` to every request)
        until interrupted or terminated, printing the base URL first. `prog` is how
        it is run; the first line of `doc` (its module's) says what it is."""
        parser = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n")[0])
        parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
        parser.add_argument("--text", help="the reply to every request")
        args = parser.parse_args(argv)

        def stop(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        default = text_reply(args.text) if args.text else None
        with cls(port=args.port, default=default) as fake:
            print(fake.base_url, flush=True)
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                pass

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        super().close()
        with self._cond:
            failures, self._failures = self._failures, []
        if failures:
            raise RuntimeError(f"{self.fake_name}'s handler failed: {failures[0]!r}") from failures[
                0
            ]

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.close()
        except RuntimeError:
            if exc_info[1] is None:
                raise
            # else the test's own failure is the one to see
