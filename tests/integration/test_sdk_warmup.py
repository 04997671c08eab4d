"""The provider SDKs are imported on a worker thread after start-up (the warm-up,
:func:`hdsp.daemon.app._warm_and_freeze`), and a task's first model request needs
them too. Python's import locks make whoever imports a module second wait for the
first: the event loop must never be the one waiting, and a task waiting for the
import must show it and stay cancellable."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import pytest

from hdsp.client import Client, EventStream, connect
from hdsp.protocol import MessageEvent, Say, TaskAborted, TaskCompleted, TaskRef
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, texts
from tests.support.import_hold import ImportHold


@pytest.fixture
async def held_sdk(daemon_process: DaemonProcess) -> AsyncIterator[ImportHold]:
    """A daemon whose warm-up has stopped half-way through importing the OpenAI
    SDK, holding the import lock of hdsp's OpenAI provider module (which imports
    the SDK): as when the warm-up is slow on a busy machine and a task starts."""
    hold = ImportHold("openai", daemon_process.root)
    daemon_process.extra_env.update(hold.env)
    daemon_process.start()
    try:
        with anyio.fail_after(20):
            await hold.wait_held()
        yield hold
    finally:
        hold.release()  # else a daemon stopped in an import cannot stop


async def _start_and_see_it_wait(c: Client, events: EventStream) -> TaskRef:
    """Start a task, which needs the module the warm-up is importing; return once
    every client was told that the task waits."""
    with anyio.fail_after(10):
        ref = await c.start_task("needs the SDK")
        async for event in events:
            data = event.data
            if (
                isinstance(data, MessageEvent)
                and data.payload[0].task_id == ref.task_id
                and data.payload[0].message.say == Say.API_REQ_WAITING
            ):
                return ref
    raise AssertionError("event stream ended early")


async def test_the_first_request_never_stops_the_daemon_while_the_sdk_warm_up_imports(
    held_sdk: ImportHold, daemon_process: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(FakeReply.text("answered after the import"))
    async with connect(daemon_process.runtime_dir) as c:
        head = (await c.status()).head_seq
        async with c.events(None, since_seq=head) as events:
            ref = await _start_and_see_it_wait(c, events)
            with anyio.fail_after(10):
                for _ in range(3):
                    await c.ping()
            assert fake_openai.received == []
        held_sdk.release()
        with anyio.fail_after(20):
            turn = await collect_turn(c, ref.task_id, head, until=(TaskCompleted,))
        assert texts(turn)[-1] == "answered after the import"


async def test_a_task_waiting_for_the_sdk_import_is_cancelled_at_once(
    held_sdk: ImportHold, daemon_process: DaemonProcess
) -> None:
    async with connect(daemon_process.runtime_dir) as c:
        head = (await c.status()).head_seq
        async with c.events(None, since_seq=head) as events:
            ref = await _start_and_see_it_wait(c, events)
        with anyio.fail_after(5):
            stopped = await c.cancel_task(ref.task_id)
        assert stopped.state == "aborted"
        with anyio.fail_after(10):
            turn = await collect_turn(c, ref.task_id, head)
        assert isinstance(turn[-1].data, TaskAborted)


async def test_the_warm_up_imports_no_sdk_that_no_profile_uses(
    daemon_process: DaemonProcess,
) -> None:
    """The test daemon's only model profile is OpenAI-compatible: the warm-up ends
    without starting to import the anthropic SDK (a held import would stop it)."""
    hold = ImportHold("anthropic", daemon_process.root)
    daemon_process.extra_env.update(hold.env)
    daemon_process.start()
    try:
        await anyio.to_thread.run_sync(
            daemon_process.wait_for_log, "provider SDKs loaded; start-up objects frozen"
        )
    finally:
        hold.release()


@pytest.mark.slow
async def test_the_warm_up_imports_the_sdk_of_a_saved_anthropic_profile(
    daemon_process: DaemonProcess,
) -> None:
    daemon_process.start()
    async with connect(daemon_process.runtime_dir) as c:
        await c.set_secret("anthropic-test", "sk-ant-test-secret-value")
        await c.save_profile(
            "claude",
            provider="anthropic",
            model="claude-test",
            base_url="http://127.0.0.1:9/",
            secret="anthropic-test",
        )
    assert daemon_process.stop() == 0
    hold = ImportHold("anthropic", daemon_process.root)
    daemon_process.extra_env.update(hold.env)
    daemon_process.start()
    try:
        with anyio.fail_after(20):
            assert await hold.wait_held() != "MainThread"
    finally:
        hold.release()


async def test_a_tool_call_checked_while_the_warm_up_imports_jsonschema_never_stops_the_daemon(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    """The tools' validators (jsonschema) come with the warm-up; a call checked
    before it ends makes its tool's validator on a worker thread, which waits for
    the warm-up's import: the event loop answers meanwhile, and the call goes on
    once the import is done."""
    hold = ImportHold("jsonschema", daemon_process.root)
    daemon_process.extra_env.update(hold.env)
    daemon_process.start()
    try:
        with anyio.fail_after(20):
            assert await hold.wait_held() != "MainThread"
        fake_openai.script(
            FakeReply.text("Checking.")
            + FakeReply.tool_calls([ToolCall("attempt_completion", json.dumps({"result": "done"}))])
        )
        async with connect(daemon_process.runtime_dir) as c:
            head = (await c.status()).head_seq
            async with c.events(None, since_seq=head) as events:
                ref = await c.start_task("finish")
                with anyio.fail_after(10):
                    async for event in events:  # the reply is in: its call is next
                        data = event.data
                        if (
                            isinstance(data, MessageEvent)
                            and data.payload[0].message.text == "Checking."
                            and not data.payload[0].message.partial
                        ):
                            break
                with anyio.fail_after(10):
                    for _ in range(20):
                        await c.ping()
            hold.release()
            with anyio.fail_after(20):
                turn = await collect_turn(c, ref.task_id, head)
        assert isinstance(turn[-1].data, TaskCompleted)
    finally:
        hold.release()
