"""Kernels on real Jupyter servers (issue 25): Jupyter Kernel Gateway, Jupyter
Server with a token, and Jupyter Enterprise Gateway with its local process
proxy, each started on loopback by these tests. The kernel service's behaviours
hold against each: live output, interrupt (the REST interrupt), restart,
timeouts, a kernel that dies, `input()`, attaching by id and listing what the
server runs; a WebSocket cut mid-cell loses no output; a kernel the server culls
is reported to its task and the next code starts a new one."""

from __future__ import annotations

import base64
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import structlog
from keyrings.alt.file import PlaintextKeyring

from hdsp.daemon.config.secrets import SecretStore
from hdsp.daemon.config.settings import Settings
from hdsp.daemon.kernels import KernelNotFound, KernelNotOwned, KernelService
from hdsp.daemon.kernels.errors import KernelError, KernelStartFailed
from hdsp.daemon.kernels.providers import KernelProviders
from hdsp.daemon.scrubber import SecretScrubber
from hdsp.protocol import (
    KernelShutdown,
    KernelStarted,
    KernelState,
    KernelStatus,
    encode,
)
from tests.daemon.kernels.kernel_checks import (
    check_a_loop_is_interrupted_at_its_time_limit,
    check_input_is_answered_by_the_callback,
    executing,
)
from tests.fakes.tcp_proxy import TcpProxy
from tests.support.daemon_process import short_tmp_dir
from tests.support.kernel_helpers import Collected, EventRecorder, running_service, tiny_png
from tests.support.kernel_servers import KINDS, KernelServer, ServerKind

pytestmark = pytest.mark.timeout(120)

#: The keyring entry that holds the servers' tokens in these tests.
SECRET = "jupyter-test"


def _kinds() -> list[Any]:
    # Enterprise Gateway's own venv is made on first use (`make test` makes it
    # first): the first test may wait for pip.
    slow = [pytest.mark.slow, pytest.mark.timeout(900)]
    return [pytest.param(k, marks=slow) if k == "enterprisegateway" else k for k in KINDS]


@pytest.fixture(scope="module", params=_kinds())
def server(request: pytest.FixtureRequest) -> Iterator[KernelServer]:
    root = short_tmp_dir()
    kind: ServerKind = request.param
    try:
        with KernelServer(kind, root) as running:
            yield running
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _providers(url: str, secrets: SecretStore, **gateway: Any) -> KernelProviders:
    settings = Settings.model_validate(
        {
            "kernels": {
                "provider": "gateway",
                "gateway": {"url": url, "token_secret": SECRET, "poll_seconds": 0.5, **gateway},
            }
        }
    )
    return KernelProviders(lambda: settings, secrets.get)


@asynccontextmanager
async def gateway_service(
    server: KernelServer, tmp_path: Path, *, url: str | None = None, **options: Any
) -> AsyncIterator[tuple[KernelService, EventRecorder]]:
    """A kernel service whose kernels run on `server` (through `url`, a proxy,
    if given), its token read from a keyring file by the secret's name."""
    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")
    secrets = SecretStore(backend=backend, env={}, scrubber=SecretScrubber())
    await secrets.set(SECRET, server.token)
    providers = _providers(url or server.url, secrets)
    async with running_service(providers=providers, **options) as running:
        yield running


def _api(server: KernelServer) -> httpx2.Client:
    return httpx2.Client(
        base_url=server.url, headers={"Authorization": f"token {server.token}"}, timeout=30
    )


async def _connections(server: KernelServer, remote_id: str | None) -> int:
    """How many WebSockets the server counts to the kernel."""
    async with httpx2.AsyncClient(
        base_url=server.url, headers={"Authorization": f"token {server.token}"}
    ) as api:
        model = (await api.get(f"api/kernels/{remote_id}")).json()
    return int(model["connections"])


async def test_output_of_every_kind_streams_live(server: KernelServer, tmp_path: Path) -> None:
    png = base64.b64encode(tiny_png()).decode()
    code = (
        "import sys\n"
        "from IPython.display import display, Image\n"
        "import base64\n"
        "for i in range(3):\n"
        "    print('line', i, flush=True)\n"
        "print('oops', file=sys.stderr, flush=True)\n"
        f"display(Image(data=base64.b64decode('{png}'), format='png'))\n"
        "6 * 7"
    )
    seen = Collected()
    async with gateway_service(server, tmp_path) as (svc, rec):
        info = await svc.start_kernel()
        assert (info.provider, info.owned, info.server_url) == ("gateway", True, server.url)
        assert info.remote_id and info.connection_file is None
        r = await svc.execute(info.kernel_id, code, on_output=seen)
        kinds = [o.output_type for o in r.outputs]
        assert r.status == "ok", r
        assert kinds == ["stream", "stream", "display_data", "execute_result"], kinds
        assert r.outputs[0].text == "line 0\nline 1\nline 2\n"
        assert r.outputs[1].name == "stderr"
        assert r.outputs[2].data is not None and r.outputs[2].data["image/png"] == png
        assert r.outputs[3].data == {"text/plain": "42"}
        assert seen.text() == "line 0\nline 1\nline 2\noops\n"
        started = rec.of_type(KernelStarted)[0].payload[0]
        assert started.provider == "gateway" and started.remote_id == info.remote_id
        with _api(server) as api:
            assert api.get(f"api/kernels/{info.remote_id}").status_code == 200
    # hdsp started it: it shut it down on the server.
    with _api(server) as api:
        assert api.get(f"api/kernels/{info.remote_id}").status_code == 404
    assert rec.of_type(KernelShutdown)


async def test_a_loop_is_interrupted_through_rest_at_its_time_limit(
    server: KernelServer, tmp_path: Path
) -> None:
    async with gateway_service(server, tmp_path) as (svc, _):
        info = await svc.start_kernel()
        await check_a_loop_is_interrupted_at_its_time_limit(svc, info.kernel_id)


@pytest.mark.slow
async def test_a_kernel_that_ignores_interrupts_is_restarted_after_the_grace(
    server: KernelServer, tmp_path: Path
) -> None:
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    async with gateway_service(server, tmp_path, interrupt_grace=1.0) as (svc, rec):
        info = await svc.start_kernel()
        await svc.execute(info.kernel_id, "x = 1")
        r = await svc.execute(info.kernel_id, code, time_limit=0.5)
        assert (r.status, r.kernel_restarted) == ("timeout", True)
        after = await svc.execute(info.kernel_id, "x")
        assert after.status == "error" and after.outputs[-1].ename == "NameError"
        assert svc.kernel_info(info.kernel_id).remote_id == info.remote_id
    statuses = [e.payload[1] for e in rec.of_type(KernelStatus)]
    assert KernelState.RESTARTING in statuses


async def test_restart_clears_the_state_and_the_kernel_goes_on(
    server: KernelServer, tmp_path: Path
) -> None:
    async with gateway_service(server, tmp_path) as (svc, _):
        info = await svc.start_kernel()
        await svc.execute(info.kernel_id, "x = 1")
        ref = await svc.restart_kernel(info.kernel_id)
        assert ref.status is KernelState.IDLE
        r = await svc.execute(info.kernel_id, "x")
        assert r.status == "error" and r.outputs[-1].ename == "NameError"
        again = await svc.execute(info.kernel_id, "'still here'")
    assert again.outputs[0].data == {"text/plain": "'still here'"}


@pytest.mark.slow
async def test_a_kernel_that_dies_ends_its_execution_and_its_server_brings_it_back(
    server: KernelServer, tmp_path: Path
) -> None:
    async with gateway_service(server, tmp_path) as (svc, rec):
        task = await svc.kernel_for_task("t1", tmp_path)
        await svc.execute(task.kernel_id, "x = 1")
        r = await svc.execute(
            task.kernel_id, "import os\nprint('bye', flush=True)\nos._exit(3)", time_limit=60
        )
        assert r.status == "died", r
        # The server restarted it: the task is told, and its code runs on.
        again = await svc.kernel_for_task("t1", tmp_path)
        assert again.kernel_id == task.kernel_id
        assert any("restarted it" in note for note in again.notes), again.notes
        after = await svc.execute(task.kernel_id, "x")
        assert after.status == "error" and after.outputs[-1].ename == "NameError"
    statuses = [e.payload[1] for e in rec.of_type(KernelStatus)]
    assert KernelState.RESTARTING in statuses


async def test_input_is_answered_by_the_callback(server: KernelServer, tmp_path: Path) -> None:
    async with gateway_service(server, tmp_path) as (svc, _):
        info = await svc.start_kernel()
        await check_input_is_answered_by_the_callback(svc, info.kernel_id)


async def test_attach_by_id_lists_and_detaches_without_shutting_down(
    server: KernelServer, tmp_path: Path
) -> None:
    with _api(server) as api:
        if server.kind == "server":
            # A notebook's session, as JupyterLab makes one.
            body = {"path": "analysis.ipynb", "type": "notebook", "kernel": {"name": "python3"}}
            made = api.post("api/sessions", json=body)
            assert made.status_code == 201, made.text
            remote_id = made.json()["kernel"]["id"]
        else:
            made = api.post("api/kernels", json={"name": "python3"})
            assert made.status_code == 201, made.text
            remote_id = made.json()["id"]
    try:
        async with gateway_service(server, tmp_path) as (svc, _):
            listing = await svc.list_remote_kernels()
            assert listing.server_url == server.url
            assert remote_id in [k.remote_id for k in listing.kernels]
            assert listing.sessions_error is None, listing.sessions_error
            if server.kind == "server":
                (session,) = listing.sessions
                assert (session.path, session.type) == ("analysis.ipynb", "notebook")
                assert session.remote_kernel_id == remote_id
            info = await svc.attach(remote_kernel_id=remote_id)
            assert (info.owned, info.remote_id) == (False, remote_id)
            r = await svc.execute(info.kernel_id, "y = 5\ny * 2")
            assert r.outputs[0].data == {"text/plain": "10"}
            # Not hdsp's to restart, but interrupted all the same (the REST interrupt).
            r = await svc.execute(info.kernel_id, "while True:\n    pass", time_limit=1)
            assert (r.status, r.kernel_restarted) == ("timeout", False)
            assert r.outputs[-1].ename == "KeyboardInterrupt"
            # Its variables, read with a silent inspection.
            found = await svc.list_variables(info.kernel_id)
            assert found.listing is not None
            assert [(v.name, v.type) for v in found.listing.variables] == [("y", "int")]
            listing = await svc.list_remote_kernels()
            mine = next(k for k in listing.kernels if k.remote_id == remote_id)
            assert mine.kernel_id == info.kernel_id
            with pytest.raises(KernelNotOwned):
                await svc.restart_kernel(info.kernel_id)
            with pytest.raises(KernelNotFound, match="no kernel"):
                await svc.attach(remote_kernel_id="0000-not-there")
            await svc.shutdown_kernel(info.kernel_id)
        with _api(server) as api:
            assert api.get(f"api/kernels/{remote_id}").status_code == 200, "never shut down"
    finally:
        with _api(server) as api:
            api.delete(f"api/kernels/{remote_id}")


async def test_a_wrong_token_is_refused_clearly_and_never_shown(
    server: KernelServer, tmp_path: Path
) -> None:
    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")
    secrets = SecretStore(backend=backend, env={}, scrubber=SecretScrubber())
    wrong = "0123456789abcdef" * 3
    await secrets.set(SECRET, wrong)
    with structlog.testing.capture_logs() as logs:
        async with running_service(providers=_providers(server.url, secrets)) as (svc, rec):
            with pytest.raises(KernelError) as caught:
                await svc.start_kernel()
    message = caught.value.message
    assert "403" in message or "401" in message, message
    assert SECRET in message
    assert wrong not in message and wrong not in repr(logs)
    assert not any(wrong.encode() in encode(e) for e in rec.events)


async def test_a_missing_secret_says_how_to_set_it(server: KernelServer, tmp_path: Path) -> None:
    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")
    secrets = SecretStore(backend=backend, env={}, scrubber=SecretScrubber())
    async with running_service(providers=_providers(server.url, secrets)) as (svc, _):
        with pytest.raises(KernelStartFailed, match=f"hdsp secret set {SECRET}"):
            await svc.start_kernel()


@pytest.mark.slow
async def test_a_websocket_cut_mid_cell_loses_no_output(
    server: KernelServer, tmp_path: Path
) -> None:
    # The cell prints, then waits for a file the test writes once the server has
    # seen the connection drop; what it prints then, the server keeps for the
    # WebSocket's session and replays when hdsp comes back.
    flag = server.root_dir / f"go-{server.kind}"
    flag.unlink(missing_ok=True)
    code = (
        "import os, time\n"
        "print('before', flush=True)\n"
        f"while not os.path.exists({str(flag)!r}):\n"
        "    time.sleep(0.02)\n"
        "for i in range(200):\n"
        "    print('during', i, flush=True)\n"
        "'done'"
    )
    async with (
        TcpProxy("127.0.0.1", server.port) as proxy,
        gateway_service(server, tmp_path, url=proxy.url) as (svc, _),
    ):
        info = await svc.start_kernel()
        async with executing(svc, info.kernel_id, code) as run:
            proxy.down()
            # The server noticed: it counts no connection to the kernel.
            while await _connections(server, info.remote_id) != 0:  # noqa: ASYNC110 (its state)
                await anyio.sleep(0.05)
            flag.write_text("go")
            proxy.up()
        (r,) = run.results
    expected = "before\n" + "".join(f"during {i}\n" for i in range(200))
    assert r.status == "ok", r
    assert r.outputs[0].text == expected
    assert run.output.text() == expected
    assert r.outputs[-1].data == {"text/plain": "'done'"}
    assert proxy.connections >= 2
    # (What the server had sent into the dead link could have been lost: it says so.)
    assert r.connection_dropped


class _Culled:
    """An `on_culled` callback that keeps what it was told: (task id, note) each."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []

    async def __call__(self, task_id: str, note: str) -> None:
        self.told.append((task_id, note))


@pytest.mark.slow
@pytest.mark.parametrize("kind", _kinds())
async def test_a_kernel_the_server_culls_is_reported_and_a_new_one_starts(
    kind: ServerKind, tmp_path: Path
) -> None:
    root = short_tmp_dir()
    culled = _Culled()

    try:
        with KernelServer(kind, root, cull=2) as culling:
            async with gateway_service(culling, tmp_path, on_culled=culled) as (svc, rec):
                first = await svc.kernel_for_task("t1", tmp_path)
                await svc.execute(first.kernel_id, "x = 1")
                await rec.wait_for(
                    lambda e: isinstance(e, KernelShutdown) and e.payload[0] == first.kernel_id
                )
                assert [task for task, _ in culled.told] == ["t1"]
                assert "shut down there" in culled.told[0][1]
                again = await svc.kernel_for_task("t1", tmp_path)
                assert again.kernel_id != first.kernel_id
                assert again.notes == [culled.told[0][1]]
                r = await svc.execute(again.kernel_id, "x")
                assert r.status == "error" and r.outputs[-1].ename == "NameError"
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_the_json_protocol_when_the_server_speaks_no_other(tmp_path: Path) -> None:
    root = short_tmp_dir()
    png = base64.b64encode(tiny_png()).decode()
    code = (
        "from IPython.display import display, Image\n"
        "import base64\n"
        "print('hello', flush=True)\n"
        f"display(Image(data=base64.b64decode('{png}'), format='png'))\n"
        "name = input('Who? ')\n"
        "name"
    )

    async def answer(prompt: str, password: bool) -> str:
        return "Ada"

    try:
        with (
            KernelServer("server", root, json_only=True) as server,
            structlog.testing.capture_logs() as logs,
        ):
            async with gateway_service(server, tmp_path) as (svc, _):
                info = await svc.start_kernel()
                r = await svc.execute(info.kernel_id, code, on_input=answer)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    opened = [e for e in logs if e["event"] == "kernel websocket open"]
    assert [e["protocol"] for e in opened] == ["json"]
    assert r.status == "ok", r
    assert [o.output_type for o in r.outputs] == ["stream", "display_data", "execute_result"]
    assert r.outputs[1].data is not None and r.outputs[1].data["image/png"] == png
    assert r.outputs[2].data == {"text/plain": "'Ada'"}


@pytest.mark.slow
async def test_a_server_that_restarts_without_the_kernel_is_reported_when_the_link_comes_back(
    tmp_path: Path,
) -> None:
    # The WebSocket closes with the server; the server that comes back on the
    # same port has no such kernel: the task is told, and its next code runs in
    # a new kernel there.
    root = short_tmp_dir()
    culled = _Culled()

    try:
        first_server = KernelServer("kernelgateway", root)
        with first_server:
            async with gateway_service(first_server, tmp_path, on_culled=culled) as (svc, rec):
                first = await svc.kernel_for_task("t1", tmp_path)
                await svc.execute(first.kernel_id, "x = 1")
                first_server.stop()
                with KernelServer(
                    "kernelgateway", root, port=first_server.port, token=first_server.token
                ):
                    await rec.wait_for(
                        lambda e: isinstance(e, KernelShutdown) and e.payload[0] == first.kernel_id
                    )
                    assert [task for task, _ in culled.told] == ["t1"]
                    again = await svc.kernel_for_task("t1", tmp_path)
                    assert again.kernel_id != first.kernel_id
                    r = await svc.execute(again.kernel_id, "x")
                    assert r.status == "error" and r.outputs[-1].ename == "NameError"
    finally:
        shutil.rmtree(root, ignore_errors=True)
