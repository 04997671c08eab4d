"""Remote kernels through the real daemon (issue 25): hdspd as a subprocess, a
real Jupyter Kernel Gateway on loopback, the fake model scripting execute_code.
Where a task's kernels run is chosen per task and per profile; `input()` is an
ask any client answers; `hdsp kernels --gateway` lists the server's kernels and
`attach --gateway` uses one; the token, kept in the keyring by name, appears in
no log line, event or reply."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx2
import msgspec
import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import (
    CellOutput,
    ErrorCode,
    MessageEvent,
    TaskCompleted,
    TaskInteractive,
    encode,
)
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.kernel_servers import KernelServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

SECRET = "team-jupyter"


@pytest.fixture
def gateway() -> Iterator[KernelServer]:
    root = short_tmp_dir()
    try:
        with KernelServer("kernelgateway", root) as server:
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_code(code: str) -> FakeReply:
    return FakeReply.tool_calls([ToolCall("execute_code", json.dumps({"code": code}))])


def _tool_result(fake: FakeOpenAI, request: int) -> str:
    tool = [m for m in fake.requests[request]["messages"] if m["role"] == "tool"][-1]
    content = tool["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


async def _follow(client: Client, task_id: str, head: int) -> list[CellOutput]:
    """Follow the task to its end, answering its asks (the code's `input()`
    with "Ada", anything else with yes); the final cells it showed."""
    cells = []
    asked = None
    async with client.events(task_id, since_seq=head) as events:
        async for event in events:
            if isinstance(event.data, MessageEvent):
                message = event.data.payload[0].message
                if message.type == "ask" and event.data.payload[0].action == "created":
                    asked = message
                if message.say == "cell_output" and not message.partial:
                    cells.append(msgspec.json.decode(message.text or "", type=CellOutput))
            if isinstance(event.data, TaskInteractive) and asked is not None:
                if asked.ask == "followup":
                    await client.respond_to_ask(task_id, asked.ts, "messageResponse", "Ada")
                else:
                    await client.respond_to_ask(task_id, asked.ts, "yesButtonClicked")
                asked = None
            if isinstance(event.data, TaskCompleted):
                return cells
    raise AssertionError("the events ended before the task completed")


async def test_tasks_run_code_on_the_jupyter_server_their_profile_or_own_choice_names(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI, gateway: KernelServer, tmp_path: Path
) -> None:
    daemon_process.data_dir.mkdir(parents=True, exist_ok=True)
    (daemon_process.data_dir / "settings.json").write_text(
        json.dumps(
            {
                # Local by default; the server is named once, its token by name.
                "kernels": {
                    "provider": "local",
                    "gateway": {"url": gateway.url, "token_secret": SECRET},
                },
                "profiles": {
                    "remote": {
                        "provider": "openai-compatible",
                        "model": "gpt-test",
                        "base_url": fake_openai.base_url,
                        "secret": "default",
                        "kernels": {"provider": "gateway"},
                    }
                },
            }
        )
    )
    # At debug level, the WebSocket library logs its handshake's headers: the
    # token must not show there either.
    daemon_process.start("--log-level", "debug")
    where = "import os\nprint(os.getcwd(), flush=True)\nname = input('Who? ')\nprint('hi', name)"
    fake_openai.script(
        _run_code(where), FakeReply.text("Remote."), _run_code(where), FakeReply.text("Profile.")
    )
    async with connect(daemon_process.runtime_dir) as client:
        await client.set_secret(SECRET, gateway.token)
        # A task that chooses the gateway itself.
        head = (await client.status()).head_seq
        ref = await client.start_task("Where am I?", workspace=tmp_path, kernel_provider="gateway")
        (cell,) = await _follow(client, ref.task_id, head)
        assert cell.status == "ok", cell
        text = "".join(o.text or "" for o in cell.outputs)
        # It ran on the server, in the server's root, not in the task's workspace.
        assert text == f"{gateway.root_dir}\nhi Ada\n", text
        system = fake_openai.requests[0]["messages"][0]["content"]
        assert f"on the Jupyter server {gateway.url}" in system
        assert "does not see the workspace's files" in system
        (kernel,) = (await client.list_kernels()).kernels
        assert (kernel.provider, kernel.server_url, kernel.task_ids) == (
            "gateway",
            gateway.url,
            [ref.task_id],
        )
        # A task of a profile whose kernels run on the server.
        head = (await client.status()).head_seq
        other = await client.start_task("And me?", workspace=tmp_path, profile="remote")
        (cell,) = await _follow(client, other.task_id, head)
        assert "".join(o.text or "" for o in cell.outputs).startswith(f"{gateway.root_dir}\n")
        listing = {k.kernel_id: k for k in (await client.list_kernels()).kernels}
        assert len(listing) == 2 and all(k.provider == "gateway" for k in listing.values())
        # The CLI lists what the server runs, and which of them hdsp uses.
        shown = await run_hdsp(daemon_process.runtime_dir, "kernels", "--gateway")
        assert shown.returncode == 0, shown.stderr
        assert f"Jupyter server {gateway.url}" in shown.stdout
        for k in listing.values():
            assert f"kernel {k.remote_id}" in shown.stdout
            assert f"used by hdsp as {k.kernel_id}" in shown.stdout
        events = await client.replay(0)
        await client.close_task(ref.task_id)
        remote_id = kernel.remote_id
    # Closing the task shut its kernel down on the server.
    headers = {"Authorization": f"token {gateway.token}"}
    assert httpx2.get(f"{gateway.url}api/kernels/{remote_id}", headers=headers).status_code == 404
    # The token never left the daemon: not in its log, its events, its database.
    log = daemon_process.stderr_path.read_text()
    assert "websockets" in log and f"[secret:{SECRET}]" in log
    assert gateway.token not in log
    assert all(gateway.token.encode() not in encode(e) for e in events.events)
    assert gateway.token.encode() not in (daemon_process.data_dir / "settings.json").read_bytes()


async def test_attach_a_kernel_of_the_server_by_id_from_the_cli(
    daemon: DaemonProcess, gateway: KernelServer
) -> None:
    # Set up as the README says: the token in the keyring, the server by its URL.
    runtime = daemon.runtime_dir
    done = await run_hdsp(runtime, "secret", "set", SECRET, stdin=gateway.token + "\n")
    assert done.returncode == 0, done.stderr
    server = json.dumps({"url": gateway.url, "token_secret": SECRET})
    done = await run_hdsp(runtime, "config", "set", "kernels.gateway", server)
    assert done.returncode == 0, done.stderr
    exported = await run_hdsp(runtime, "config", "export")
    assert gateway.url in exported.stdout and gateway.token not in exported.stdout
    headers = {"Authorization": f"token {gateway.token}"}
    made = httpx2.post(f"{gateway.url}api/kernels", json={}, headers=headers)
    remote_id = made.json()["id"]
    daemon_process = daemon
    async with connect(daemon_process.runtime_dir) as client:
        shown = await run_hdsp(
            daemon_process.runtime_dir, "kernels", "attach", "--gateway", remote_id
        )
        assert shown.returncode == 0, shown.stderr
        assert f"on {gateway.url} as {remote_id}" in shown.stdout
        (kernel,) = (await client.list_kernels()).kernels
        assert (kernel.owned, kernel.remote_id) == (False, remote_id)
        r = await client.execute_code(kernel.kernel_id, "21 * 2")
        assert r.outputs[0].data == {"text/plain": "42"}
        bad = await run_hdsp(daemon_process.runtime_dir, "kernels", "attach", "--gateway", "nope")
        assert bad.returncode != 0 and "has no kernel nope" in bad.stderr
        await client.shutdown_kernel(kernel.kernel_id)
    # Attached, never shut down: it still runs on the server.
    assert httpx2.get(f"{gateway.url}api/kernels/{remote_id}", headers=headers).status_code == 200


async def test_a_task_that_asks_for_a_server_none_names_is_refused_saying_what_to_set(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    async with connect(daemon.runtime_dir) as client:
        with pytest.raises(CommandFailed) as refused:
            await client.start_task("Hi", workspace=tmp_path, kernel_provider="gateway")
        assert refused.value.code == ErrorCode.INVALID_REQUEST
        assert "hdsp config set kernels.gateway" in refused.value.message
        assert (await client.list_tasks()).tasks == []
