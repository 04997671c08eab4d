"""The provider SDKs are imported on a worker thread after start-up (the warm-up,
:func:`hdsp.daemon.app._warm_and_freeze`), and a task's first model request needs
them too. Python's import locks make whoever imports a module second wait for the
first: the event loop must never be the one waiting."""

from __future__ import annotations

import anyio

from hdsp.client import connect
from hdsp.protocol import MessageEvent, Say, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, texts
from tests.support.import_hold import ImportHold


async def test_the_first_request_never_stops_the_daemon_while_the_sdk_warm_up_imports(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    # The warm-up's import of the OpenAI SDK stops half-way, holding the import
    # lock of hdsp's OpenAI provider module (which imports the SDK): as when the
    # warm-up is slow on a busy machine and a task starts meanwhile.
    hold = ImportHold("openai", daemon_process.root)
    daemon_process.extra_env.update(hold.env)
    fake_openai.script(FakeReply.text("answered after the import"))
    daemon_process.start()
    try:
        with anyio.fail_after(20):
            await hold.wait_held()
        async with connect(daemon_process.runtime_dir) as c:
            head = (await c.status()).head_seq
            async with c.events(None, since_seq=head) as events:
                with anyio.fail_after(10):
                    ref = await c.start_task("needs the SDK")
                # The task now needs the module the warm-up is importing. The
                # daemon keeps answering, and says that the task waits.
                with anyio.fail_after(10):
                    async for event in events:
                        data = event.data
                        if (
                            isinstance(data, MessageEvent)
                            and data.payload[0].task_id == ref.task_id
                            and data.payload[0].message.say == Say.API_REQ_WAITING
                        ):
                            break
                    for _ in range(3):
                        await c.ping()
                assert fake_openai.received == []
            hold.release()
            with anyio.fail_after(20):
                turn = await collect_turn(c, ref.task_id, head, until=(TaskCompleted,))
            assert texts(turn)[-1] == "answered after the import"
    finally:
        hold.release()  # else a daemon stopped in an import cannot stop
