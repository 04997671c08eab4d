"""One kernel's wire (`ZmqKernelConnection`) and process (`KernelProcess`), with a
real ipykernel and no service or daemon: routing by parent, the handshake, the
heartbeat, a restart's rebind, and no message lost while the reader waits."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.daemon.kernels.connection import (
    KERNEL_REPLACED,
    Routes,
    StatusCallback,
    ZmqKernelConnection,
)
from hdsp.daemon.kernels.process import KernelProcess
from tests.support.daemon_process import short_tmp_dir

pytestmark = pytest.mark.timeout(90)

Message = Mapping[str, Any]


@pytest.fixture
async def process(tmp_path: Path) -> AsyncIterator[KernelProcess]:
    root = short_tmp_dir()
    proc = KernelProcess(
        kernel_id=str(uuid.uuid4()),
        kernel_name="python3",
        workdir=str(tmp_path),
        runtime_dir=root,
        launcher=None,
    )
    await proc.start()
    try:
        yield proc
    finally:
        with anyio.move_on_after(30, shield=True):
            await proc.shutdown()
        shutil.rmtree(root, ignore_errors=True)


async def _no_status(state: str) -> None:
    pass


@asynccontextmanager
async def connected(
    process: KernelProcess, on_status: StatusCallback = _no_status
) -> AsyncIterator[ZmqKernelConnection]:
    conn = ZmqKernelConnection(process.client, kernel_id="test", on_status=on_status)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.run)
        with anyio.fail_after(60):
            await conn.handshake(certain=True)
        yield conn
        tg.cancel_scope.cancel()


class Request:
    """Routes that keep what came for one request, done at its reply and idle."""

    def __init__(self, on_stdin: Callable[[Message], None] | None = None) -> None:
        self.iopub: list[Message] = []
        self.reply: Message | None = None
        self.done = anyio.Event()
        self._idle = False
        self.routes = Routes(iopub=self._on_iopub, reply=self._on_reply, stdin=on_stdin)

    def _on_iopub(self, msg: Message) -> None:
        self.iopub.append(msg)
        if msg["header"]["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            self._idle = True
            self._check()

    def _on_reply(self, msg: Message) -> None:
        self.reply = msg
        self._check()

    def _check(self) -> None:
        if self.reply is not None and self._idle:
            self.done.set()

    def stream_text(self) -> str:
        return "".join(
            m["content"]["text"] for m in self.iopub if m["header"]["msg_type"] == "stream"
        )

    def result(self) -> str | None:
        for m in self.iopub:
            if m["header"]["msg_type"] == "execute_result":
                return str(m["content"]["data"]["text/plain"])
        return None


async def run(conn: ZmqKernelConnection, code: str, request: Request | None = None) -> Request:
    request = request or Request()
    msg_id = conn.execute(code, allow_stdin=request.routes.stdin is not None, routes=request.routes)
    try:
        with anyio.fail_after(60):
            await request.done.wait()
    finally:
        conn.forget(msg_id)
    return request


async def test_messages_reach_the_request_they_answer(process: KernelProcess) -> None:
    states: list[str] = []

    async def on_status(state: str) -> None:
        states.append(state)

    async with connected(process, on_status) as conn:
        first = await run(conn, "print('one')\n1 + 1")
        second = await run(conn, "print('two')")
    assert (first.stream_text(), first.result()) == ("one\n", "2")
    assert second.stream_text() == "two\n" and second.result() is None
    assert first.reply is not None and first.reply["content"]["status"] == "ok"
    # Every iopub message went to its own request only.
    assert all(
        m["parent_header"]["msg_id"] != second.iopub[0]["parent_header"]["msg_id"]
        for m in first.iopub
    )
    assert "busy" in states and states[-1] == "idle"


async def test_an_input_request_nobody_waits_for_is_answered_empty(
    process: KernelProcess,
) -> None:
    async with connected(process) as conn:
        # Allowed to ask, but no stdin route: the connection answers "" itself.
        msg_id = conn.execute("answer = input('?')", allow_stdin=True, routes=Routes())
        conn.forget(msg_id)
        shown = await run(conn, "answer")
    assert shown.result() == "''"


async def test_the_heartbeat_answers_and_a_cancelled_ping_does_not_break_it(
    process: KernelProcess,
) -> None:
    async with connected(process) as conn:
        with anyio.fail_after(10):
            await conn.ping()
        with anyio.move_on_after(0):
            await conn.ping()  # cancelled before its echo
        with anyio.fail_after(10):
            await conn.ping()


async def test_a_restarted_kernel_is_reached_again_after_the_rebind(
    process: KernelProcess,
) -> None:
    async with connected(process) as conn:
        await run(conn, "x = 1")
        conn.expect_rebind()
        await process.restart(now=True)
        with anyio.fail_after(60):
            await conn.handshake(certain=True)
        after = await run(conn, "'x' in globals()")
    assert after.result() == "False"


async def test_a_kernel_restarted_outside_is_told_even_when_its_statuses_are_lost(
    process: KernelProcess,
) -> None:
    """JupyterLab's Restart Kernel, with nothing we do: the new process's first
    statuses come while our subscription reconnects, and a SUB socket loses
    them (CI, a loaded machine: the task was never told). Here our iopub is
    unsubscribed, so no status reaches us at all: the reply to what we ask on
    control when iopub connects again is signed by the new session."""
    import zmq

    states: list[str] = []
    replaced = anyio.Event()

    async def on_status(state: str) -> None:
        states.append(state)
        if state == KERNEL_REPLACED:
            replaced.set()

    async with connected(process, on_status) as conn:
        await run(conn, "x = 1")
        assert KERNEL_REPLACED not in states
        conn._kc.iopub_channel.socket.setsockopt(zmq.UNSUBSCRIBE, b"")
        # (Not `expect_rebind`: this restart is not ours.)
        await process.restart(now=True)
        with anyio.fail_after(30):
            await replaced.wait()
    assert states.count(KERNEL_REPLACED) == 1


async def test_a_kernel_bound_before_we_connect_is_reached_without_waiting_its_limit(
    process: KernelProcess,
) -> None:
    """Our stdin connection can be made before its monitor watches for it: a
    kernel we started, bound by the time the loop reached our connect (CI: a
    start that waited out its 60 s limit). The handshake ends all the same."""
    async with connected(process) as first:
        await run(first, "x = 1")  # the kernel is bound and answering
        second = ZmqKernelConnection(process.client, kernel_id="second", on_status=_no_status)
        async with anyio.create_task_group() as tg:
            await tg.start(second.run)
            with anyio.fail_after(30):
                await second.handshake(certain=True)
            assert (await run(second, "x")).result() == "1"
            tg.cancel_scope.cancel()


async def test_no_output_is_lost_while_the_reader_waits(process: KernelProcess) -> None:
    # The reader waits on the service (a busy journal takes the "busy" status
    # slowly) while the kernel prints thousands of messages; it goes on when the
    # kernel asks for input, after the last of them. ZeroMQ's PUB socket drops
    # what does not fit in the subscriber's queue: none of it may be dropped.
    go_on = anyio.Event()
    armed = False  # not in the handshake

    async def slow_status(state: str) -> None:
        if armed and state == "busy":
            await go_on.wait()

    def on_stdin(msg: Message) -> None:
        go_on.set()
        conn.send_input("")

    lines = 5_000
    code = f"for i in range({lines}):\n    print(i, flush=True)\ninput('done?')"
    async with connected(process, slow_status) as conn:
        armed = True
        request = await run(conn, code, Request(on_stdin))
    assert go_on.is_set()
    assert request.stream_text() == "".join(f"{i}\n" for i in range(lines))


async def test_the_kernel_queues_its_output_for_a_stalled_subscriber(
    process: KernelProcess,
) -> None:
    # When the daemon's ZeroMQ I/O thread is starved (a loaded machine), its
    # subscription stops taking messages and the kernel's PUB socket queues
    # them; what does not fit is dropped for good. A subscriber that queues
    # one message stands for that I/O thread: every line must still arrive
    # once it reads again.
    import zmq

    lines = 5_000
    kc = process.client()
    kc.context.setsockopt(zmq.RCVHWM, 1)
    kc.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=False)
    try:
        with anyio.fail_after(60):
            await kc.wait_for_ready(timeout=60)  # the subscription is live
            msg_id = kc.execute(f"for i in range({lines}):\n    print(i, flush=True)")
            # The reply comes after the last line was published (and queued).
            reply = await kc.get_shell_msg()
            while reply["parent_header"].get("msg_id") != msg_id:
                reply = await kc.get_shell_msg()
            text: list[str] = []
            while True:
                msg = await kc.get_iopub_msg()
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    text.append(msg["content"]["text"])
                elif msg["msg_type"] == "status" and (msg["content"]["execution_state"] == "idle"):
                    break
    finally:
        kc.stop_channels()
    assert "".join(text) == "".join(f"{i}\n" for i in range(lines))
