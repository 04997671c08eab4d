"""The server extension's link to hdspd, driven directly (without a Jupyter server)
against a real hdspd: one browser that stops reading must not hold up another."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from hdsp.client import connect
from hdsp.client.jupyterlab.link import (
    CLOSE_FELL_BEHIND,
    CLOSE_INTERNAL_ERROR,
    DaemonLink,
    LinkState,
)
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess

pytestmark = pytest.mark.slow

Frame = dict[str, Any]


class RecordingSink:
    """A browser's socket: records frames; past `stall_after` frames it stops
    reading (its sends never return), as a window whose tab froze."""

    def __init__(
        self,
        until: Callable[[Frame], bool],
        stall_after: int | None = None,
        fail_after: int | None = None,
    ) -> None:
        self.frames: list[Frame] = []
        self.until = until
        self.stall_after = stall_after
        #: Past this many frames a send fails as no socket is expected to.
        self.fail_after = fail_after
        self.done = anyio.Event()
        self.closed: tuple[int, str] | None = None

    async def send_frame(self, text: str) -> None:
        if self.stall_after is not None and len(self.frames) >= self.stall_after:
            await anyio.sleep_forever()
        if self.fail_after is not None and len(self.frames) >= self.fail_after:
            raise OSError("the transport broke")
        frame = json.loads(text)
        self.frames.append(frame)
        if self.until(frame):
            self.done.set()

    def close_sink(self, code: int, reason: str) -> None:
        self.closed = (code, reason)
        self.done.set()


def _finished() -> FakeReply:
    """The model's reply that ends a task at once."""
    return FakeReply.tool_calls([ToolCall("attempt_completion", json.dumps({"result": "ok"}))])


async def _up(tg: TaskGroup, link: DaemonLink) -> None:
    """Run `link` in `tg` until it is connected."""
    await tg.start(link.run)
    while link.state != LinkState.CONNECTED:
        await link.wait_changed()


def completed(frame: Frame) -> bool:
    return frame["kind"] == "event" and frame["event"]["data"]["eventName"] == "taskCompleted"


async def test_a_browser_that_stops_reading_is_closed_and_the_others_go_on(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Any
) -> None:
    fake_openai.script(_finished())
    link = DaemonLink(daemon.runtime_dir, feed_buffer=3, stall_limit=1)
    async with anyio.create_task_group() as tg, connect(daemon.runtime_dir) as client:
        await _up(tg, link)
        head = (await client.status()).head_seq
        frozen = RecordingSink(completed, stall_after=1)
        live = RecordingSink(completed)
        link.serve_feed(frozen, head)
        link.serve_feed(live, head)
        await client.start_task("finish at once", workspace=tmp_path)
        with anyio.fail_after(30):
            await live.done.wait()
            await frozen.done.wait()
        tg.cancel_scope.cancel()

    assert live.closed is None
    seqs = [f["event"]["seq"] for f in live.frames if f["kind"] == "event" and f["event"]["seq"]]
    assert seqs == list(range(head + 1, head + 1 + len(seqs)))
    assert frozen.closed is not None
    code, reason = frozen.closed
    assert code == CLOSE_FELL_BEHIND
    assert f"since={head}" in reason, reason


async def test_a_socket_whose_feed_fails_is_closed_and_the_link_stays_up(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Any
) -> None:
    """One socket's unexpected failure closes that socket (1011); it must not take
    down the link's task group, and with it every window's feed and command."""
    fake_openai.script(_finished())
    link = DaemonLink(daemon.runtime_dir)
    async with anyio.create_task_group() as tg, connect(daemon.runtime_dir) as client:
        await _up(tg, link)
        head = (await client.status()).head_seq
        broken = RecordingSink(completed, fail_after=1)
        link.serve_feed(broken, head)
        await client.start_task("finish at once", workspace=tmp_path)
        with anyio.fail_after(30):
            await broken.done.wait()
        # The link still serves: a new socket, from where the broken one stopped.
        later = RecordingSink(completed)
        link.serve_feed(later, head)
        with anyio.fail_after(30):
            await later.done.wait()
        assert link.state == LinkState.CONNECTED
        assert (await link.status()) is not None
        tg.cancel_scope.cancel()

    assert broken.closed is not None and broken.closed[0] == CLOSE_INTERNAL_ERROR
    assert later.closed is None and any(completed(f) for f in later.frames)
