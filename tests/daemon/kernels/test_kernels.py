"""The kernel service against a real ipykernel: outputs of every kind, limits,
timeouts, cancellation, a kernel killed under an execution, input(), attaching
to a kernel started elsewhere, and the execute_code tool on top."""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from pathlib import Path

import anyio
import msgspec
import pytest
import structlog
from jupyter_client.manager import AsyncKernelManager

from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.kernels import (
    KernelDead,
    KernelNotFound,
    KernelNotOwned,
    KernelStartFailed,
)
from hdsp.daemon.kernels.outputs import STREAM_KEEP_CHARS
from hdsp.daemon.tools import AskAnswer
from hdsp.daemon.tools.kernel_output import render_for_model, strip_ansi
from hdsp.daemon.tools.kernel_tools import ExecuteCodeTool
from hdsp.protocol import (
    CellOutput,
    ExecutionOutput,
    KernelShutdown,
    KernelStarted,
    KernelState,
    KernelStatus,
    encode,
    is_durable,
)
from tests.daemon.kernels.kernel_checks import (
    check_a_loop_is_interrupted_at_its_time_limit,
    check_input_is_answered_by_the_callback,
    executing,
)
from tests.support.daemon_process import short_tmp_dir
from tests.support.kernel_helpers import (
    Collected,
    EventRecorder,
    kernel_dir,
    running_service,
    tiny_png,
)
from tests.support.tool_context import RecordingContext

pytestmark = pytest.mark.timeout(60)


async def test_stream_result_and_kernel_events(tmp_path: Path) -> None:
    work = kernel_dir(tmp_path)
    async with running_service() as (svc, rec):
        info = await svc.start_kernel(cwd=str(work))
        assert (info.kernel_name, info.owned, info.status) == ("python3", True, KernelState.IDLE)
        seen = Collected()
        r = await svc.execute(
            info.kernel_id, "import os\nprint(os.getcwd())\nprint('two')\n6 * 7", on_output=seen
        )
        assert r.status == "ok" and r.execution_count == 1
        kinds = [o.output_type for o in r.outputs]
        assert kinds == ["stream", "execute_result"]
        assert r.outputs[0].text == f"{work}\ntwo\n"
        assert r.outputs[1].data == {"text/plain": "42"}
        assert seen.text() == r.outputs[0].text
        # Events: started, then busy/idle (live-only), outputs (live-only).
        started = rec.of_type(KernelStarted)
        assert [e.payload[0].kernel_id for e in started] == [info.kernel_id]
        statuses = [e.payload[1] for e in rec.of_type(KernelStatus)]
        assert KernelState.BUSY in statuses and statuses[-1] is KernelState.IDLE
        assert not any(is_durable(e) for e in rec.of_type(KernelStatus)), statuses
        outs = rec.of_type(ExecutionOutput)
        assert outs and all(not is_durable(e) for e in outs)
        assert outs[0].payload[0].execution_id == r.execution_id
        assert [k.kernel_id for k in svc.list_kernels()] == [info.kernel_id]
    assert [e.payload[0] for e in rec.of_type(KernelShutdown)] == [info.kernel_id]


async def test_every_output_goes_out_live_even_when_the_execution_ends_at_once(
    tmp_path: Path,
) -> None:
    """The service stops its output flusher as soon as the kernel is done, which
    for quick code is while the last outputs are on their way out. An emit that
    waits (as the journal's may) was once cancelled there, and those outputs never
    went out live (one run in five); they must, every time."""
    work = kernel_dir(tmp_path)
    async with running_service(EventRecorder(slow_outputs=True)) as (svc, rec):
        info = await svc.start_kernel(cwd=str(work))
        for _ in range(3):
            rec.events.clear()  # (each execution waits for its own idle status)
            r = await svc.execute(info.kernel_id, "print('a')\n1 + 1")
            live = [
                o
                for e in rec.of_type(ExecutionOutput)
                if e.payload[0].execution_id == r.execution_id
                for o in e.payload[0].outputs
            ]
            assert [o.output_type for o in live] == ["stream", "execute_result"], live


async def test_display_of_a_png_reaches_the_model_as_an_image(tmp_path: Path) -> None:
    png = tiny_png()
    b64 = base64.b64encode(png).decode()
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode('{b64}'), format='png'))\nprint('plotted')"
    )
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        r = await svc.execute(info.kernel_id, code)
    assert r.status == "ok"
    display = r.outputs[0]
    assert display.output_type == "display_data"
    assert display.data is not None
    assert base64.b64decode(display.data["image/png"]) == png
    blocks = render_for_model(r.outputs)
    assert isinstance(blocks[0], TextBlock) and "plotted" in blocks[0].text
    images = [b for b in blocks if isinstance(b, ImageBlock)]
    assert len(images) == 1 and images[0].media_type == "image/png"
    assert base64.b64decode(images[0].data) == png


async def test_an_error_has_its_traceback_and_the_model_gets_it_without_ansi(
    tmp_path: Path,
) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        r = await svc.execute(info.kernel_id, "def f():\n    return 1 / 0\nf()")
    assert r.status == "error"
    err = r.outputs[-1]
    assert (err.output_type, err.ename, err.evalue) == (
        "error",
        "ZeroDivisionError",
        "division by zero",
    )
    assert err.traceback and any("\x1b[" in line for line in err.traceback)  # clients get colours
    text = render_for_model(r.outputs)[0]
    assert isinstance(text, TextBlock)
    assert "\x1b" not in text.text
    assert "ZeroDivisionError: division by zero" in text.text
    assert "return 1 / 0" in text.text
    assert strip_ansi("\x1b[0;31mred\x1b[0m \x1b]8;;http://x\x07link") == "red link"


async def test_clear_output_and_update_display_data(tmp_path: Path) -> None:
    code = (
        "from IPython.display import display, clear_output\n"
        "print('gone')\nclear_output()\nprint('kept')\n"
        "h = display('one', display_id=True)\nh.update('two')\n"
        "print('then', flush=True)\nclear_output(wait=True)\nprint('last')\n"
    )
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        seen = Collected()
        r = await svc.execute(info.kernel_id, code, on_output=seen)
    assert r.status == "ok"
    # clear_output(wait=True) clears before the next output: only 'last' is left.
    assert [(o.output_type, o.text) for o in r.outputs] == [("stream", "last\n")]
    # Clients saw every message as it came, clear_output and update_display_data too.
    kinds = [o.output_type for o in seen.all()]
    assert kinds.count("clear_output") == 2
    update = next(o for o in seen.all() if o.output_type == "update_display_data")
    display = next(o for o in seen.all() if o.output_type == "display_data")
    assert update.display_id == display.display_id is not None
    assert update.data == {"text/plain": "'two'"}


async def test_update_display_data_rewrites_the_shown_output(tmp_path: Path) -> None:
    code = (
        "from IPython.display import display\nh = display('one', display_id=True)\nh.update('two')"
    )
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        r = await svc.execute(info.kernel_id, code)
    assert [(o.output_type, o.data) for o in r.outputs] == [
        ("display_data", {"text/plain": "'two'"})
    ]


@pytest.mark.timeout(120)
async def test_a_100_mb_output_streams_whole_to_clients_and_is_kept_bounded(
    tmp_path: Path,
) -> None:
    line = "x" * 99 + "\n"
    code = (
        "import sys\n"
        f"chunk = {line!r} * 10_000\n"
        "for i in range(100):\n"
        "    sys.stdout.write(chunk)\n"
        "print('end', end='')\n"
    )
    total = 100 * 10_000 * 100 + 3
    async with running_service() as (svc, rec):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        seen = Collected()
        started = time.monotonic()
        r = await svc.execute(info.kernel_id, code, on_output=seen)
        took = time.monotonic() - started
    assert r.status == "ok"
    assert len(seen.text()) == total and seen.text().endswith("x\nend")
    # What the execution keeps is bounded: its head and tail, and a count.
    kept = r.outputs[0].text
    assert kept is not None and len(kept) < STREAM_KEEP_CHARS + 100
    assert kept.startswith("x" * 99) and kept.endswith("x\nend")
    assert f"[... {total - STREAM_KEEP_CHARS:,} characters dropped ...]" in kept
    events_text = sum(
        len(o.text or "") for e in rec.of_type(ExecutionOutput) for o in e.payload[0].outputs
    )
    assert events_text == total
    # Coalesced: at most ~20 updates a second, not one per kernel message.
    assert len(seen.batches) <= took * 20 + 2
    blocks = render_for_model(r.outputs, text_limit=20_000)
    text = blocks[0]
    assert isinstance(text, TextBlock)
    assert len(text.text) < 21_000
    assert text.text.startswith("x" * 99) and text.text.endswith("end")
    assert "characters (" in text.text and "left out of 100,000,003" in text.text


async def test_a_chatty_loop_is_coalesced_into_a_few_updates_a_second(tmp_path: Path) -> None:
    # The helpers' 0.2 s heartbeat (3 misses: 0.6 s) is for the tests of dead
    # kernels; on a loaded machine a kernel printing flat out can miss it, be
    # declared dead and lose its last lines, which is not what this test is about.
    async with running_service(heartbeat_interval=1.0) as (svc, rec):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        seen = Collected()
        started = time.monotonic()
        r = await svc.execute(
            info.kernel_id, "for i in range(5_000):\n    print(i, flush=True)", on_output=seen
        )
        took = time.monotonic() - started
    expected = "".join(f"{i}\n" for i in range(5_000))
    assert r.status == "ok", r
    assert r.outputs[0].text == seen.text() == expected
    assert len(seen.batches) <= took * 20 + 2
    assert len(rec.of_type(ExecutionOutput)) == len(seen.batches)


async def test_an_infinite_loop_is_interrupted_at_its_time_limit(tmp_path: Path) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        await check_a_loop_is_interrupted_at_its_time_limit(svc, info.kernel_id)


async def test_a_kernel_that_ignores_interrupts_is_restarted_after_the_grace(
    tmp_path: Path,
) -> None:
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    async with running_service(interrupt_grace=1.0) as (svc, rec):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        await svc.execute(info.kernel_id, "x = 1")
        r = await svc.execute(info.kernel_id, code, time_limit=0.5)
        assert (r.status, r.kernel_restarted) == ("timeout", True)
        after = await svc.execute(info.kernel_id, "x")
        assert after.status == "error" and after.outputs[-1].ename == "NameError"
    statuses = [e.payload[1] for e in rec.of_type(KernelStatus)]
    assert KernelState.RESTARTING in statuses
    assert all(is_durable(e) for e in rec.of_type(KernelStatus) if e.payload[1] == "restarting")


async def test_cancelling_the_caller_interrupts_the_code(tmp_path: Path) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        await svc.execute(info.kernel_id, "x = 1")
        loop = "print('looping', flush=True)\nwhile True:\n    pass"
        async with executing(svc, info.kernel_id, loop) as run:
            run.scope.cancel()
        with anyio.fail_after(10):
            after = await svc.execute(info.kernel_id, "x + 1")
    assert after.outputs[0].data == {"text/plain": "2"}


async def test_a_killed_kernel_is_reported_dead_and_can_be_restarted(tmp_path: Path) -> None:
    async with running_service() as (svc, rec):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        loop = "import os\nprint(os.getpid(), flush=True)\nwhile True:\n    pass"
        async with executing(svc, info.kernel_id, loop) as run:
            pid = int(run.output.text().split()[0])
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
        assert run.results[0].status == "died"
        dead = await rec.wait_for(
            lambda e: isinstance(e, KernelStatus) and e.payload[1] == KernelState.DEAD
        )
        assert time.monotonic() - killed < 5
        assert is_durable(dead)
        assert svc.kernel_info(info.kernel_id).status is KernelState.DEAD
        with pytest.raises(KernelDead, match="RestartKernel"):
            await svc.execute(info.kernel_id, "1")
        ref = await svc.restart_kernel(info.kernel_id)
        assert ref.status is KernelState.IDLE
        again = await svc.execute(info.kernel_id, "1 + 1")
    assert again.outputs[0].data == {"text/plain": "2"}


async def test_input_is_answered_by_the_callback(tmp_path: Path) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        await check_input_is_answered_by_the_callback(svc, info.kernel_id)


async def test_executions_queue_per_kernel_and_kernels_run_side_by_side(tmp_path: Path) -> None:
    release = anyio.Event()
    asked = anyio.Event()

    async def wait_for_release(prompt: str, password: bool) -> str:
        asked.set()
        await release.wait()
        return "go"

    async with running_service() as (svc, _):
        a = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        b = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        order: list[int] = []
        async with anyio.create_task_group() as tg:

            async def blocked() -> None:
                await svc.execute(a.kernel_id, "input()\nseq = []", on_input=wait_for_release)

            async def queued(i: int) -> None:
                r = await svc.execute(a.kernel_id, f"seq.append({i}); seq")
                order.append(i)
                assert r.status == "ok"

            tg.start_soon(blocked)
            await asked.wait()
            for i in range(3):
                tg.start_soon(queued, i)
                await anyio.wait_all_tasks_blocked()
            # Kernel a is held by the execution waiting for input; b runs meanwhile.
            other = await svc.execute(b.kernel_id, "'b ran'")
            assert other.outputs[0].data == {"text/plain": "'b ran'"}
            assert svc.statistics()["waiting"] == 3
            release.set()
        final = await svc.execute(a.kernel_id, "seq")
    assert order == [0, 1, 2]
    assert final.outputs[0].data == {"text/plain": "[0, 1, 2]"}


def _renamed_copy(connection_file: str, kernel_name: str) -> str:
    """A copy of a connection file that names the kernel `kernel_name`."""
    info = json.loads(Path(connection_file).read_text())
    copy = Path(connection_file).with_name("kernel-renamed.json")
    copy.write_text(json.dumps(info | {"kernel_name": kernel_name}))
    return str(copy)


async def test_attach_to_a_kernel_started_elsewhere_and_detach_without_killing_it(
    notebook_kernel: AsyncKernelManager,
) -> None:
    km = notebook_kernel
    async with running_service() as (svc, rec):
        info = await svc.attach_kernel(km.connection_file)
        assert (info.owned, info.connection_file) == (False, km.connection_file)
        # Named as Jupyter named it (its connection file says), not "unknown".
        assert info.kernel_name == "python3"
        r = await svc.execute(info.kernel_id, "import os\nvalue = os.getpid()\nvalue")
        assert r.outputs[0].data is not None
        pid = int(r.outputs[0].data["text/plain"])
        # Its time limit interrupts it through the control channel.
        stopped = await svc.execute(info.kernel_id, "while True:\n    pass", time_limit=1)
        assert (stopped.status, stopped.kernel_restarted) == ("timeout", False)
        with pytest.raises(KernelNotOwned):
            await svc.restart_kernel(info.kernel_id)
        # Attaching twice gives the same kernel.
        assert (await svc.attach_kernel(km.connection_file)).kernel_id == info.kernel_id
        # A name that is no kernel spec's is not taken from the file.
        odd = _renamed_copy(km.connection_file, "\x1b[31mpython3 (yours)")
        strange = await svc.attach_kernel(odd)
        assert strange.kernel_name == "unknown"
        await svc.shutdown_kernel(strange.kernel_id)
        await svc.shutdown_kernel(info.kernel_id)
        assert rec.of_type(KernelShutdown)
        with pytest.raises(KernelNotFound):
            await svc.execute(info.kernel_id, "1")
        # An attached kernel outlives the service too.
        again = await svc.attach_kernel(km.connection_file)
    assert await km.is_alive()
    os.kill(pid, 0)
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=30)
        reply = await kc.execute_interactive("value", timeout=30)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
    assert again.kernel_id != info.kernel_id


async def test_starting_errors_are_explained(tmp_path: Path) -> None:
    async with running_service(attach_timeout=1.0) as (svc, _):
        with pytest.raises(KernelStartFailed, match="No kernelspec named 'nope'"):
            await svc.start_kernel("nope", cwd=str(tmp_path))
        with pytest.raises(KernelStartFailed, match="not a directory"):
            await svc.start_kernel(cwd=str(tmp_path / "missing"))
        with pytest.raises(KernelStartFailed, match="no connection file"):
            await svc.attach_kernel(str(tmp_path / "kernel-x.json"))
        stale = tmp_path / "kernel-stale.json"
        stale.write_text(
            json.dumps(
                {
                    "shell_port": 1,
                    "iopub_port": 2,
                    "stdin_port": 3,
                    "control_port": 4,
                    "hb_port": 5,
                    "ip": str(short_tmp_dir() / "gone"),
                    "key": "k",
                    "transport": "ipc",
                    "signature_scheme": "hmac-sha256",
                    "kernel_name": "python3",
                }
            )
        )
        with (
            structlog.testing.capture_logs() as logs,
            pytest.raises(KernelStartFailed, match="did not answer"),
        ):
            await svc.attach_kernel(str(stale))
        assert svc.list_kernels() == []
        # The log says how far the handshake got: nothing came back at all.
        (given_up,) = [e for e in logs if e["event"] == "kernel handshake given up"]
        assert given_up["requests"] >= 1
        assert not given_up["replied"] and not given_up["idle_seen"]


async def test_a_kernel_whose_process_exits_at_start_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel that cannot start (its interpreter missing in its sandbox, a
    broken kernelspec) exits at once: the start says so then, not at its time
    limit (60 s here) as "did not answer"."""
    spec = tmp_path / "jupyter" / "kernels" / "broken"
    spec.mkdir(parents=True)
    argv = ["/bin/sh", "-c", "echo cannot start >&2; exit 3", "sh", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Broken"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    async with running_service(startup_timeout=60.0) as (svc, _):
        started = time.monotonic()
        with pytest.raises(KernelStartFailed, match="process exited before it answered"):
            await svc.start_kernel("broken", cwd=str(kernel_dir(tmp_path)))
        assert time.monotonic() - started < 20
        assert svc.list_kernels() == []


async def test_closing_the_service_shuts_down_the_kernels_it_started(tmp_path: Path) -> None:
    async with running_service() as (svc, _):
        info = await svc.start_kernel(cwd=str(kernel_dir(tmp_path)))
        r = await svc.execute(info.kernel_id, "import os; os.getpid()")
        assert r.outputs[0].data is not None
        pid = int(r.outputs[0].data["text/plain"])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_the_execute_code_tool_streams_a_cell_output_message_and_asks_for_input(
    tmp_path: Path,
) -> None:
    png = base64.b64encode(tiny_png()).decode()
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        "print('start', flush=True)\n"
        "name = input('Name? ')\n"
        f"display(Image(data=base64.b64decode('{png}'), format='png'))\n"
        "print('x' * 50_000)\n"
        "f'hello {name}'"
    )
    async with running_service() as (svc, _):
        ctx = RecordingContext(
            tmp_path,
            answers=[AskAnswer("messageResponse", "Ada")],
            services={"kernels": svc},
        )
        tool = ExecuteCodeTool(text_limit=2_000)
        result = await tool.execute(ctx, {"code": code})
        kernel = svc.list_kernels()[0]
    assert kernel.task_ids == [ctx.task_id] and kernel.cwd == str(tmp_path)
    assert not result.is_error
    text = result.content[0]
    assert isinstance(text, TextBlock)
    assert text.text.startswith("[execution 1 in kernel python3: ok]")
    assert "start" in text.text and "Out[1]: 'hello Ada'" in text.text
    assert "left out" in text.text and len(text.text) < 2_500
    assert [type(b) for b in result.content] == [TextBlock, ImageBlock]
    (ask,) = ctx.of_kind("followup")
    assert ask.text == "Name? "
    (cell,) = ctx.of_kind("cell_output")
    assert not cell.partial
    decoded = msgspec.json.decode(cell.text or "", type=CellOutput)
    assert decoded.status == "ok" and decoded.kernel_id == kernel.kernel_id
    assert decoded.code == code
    assert decoded.outputs[-1].data == {"text/plain": "'hello Ada'"}
    # It was partial while the code ran: 'start' was out before the ask was answered.
    updates = ctx.updates_of(cell.ts)
    assert updates[0].partial and "start" in (updates[0].text or "")
    order = [m.ts for _, m in ctx.events]
    assert order.index(ask.ts) > order.index(cell.ts)


async def test_the_model_reads_an_update_of_a_display_an_earlier_call_made(
    tmp_path: Path,
) -> None:
    """`handle.update()` in a later execute_code call changes a display the model
    saw in an earlier result: the new call's result says so, with the new data;
    a display shown by the call itself is read only once, updated."""
    async with running_service() as (svc, _):
        ctx = RecordingContext(tmp_path, services={"kernels": svc})
        tool = ExecuteCodeTool()
        await tool.execute(ctx, {"code": "h = display('loading', display_id='progress')"})
        result = await tool.execute(
            ctx,
            {
                "code": "h.update('done: 42 rows')\nd = display('a', display_id='own')\nd.update('b')"
            },
        )
    text = result.content[0]
    assert isinstance(text, TextBlock)
    assert text.text.endswith(
        "'b'\n[display progress of an earlier execution, updated; it now shows:]\n'done: 42 rows'"
    ), text.text
    assert "own" not in text.text and "'a'" not in text.text


async def test_the_tool_says_when_its_kernel_died_and_starts_it_again(tmp_path: Path) -> None:
    async with running_service() as (svc, rec):
        ctx = RecordingContext(tmp_path, services={"kernels": svc})
        tool = ExecuteCodeTool()
        first = await tool.execute(ctx, {"code": "import os\nos.getpid()"})
        text = first.content[0]
        assert isinstance(text, TextBlock)
        pid = int(text.text.rsplit(":", 1)[1].strip())
        os.kill(pid, signal.SIGKILL)
        await rec.wait_for(lambda e: isinstance(e, KernelStatus) and e.payload[1] == "dead")
        again = await tool.execute(ctx, {"code": "'alive'"})
    text = again.content[0]
    assert isinstance(text, TextBlock)
    assert "had died (its process exited) and was restarted" in text.text
    assert "'alive'" in text.text


async def test_an_idle_task_kernel_is_culled_and_its_task_is_told_state_is_gone(
    tmp_path: Path, notebook_kernel: AsyncKernelManager
) -> None:
    km = notebook_kernel
    culled: list[tuple[str, str]] = []

    async def on_culled(task_id: str, note: str) -> None:
        culled.append((task_id, note))

    async with running_service(
        cull_idle_after=2, task_busy={"working"}.__contains__, on_culled=on_culled
    ) as (svc, rec):
        # Older than the idle kernel below, so every sweep that culls that
        # one has looked at these two first, and spared them.
        busy = await svc.kernel_for_task("working", kernel_dir(tmp_path))
        attached = await svc.attach_kernel(km.connection_file)
        svc.bind_task("notebook", attached.kernel_id)
        idle = await svc.kernel_for_task("idle", kernel_dir(tmp_path))
        await svc.execute(idle.kernel_id, "x = 41")
        await rec.wait_for(
            lambda e: isinstance(e, KernelShutdown) and e.payload[0] == idle.kernel_id
        )
        assert [task for task, _ in culled] == ["idle"]
        assert "idle" in culled[0][1] and "variables and imports are gone" in culled[0][1]
        assert svc.has_kernel(busy.kernel_id) and svc.has_kernel(attached.kernel_id)
        # The next run starts a new kernel, and says the state was lost.
        again = await svc.kernel_for_task("idle", kernel_dir(tmp_path))
        assert again.kernel_id != idle.kernel_id
        assert again.notes == [culled[0][1]]
        r = await svc.execute(again.kernel_id, "x")
        assert r.status == "error" and r.outputs[0].ename == "NameError"
    assert await km.is_alive(), "a kernel hdsp attached to is never culled"


async def test_output_that_is_no_valid_unicode_is_represented_and_encodes(
    tmp_path: Path,
) -> None:
    # Issue 13, finding 6's kin: a lone surrogate (from a name decoded with
    # surrogateescape) crosses Jupyter's wire as a byte that is no UTF-8; what
    # the model and the clients get must still encode.
    code = "import os\nprint(os.fsdecode(b'report\\xff.csv'))\nos.fsdecode(b'caf\\xe9')"
    async with running_service() as (svc, _):
        ctx = RecordingContext(tmp_path, services={"kernels": svc})
        result = await ExecuteCodeTool().execute(ctx, {"code": code})
    assert not result.is_error
    text = result.content[0]
    assert isinstance(text, TextBlock)
    assert "report" in text.text and ".csv" in text.text
    msgspec.json.encode(result.content[0])
    (cell,) = ctx.of_kind("cell_output")
    assert encode(cell) and "report" in (cell.text or "")
