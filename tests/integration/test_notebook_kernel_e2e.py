"""The notebook's own kernel (nbctx, issue 17), end to end with a real hdspd: a
kernel started elsewhere (jupyter_client's KernelManager, as JupyterLab's server
starts a notebook's) is attached, a task whose message's context names it runs
its code there and sees what the user defined; when that kernel dies, hdsp tells
the task and the user, detaches, never restarts it, and the task's next code runs
in a kernel of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from hdsp.client import connect
from hdsp.protocol import (
    AttachKernel,
    KernelInfo,
    KernelList,
    KernelShutdown,
    ListKernels,
    PromptContext,
    Say,
    TaskCompleted,
)
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, wait_for_said

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

_RUN_CODE = {"always_allow_execute": True}
_SLOW = 30.0


def _run_code(code: str) -> FakeReply:
    return FakeReply.tool_calls([ToolCall("execute_code", json.dumps({"code": code}))])


def _tool_result(fake: FakeOpenAI, request: int) -> str:
    messages = fake.requests[request]["messages"]
    return json.dumps([m for m in messages if m["role"] == "tool"][-1]["content"])


def user_runs(km: KernelManager, code: str) -> None:
    kc: BlockingKernelClient = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=_SLOW)
        reply = kc.execute_interactive(code, timeout=_SLOW)
        assert reply["content"]["status"] == "ok", reply
    finally:
        kc.stop_channels()


async def test_a_task_runs_in_the_notebooks_kernel_and_is_told_when_it_restarts_or_dies(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path, users_kernel: KernelManager
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "nb.ipynb").write_text(
        json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    user_runs(users_kernel, "import pandas\ndf = pandas.DataFrame({'region': [], 'sales': []})")

    fake_openai.script(
        _run_code("print(list(df.columns))"),
        FakeReply.text("The columns are region and sales."),
        _run_code("print(df.columns.tolist())"),
        FakeReply.text("df is gone: the kernel was restarted."),
        _run_code("print(sorted(df.columns))"),
        FakeReply.text("df is gone."),
        FakeReply.text("Back in the notebook's kernel."),
    )
    async with connect(daemon.runtime_dir) as client:
        info: KernelInfo = await client.request(
            AttachKernel(connection_file=users_kernel.connection_file), timeout=_SLOW
        )
        assert info.owned is False
        mark = (await client.status()).head_seq
        ref = await client.start_task(
            "describe df",
            workspace=ws,
            approvals=_RUN_CODE,
            context=PromptContext(notebook="nb.ipynb", kernel_id=info.kernel_id),
        )
        done = await collect_turn(client, ref.task_id, mark)
        assert isinstance(done[-1].data, TaskCompleted)
        assert "['region', 'sales']" in _tool_result(fake_openai, 1)

        # Lab restarts the notebook's kernel (same connection file, a new process),
        # and the user runs a cell in it: hdsp notices the new kernel and says so.
        mark = (await client.status()).head_seq
        users_kernel.restart_kernel(now=True)
        user_runs(users_kernel, "after_restart = 1")
        await wait_for_said(client, ref.task_id, mark, Say.NOTEBOOK_KERNEL, "was restarted")
        await client.send_message(ref.task_id, "again?")
        done = await collect_turn(client, ref.task_id, mark)
        assert isinstance(done[-1].data, TaskCompleted)
        result = _tool_result(fake_openai, 3)
        assert "NameError" in result and "was restarted where it runs" in result
        # Still the notebook's kernel: still attached, not hdsp's.
        kernels: KernelList = await client.request(ListKernels())
        assert [(k.kernel_id, k.owned) for k in kernels.kernels] == [(info.kernel_id, False)]

        # Lab shuts the notebook's kernel down (here: it dies).
        mark = (await client.status()).head_seq
        users_kernel.shutdown_kernel(now=True)
        await wait_for_said(client, ref.task_id, mark, Say.NOTEBOOK_KERNEL, "did not restart it")
        # hdsp detached from it and did not bring it back.
        page = await client.replay(mark)
        assert any(
            isinstance(e.data, KernelShutdown) and e.data.payload[0] == info.kernel_id
            for e in page.events
        )
        kernels = await client.request(ListKernels())
        assert info.kernel_id not in [k.kernel_id for k in kernels.kernels]
        assert not users_kernel.is_alive()

        # The task's next code runs in a kernel of its own, and the model is told why.
        mark = (await client.status()).head_seq
        await client.send_message(ref.task_id, "and now?")
        done = await collect_turn(client, ref.task_id, mark)
        assert isinstance(done[-1].data, TaskCompleted)
        result = _tool_result(fake_openai, 5)
        assert "NameError" in result and "did not restart it" in result
        kernels = await client.request(ListKernels())
        [own] = kernels.kernels
        assert (own.owned, own.task_ids) == (True, [ref.task_id])

        # Lab starts the notebook's kernel again and the user writes from the
        # notebook: the task moves to it, and the kernel hdsp started for it goes.
        reopened = KernelManager(connection_file=str(tmp_path / "kernel-users-2.json"))
        reopened.start_kernel(cwd=str(tmp_path))
        try:
            again: KernelInfo = await client.request(
                AttachKernel(connection_file=reopened.connection_file), timeout=_SLOW
            )
        except BaseException:
            reopened.shutdown_kernel(now=True)
            raise
        assert again.kernel_id != info.kernel_id
        mark = (await client.status()).head_seq
        await client.send_message(
            ref.task_id,
            "back",
            context=PromptContext(notebook="nb.ipynb", kernel_id=again.kernel_id),
        )
        await collect_turn(client, ref.task_id, mark)
        async with client.events(None, since_seq=mark) as events:
            async for event in events:
                if (
                    isinstance(event.data, KernelShutdown)
                    and event.data.payload[0] == own.kernel_id
                ):
                    break
        kernels = await client.request(ListKernels())
        assert [(k.kernel_id, k.task_ids) for k in kernels.kernels] == [
            (again.kernel_id, [ref.task_id])
        ]
    try:
        assert reopened.is_alive()  # hdsp only detached from it
    finally:
        reopened.shutdown_kernel(now=True)
        reopened.cleanup_resources()


async def test_a_context_naming_an_unknown_kernel_is_refused(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    from hdsp.client import CommandFailed
    from hdsp.protocol import ErrorCode

    async with connect(daemon.runtime_dir) as client:
        with pytest.raises(CommandFailed) as failed:
            await client.start_task(
                "hi", workspace=tmp_path, context=PromptContext(kernel_id="no-such-kernel")
            )
        assert failed.value.code == ErrorCode.KERNEL_NOT_FOUND
