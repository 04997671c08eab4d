"""One execution of code in a kernel, as it goes.

The kernel's socket readers feed an `Execution` the messages whose parent is its
execute request (`on_iopub`, `on_reply`, `on_input_request`); these never block,
so a slow client never slows the reading of a chatty kernel. What arrived is
passed on by `flush_loop`, at most once per `interval` (coalescing: a loop that
prints a million lines makes a few updates a second, not a million), to the
caller's `on_output` and as an `executionOutput` event.

The execution is done when the kernel has replied and gone idle for it, or when
the kernel died, was restarted or shut down under it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hdsp.protocol import (
    Event,
    ExecutionOutput,
    ExecutionOutputData,
    ExecutionResult,
    KernelOutput,
)

from .outputs import OutputList, merge_streams, output_from_message

__all__ = ["Emit", "Execution", "InputCallback", "Outcome", "OutputCallback"]

#: How an execution ended (ExecutionResult.status).
Outcome = Literal["ok", "error", "timeout", "cancelled", "died", "restarted"]

#: Publishes an event (the journal's `emit`).
Emit = Callable[[Event], Awaitable[None]]
#: Called with the execution and the outputs that arrived since the last call.
OutputCallback = Callable[["Execution", Sequence[KernelOutput]], Awaitable[None]]
#: Called with the prompt of `input()` and whether it is a password; returns the reply.
InputCallback = Callable[[str, bool], Awaitable[str]]


class Execution:
    def __init__(
        self,
        *,
        kernel_id: str,
        code: str,
        task_id: str | None,
        emit: Emit,
        on_output: OutputCallback | None,
        on_input: InputCallback | None,
        send_input: Callable[[str], None],
        interval: float,
    ) -> None:
        self.id = uuid.uuid4().hex
        self.kernel_id = kernel_id
        self.code = code
        self.task_id = task_id
        #: msg_id of the execute_request, once sent.
        self.msg_id = ""
        self.outputs = OutputList()
        self.execution_count: int | None = None
        #: Set when the kernel is done with this execution (or cannot go on with it).
        self.done = anyio.Event()
        #: Why it ended, from the kernel's side ("ok", "error", "died", "restarted").
        self.outcome: Outcome | None = None
        #: Set by the service when it stopped the execution ("timeout", "cancelled").
        self.stopped_by: Outcome | None = None
        self.kernel_restarted = False
        #: The link to a remote kernel's server dropped while it ran.
        self.connection_dropped = False
        #: How many times outputs were passed on (coalesced updates).
        self.updates = 0
        self._emit = emit
        self._on_output = on_output
        self._on_input = on_input
        self._send_input = send_input
        self._interval = interval
        self._pending: list[KernelOutput] = []
        self._dirty = anyio.Event()
        self._flush_lock = anyio.Lock()
        self._reply: Mapping[str, Any] | None = None
        self._idle = False
        send, receive = anyio.create_memory_object_stream[Mapping[str, Any]](8)
        self._input_send: MemoryObjectSendStream[Mapping[str, Any]] = send
        self._input_receive: MemoryObjectReceiveStream[Mapping[str, Any]] = receive

    @property
    def status(self) -> Outcome | Literal["running"]:
        return self.stopped_by or self.outcome or "running"

    # ---- fed by the kernel's readers (never block) ------------------------------

    def on_iopub(self, msg: Mapping[str, Any]) -> None:
        kind = msg["header"]["msg_type"]
        if kind == "status":
            if msg["content"].get("execution_state") == "idle":
                self._idle = True
                self._check_done()
            return
        if kind == "execute_input":
            self.execution_count = msg["content"].get("execution_count", self.execution_count)
            return
        out = output_from_message(msg)
        if out is not None:
            self.outputs.add(out)
            self._pending.append(out)
            self._dirty.set()

    def on_reply(self, msg: Mapping[str, Any]) -> None:
        self._reply = msg["content"]
        count = self._reply.get("execution_count")
        if isinstance(count, int):
            self.execution_count = count
        self._check_done()

    def on_input_request(self, msg: Mapping[str, Any]) -> None:
        try:
            self._input_send.send_nowait(msg["content"])
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            # A kernel asks once and waits; more than that is not a kernel we know.
            self._send_input("")

    def end(self, outcome: Outcome) -> None:
        """The kernel is done with this execution; the first reason wins."""
        if self.outcome is None:
            self.outcome = outcome
        self.done.set()

    def close(self) -> None:
        """Release what the execution holds; the service calls it when it ends."""
        self._input_send.close()
        self._input_receive.close()

    def _check_done(self) -> None:
        if self._reply is not None and self._idle:
            self.end("ok" if self._reply.get("status") == "ok" else "error")

    # ---- run by the service in the caller's task --------------------------------

    async def flush_loop(self) -> None:
        """Pass outputs on as they come, at most once per interval."""
        while True:
            await self._dirty.wait()
            # Shielded: the service cancels this loop the moment the execution is
            # done, often while the last outputs are on their way out; cancelled
            # there, they would be taken and never sent (the result would still
            # have them, the live `executionOutput` event not).
            with anyio.CancelScope(shield=True):
                await self.flush()
            await anyio.sleep(self._interval)

    async def flush(self) -> None:
        """Pass on what arrived since the last flush, if anything. Flushes take
        turns, so that clients get the batches in the order they arrived."""
        async with self._flush_lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        self._dirty = anyio.Event()
        if not self._pending:
            return
        new, self._pending = merge_streams(self._pending), []
        self.updates += 1
        await self._emit(
            ExecutionOutput(
                payload=(
                    ExecutionOutputData(
                        kernel_id=self.kernel_id,
                        execution_id=self.id,
                        task_id=self.task_id,
                        outputs=new,
                    ),
                )
            )
        )
        if self._on_output is not None:
            await self._on_output(self, new)

    async def input_loop(self) -> None:
        """Answer the kernel's input requests (`input()`, `getpass()`)."""
        async for content in self._input_receive:
            # What the code printed before asking comes first, as in a terminal.
            await self.flush()
            prompt = str(content.get("prompt", ""))
            password = bool(content.get("password", False))
            reply = "" if self._on_input is None else await self._on_input(prompt, password)
            self._send_input(reply)

    def result(self) -> ExecutionResult:
        return ExecutionResult(
            kernel_id=self.kernel_id,
            execution_id=self.id,
            status=self.stopped_by or self.outcome or "died",
            execution_count=self.execution_count,
            outputs=self.outputs.outputs(),
            kernel_restarted=self.kernel_restarted,
            connection_dropped=self.connection_dropped,
            display_updates=self.outputs.display_updates,
        )
