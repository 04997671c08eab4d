"""What the scriptable fakes share: a queue of replies, a log of requests, waiting.

:class:`ScriptedServer` is the loopback server core of hdsp's demo model
(:class:`hdsp.daemon.llm.demo.ChatCompletionsServer`) plus the scripting and
inspection the fakes of the OpenAI and Anthropic APIs
(``tests.fakes.openai_server``, ``tests.fakes.anthropic_server``) offer: replies
queued with :meth:`~ScriptedServer.script` and taken one per request (the
fake's :attr:`~ScriptedServer.default` when none is left), every request
recorded, disconnects counted, and ways to wait for them (and for open
connections to fall), from threads or async tests. Subclasses say how a reply
goes on the wire.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, Generic, Self, TypeVar

import anyio.to_thread

from hdsp.daemon.llm.demo import ChatCompletionsServer, ChatExchange

__all__ = ["ReceivedRequest", "ScriptedServer", "serve_from_command_line"]

R = TypeVar("R")


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

    def __init__(self, *, port: int = 0, default: R) -> None:
        super().__init__(port=port)
        #: The reply when the script is empty.
        self.default = default
        self._cond = threading.Condition()
        self._script: deque[R] = deque()
        self._received: list[ReceivedRequest] = []
        self._disconnects = 0
        self._failures: list[BaseException] = []
        self._stopping = False

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

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except RuntimeError:
            pass  # the test's own failure is the one to see


def serve_from_command_line(
    prog: str,
    description: str,
    make: Callable[[int, R | None], ScriptedServer[R]],
    text_reply: Callable[[str], R],
    argv: Sequence[str] | None = None,
) -> None:
    """A fake's `main()`: serve default replies (or `--text` to every request)
    until interrupted or terminated, printing the base URL first."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--text", help="the reply to every request")
    args = parser.parse_args(argv)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with make(args.port, text_reply(args.text) if args.text else None) as fake:
        print(fake.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
