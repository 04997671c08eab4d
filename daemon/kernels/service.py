"""The kernel service: every Jupyter kernel the daemon uses, started or attached.

The parts, along jupyter_client's seams: each kernel is a :class:`~.kernel.Kernel`
(its state, executions, liveness, interrupt and restart); one hdsp starts has a
process (:mod:`.process`, jupyter_client's KernelManager); every kernel has a
connection (:mod:`.connection`: channels, handshake, heartbeat, routing), through
which alone it is talked to, so that a kernel served elsewhere (a gateway) can
plug in; which task runs code in which kernel is the bindings' (:mod:`.bindings`).
The service is the collection (jupyter_client's MultiKernelManager): it starts,
attaches, shuts down and culls kernels, and finds each task its kernel.

Ownership: the service runs in the daemon's task group (`await tg.start(svc.run)`)
and owns one task group; each kernel is owned by one task in it (`_run_kernel`),
which runs its connection and its liveness watch, and on the way out (shutdown,
daemon stop, cancellation) releases it under a shielded deadline: a kernel hdsp
started is shut down, one it attached to (a notebook's) is only detached from,
never killed. Different kernels run code at the same time.

A dead kernel is noted for the tasks bound to it; `restart_kernel` brings it
back, and `kernel_for_task` does so before the task's next code runs.

Kernels on a Jupyter server (:mod:`.gateway`) are kernels like the others, with
a WebSocket connection and a process half of REST calls; where a task's kernel
runs is the providers' to say (:mod:`.providers`). One the server culled or
shut down is reported to its tasks as a culled kernel, and the next code run
starts a new one.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup, TaskStatus

from hdsp.daemon.scrubber import scrubber
from hdsp.protocol import (
    Event,
    ExecutionResult,
    KernelInfo,
    KernelRef,
    KernelShutdown,
    KernelStarted,
    KernelState,
    RemoteKernel,
    RemoteKernelList,
    RemoteSession,
    VariableList,
)

from .bindings import OnCulled, TaskBindings, TaskBusy
from .connection import KernelConnection, StatusCallback, ZmqKernelConnection, load_client
from .errors import KernelDead, KernelError, KernelNotFound, KernelStartFailed
from .execution import Emit, InputCallback, OutputCallback
from .gateway import (
    GatewayTarget,
    RemoteKernelProcess,
    ServerApi,
    WebSocketKernelConnection,
    check_remote_id,
)
from .kernel import Kernel, KernelPolicy
from .launcher import KernelLauncher
from .process import KernelHandle, KernelProcess
from .providers import KernelProviders
from .variables import InspectionLimits, VariableInspection, describe_variable, list_variables

__all__ = ["KernelService", "TaskKernel"]

log = structlog.get_logger("hdsp.kernels")

#: What the model is told of a kernel on a Jupyter server.
_REMOTE_NOTE = (
    "It runs on that server, not on this machine: it does not see the workspace's files "
    "(the file tools do), and files it writes stay on the server."
)

_scrubbed = msgspec.json.Decoder(VariableList)

#: How long releasing one kernel may take (polite shutdown, then kill).
_RELEASE_DEADLINE = 10.0
#: How often a starting kernel's process is checked for an early exit (seconds).
_EXIT_POLL = 0.2


@dataclass(frozen=True)
class TaskKernel:
    """The kernel a task's code runs in, and what the task should be told about
    it (it died, was restarted or replaced since the task last ran code)."""

    kernel_id: str
    name: str
    cwd: str | None
    notes: list[str]


class KernelService:
    def __init__(
        self,
        emit: Emit,
        *,
        runtime_dir: Path,
        default_kernel: str = "python3",
        default_cwd: str | None = None,
        default_time_limit: float = 120.0,
        interrupt_grace: float = 5.0,
        heartbeat_interval: float = 1.0,
        heartbeat_misses: int = 3,
        output_interval: float = 0.05,
        startup_timeout: float = 60.0,
        attach_timeout: float = 10.0,
        max_queued: int = 64,
        cull_idle_after: float | None = None,
        launcher: KernelLauncher | None = None,
        task_busy: TaskBusy | None = None,
        on_culled: OnCulled | None = None,
        on_notebook_kernel: OnCulled | None = None,
        inspection_limits: InspectionLimits | None = None,
        providers: KernelProviders | None = None,
    ) -> None:
        """`task_busy` says whether a task is working (its kernel is never culled
        then); `on_culled` is told (task id, note) when a task's kernel was culled,
        to record it in the task's history. `cull_idle_after`: seconds a kernel
        hdsp started for a task may sit idle, with its tasks idle too, before it is
        shut down to give its memory back; None: never. `on_notebook_kernel` is told
        (task id, note) when a kernel the task used that runs outside hdsp (a
        notebook's) died or went away (hdsp detached from it without restarting
        it), or was restarted where it runs. `providers` says where kernels run
        (None: always here)."""
        self._emit_event = emit
        self.providers = providers
        self.launcher = launcher
        self.runtime_dir = runtime_dir
        self.default_kernel = default_kernel
        self.default_cwd = default_cwd
        self.default_time_limit = default_time_limit
        self.startup_timeout = startup_timeout
        self.attach_timeout = attach_timeout
        self._policy = KernelPolicy(
            interrupt_grace=interrupt_grace,
            heartbeat_interval=heartbeat_interval,
            heartbeat_misses=heartbeat_misses,
            output_interval=output_interval,
            startup_timeout=startup_timeout,
            max_queued=max_queued,
        )
        self.cull_idle_after = cull_idle_after
        self._limits = inspection_limits or InspectionLimits()
        self._bindings = TaskBindings(task_busy=task_busy, on_culled=on_culled)
        self._on_notebook_kernel = on_notebook_kernel
        self._kernels: dict[str, Kernel] = {}
        #: The REST clients of remote kernels, by kernel id (closed with the kernel).
        self._apis: dict[str, ServerApi] = {}
        self._tg: TaskGroup | None = None
        self._closing = False
        self._closed = anyio.Event()

    # ---- lifetime -----------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own every kernel until `aclose()` (or cancellation, which releases
        them all the same, shielded)."""
        await anyio.Path(self.runtime_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.cull_idle_after is not None:
                tg.start_soon(self._cull_loop, self.cull_idle_after)
            try:
                task_status.started()
                await self._closed.wait()
            finally:
                self._closing = True
                self._tg = None
            tg.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Shut down every kernel hdsp started, detach from the others, and end
        `run()`. Kernel events are published on the way."""
        self._closing = True
        async with anyio.create_task_group() as tg:
            for k in list(self._kernels.values()):
                tg.start_soon(self._stop, k)
        self._closed.set()

    # ---- queries ------------------------------------------------------------

    def list_kernels(self) -> list[KernelInfo]:
        return [self._info(k) for k in self._kernels.values() if k.announced]

    def kernel_info(self, kernel_id: str) -> KernelInfo:
        return self._info(self._get(kernel_id))

    def has_kernel(self, kernel_id: str) -> bool:
        k = self._kernels.get(kernel_id)
        return k is not None and k.announced and not k.closing

    def statistics(self) -> dict[str, int]:
        kernels = list(self._kernels.values())
        return {
            "kernels": len(kernels),
            "owned": sum(1 for k in kernels if k.owned),
            "busy": sum(1 for k in kernels if k.current is not None),
            "waiting": sum(k.waiting for k in kernels),
        }

    def _info(self, k: Kernel) -> KernelInfo:
        return KernelInfo(
            kernel_id=k.id,
            kernel_name=k.name,
            status=k.status,
            owned=k.owned,
            cwd=k.cwd,
            connection_file=k.connection_file,
            task_ids=sorted(self._bindings.tasks_of(k.id)),
            provider="gateway" if k.remote else "local",
            server_url=k.server_url,
            remote_id=k.remote_id,
        )

    def _get(self, kernel_id: str) -> Kernel:
        k = self._kernels.get(kernel_id)
        if k is None or k.closing or not k.announced:
            raise KernelNotFound(f"No kernel {kernel_id!r}; ListKernels lists the kernels.")
        return k

    # ---- starting, attaching, stopping ------------------------------------------

    async def start_kernel(
        self,
        kernel_name: str | None = None,
        cwd: str | None = None,
        *,
        for_task: str | None = None,
        provider: str | None = None,
        profile: str | None = None,
    ) -> KernelInfo:
        """Start a kernel by kernelspec name: here in `cwd`, over ipc, or on the
        Jupyter server that `provider` and `profile` choose (see
        :mod:`.providers`; a kernel for a task goes where the task's choice says)."""
        self._require_open()
        providers = self.providers
        if providers is not None:
            if for_task is not None and provider is None:
                server = providers.for_task(for_task)
            else:
                server = providers.choose(provider, profile)
            if server is not None:
                target = await providers.target(server)
                return await self.start_remote_kernel(target, kernel_name, for_task=for_task)
        elif provider == "gateway":
            raise KernelStartFailed("This daemon runs no kernels on a Jupyter server.")
        return await self._start_local(kernel_name, cwd, for_task)

    async def _start_local(
        self, kernel_name: str | None, cwd: str | None, for_task: str | None
    ) -> KernelInfo:
        tg = self._require_open()
        name = kernel_name or self.default_kernel
        workdir = str(await anyio.Path(cwd or self.default_cwd or os.getcwd()).absolute())
        if not await anyio.Path(workdir).is_dir():
            raise KernelStartFailed(f"The working directory {workdir} is not a directory.")
        launcher = self.launcher
        if launcher is not None and (refusal := launcher.kernel_refusal()) is not None:
            raise KernelStartFailed(f"No kernel was started. {refusal}")
        kernel_id = str(uuid.uuid4())
        process = KernelProcess(
            kernel_id=kernel_id,
            kernel_name=name,
            workdir=workdir,
            runtime_dir=self.runtime_dir,
            launcher=launcher,
        )
        k = self._new_kernel(
            kernel_id,
            name,
            process.connection_file,
            process.client,
            process=process,
            cwd=workdir,
            started_for=for_task,
        )
        # Bound before it starts, so that kernelStarted names the task.
        previous = self._bindings.bind(for_task, k.id) if for_task is not None else None
        try:
            info = await self._open(tg, k, process.start, self.startup_timeout)
        except BaseException:
            if for_task is not None:
                self._bindings.restore(for_task, previous)
            raise
        log.info("kernel started", kernel_id=k.id, kernel_name=name, cwd=workdir)
        return info

    async def start_remote_kernel(
        self, target: GatewayTarget, kernel_name: str | None = None, *, for_task: str | None = None
    ) -> KernelInfo:
        """Start a kernel on the Jupyter server `target` (by kernelspec name; the
        target's, else the server's default). hdsp owns it: it interrupts,
        restarts and shuts it down through the server's REST API."""
        tg = self._require_open()
        kernel_id = str(uuid.uuid4())
        api = ServerApi(target)
        process = RemoteKernelProcess(api, kernel_id=kernel_id, kernel_name=kernel_name)
        made: list[WebSocketKernelConnection] = []

        def gone() -> None:
            process.gone = True

        def connect(on_status: StatusCallback) -> KernelConnection:
            # Its remote id is known once the kernel started, before it runs.
            conn = WebSocketKernelConnection(
                api, None, kernel_id=kernel_id, on_status=on_status, on_gone=gone
            )
            made.append(conn)
            return conn

        k = Kernel(
            kernel_id=kernel_id,
            name=kernel_name or target.kernel_name or "(server default)",
            connection_file=None,
            connect=connect,
            process=process,
            policy=self._policy,
            emit=self._emit,
            on_restarted=self._restarted,
            started_for=for_task,
            on_replaced=self._remote_restarted,
            on_gone=self._remote_gone,
            server_url=target.shown,
            remote_id="(starting)",
        )
        self._apis[kernel_id] = api

        async def launch() -> None:
            await process.start()
            assert process.remote_id is not None
            k.name = process.kernel_name or k.name
            k.remote_id = made[0].remote_id = process.remote_id

        previous = self._bindings.bind(for_task, k.id) if for_task is not None else None
        try:
            info = await self._open(tg, k, launch, self.startup_timeout)
        except BaseException:
            if for_task is not None:
                self._bindings.restore(for_task, previous)
            raise
        finally:
            if not k.announced:
                await self._close_api(kernel_id)
        log.info(
            "kernel started on a Jupyter server",
            kernel_id=k.id,
            kernel_name=k.name,
            server=target.shown,
            remote_id=k.remote_id,
        )
        return info

    async def attach_remote_kernel(self, target: GatewayTarget, remote_id: str) -> KernelInfo:
        """Use a kernel the Jupyter server `target` runs already, by its id there.
        hdsp never restarts or shuts it down (`shutdown_kernel` detaches)."""
        tg = self._require_open()
        check_remote_id(remote_id)
        for other in self._kernels.values():
            if (
                other.remote_id == remote_id
                and other.server_url == target.shown
                and not other.closing
                and other.announced
            ):
                return self._info(other)
        api = ServerApi(target)
        kernel_id = str(uuid.uuid4())
        try:
            model = await api.kernel(remote_id)
        except BaseException:
            await api.aclose()
            raise
        if model is None:
            await api.aclose()
            raise KernelNotFound(
                f"The Jupyter server at {target.shown} has no kernel {remote_id}; "
                "`hdsp kernels --gateway` lists its kernels."
            )
        self._apis[kernel_id] = api

        def connect(on_status: StatusCallback) -> KernelConnection:
            return WebSocketKernelConnection(
                api, remote_id, kernel_id=kernel_id, on_status=on_status
            )

        k = Kernel(
            kernel_id=kernel_id,
            name=str(model.get("name") or "unknown"),
            connection_file=None,
            connect=connect,
            process=None,
            policy=self._policy,
            emit=self._emit,
            on_restarted=self._restarted,
            on_died=self._attached_died,
            on_replaced=self._attached_restarted,
            on_gone=self._attached_died,
            server_url=target.shown,
            remote_id=remote_id,
        )

        async def nothing_to_launch() -> None:
            pass

        try:
            info = await self._open(tg, k, nothing_to_launch, self.attach_timeout)
        finally:
            if not k.announced:
                await self._close_api(kernel_id)
        log.info("remote kernel attached", kernel_id=k.id, server=target.shown, remote_id=remote_id)
        return info

    async def attach(
        self,
        connection_file: str | None = None,
        *,
        remote_kernel_id: str | None = None,
        profile: str | None = None,
    ) -> KernelInfo:
        """AttachKernel: by connection file, or by id on the Jupyter server of the
        settings (or of `profile`)."""
        if (connection_file is None) == (remote_kernel_id is None):
            raise KernelStartFailed(
                "AttachKernel takes either a connection file or a remote kernel id."
            )
        if connection_file is not None:
            return await self.attach_kernel(connection_file)
        assert remote_kernel_id is not None
        target = await self._gateway(profile)
        return await self.attach_remote_kernel(target, remote_kernel_id)

    async def list_remote_kernels(self, profile: str | None = None) -> RemoteKernelList:
        """The kernels and sessions of the Jupyter server of the settings (or of
        `profile`), each kernel with hdsp's id for it when hdsp uses it."""
        target = await self._gateway(profile)
        used = {
            k.remote_id: k.id
            for k in self._kernels.values()
            if k.server_url == target.shown and k.announced and not k.closing
        }
        async with ServerApi(target) as api:
            kernels = await api.kernels()
            sessions_error = None
            try:
                sessions = await api.sessions()
            except KernelError as exc:
                sessions, sessions_error = [], exc.message
        return RemoteKernelList(
            server_url=target.shown,
            kernels=[_remote_kernel(model, used) for model in kernels if _text(model.get("id"))],
            sessions=[_remote_session(model) for model in sessions if _text(model.get("id"))],
            sessions_error=sessions_error,
        )

    def check_provider(self, provider: str | None, profile: str | None) -> None:
        """Raise KernelStartFailed (saying what to set) when kernels cannot run
        where `provider` and `profile` say."""
        if self.providers is not None:
            self.providers.choose(provider, profile)
        elif provider == "gateway":
            raise KernelStartFailed("This daemon runs no kernels on a Jupyter server.")

    async def _gateway(self, profile: str | None) -> GatewayTarget:
        providers = self.providers
        server = providers.choose("gateway", profile) if providers is not None else None
        if providers is None or server is None:
            raise KernelStartFailed("This daemon runs no kernels on a Jupyter server.")
        return await providers.target(server)

    async def _close_api(self, kernel_id: str) -> None:
        api = self._apis.pop(kernel_id, None)
        if api is not None:
            with anyio.move_on_after(5, shield=True):
                await api.aclose()

    async def attach_kernel(self, connection_file: str) -> KernelInfo:
        """Use a running kernel through its connection file. hdsp never shuts it
        down; `shutdown_kernel` and the daemon's stop only detach."""
        tg = self._require_open()
        path = await anyio.Path(connection_file).expanduser()
        if not await path.is_file():
            raise KernelStartFailed(f"There is no connection file at {path}.")
        resolved = str(await path.resolve())
        for other in self._kernels.values():
            if other.connection_file == resolved and not other.closing and other.announced:
                return self._info(other)
        kc = load_client(resolved)
        name = str(getattr(kc, "kernel_name", "") or "") or "unknown"
        k = self._new_kernel(str(uuid.uuid4()), name, resolved, lambda: kc)

        async def nothing_to_launch() -> None:
            pass

        info = await self._open(tg, k, nothing_to_launch, self.attach_timeout)
        log.info("kernel attached", kernel_id=k.id, connection_file=resolved)
        return info

    def _new_kernel(
        self,
        kernel_id: str,
        name: str,
        connection_file: str,
        make_client: Callable[[], Any],
        *,
        process: KernelHandle | None = None,
        cwd: str | None = None,
        started_for: str | None = None,
    ) -> Kernel:
        def connect(on_status: StatusCallback) -> KernelConnection:
            return ZmqKernelConnection(make_client, kernel_id=kernel_id, on_status=on_status)

        return Kernel(
            kernel_id=kernel_id,
            name=name,
            connection_file=connection_file,
            connect=connect,
            process=process,
            policy=self._policy,
            emit=self._emit,
            on_restarted=self._restarted,
            cwd=cwd,
            started_for=started_for,
            on_died=None if process is not None else self._attached_died,
            on_replaced=None if process is not None else self._attached_restarted,
        )

    async def shutdown_kernel(self, kernel_id: str) -> KernelRef:
        """Shut down a kernel hdsp started; detach from one it attached to."""
        k = self._get(kernel_id)
        await self._stop(k)
        return KernelRef(kernel_id=kernel_id, status=KernelState.DEAD)

    async def _stop(self, k: Kernel) -> None:
        k.stop_requested.set()
        await k.stopped.wait()

    def _require_open(self) -> TaskGroup:
        if self._tg is None or self._closing:
            raise KernelStartFailed("The kernel service is not running (is the daemon stopping?).")
        return self._tg

    async def _open(
        self, tg: TaskGroup, k: Kernel, launch: Callable[[], Awaitable[None]], limit: float
    ) -> KernelInfo:
        self._kernels[k.id] = k
        try:
            await tg.start(self._run_kernel, k, launch, limit)
        finally:
            if not k.announced:
                self._kernels.pop(k.id, None)
        return self._info(k)

    async def _run_kernel(
        self,
        k: Kernel,
        launch: Callable[[], Awaitable[None]],
        limit: float,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        failure: KernelError | None = None
        try:
            await launch()
            async with anyio.create_task_group() as ktg:
                await ktg.start(k.conn.run)
                try:
                    with anyio.fail_after(limit):
                        exited = await _handshake_or_exit(k)
                except TimeoutError:
                    failure = KernelStartFailed(
                        f"The kernel did not answer within {limit:g} s ({k.connection_file})."
                    )
                    ktg.cancel_scope.cancel()
                else:
                    if exited:
                        failure = KernelStartFailed(
                            "The kernel's process exited before it answered: hdspd's log "
                            f"has what it printed ({k.connection_file})."
                        )
                        ktg.cancel_scope.cancel()
                if failure is None:
                    if k.status is KernelState.STARTING:
                        k.status = KernelState.IDLE
                    k.announced = True
                    k.last_active = anyio.current_time()
                    await self._emit(KernelStarted(payload=(self._info(k),)))
                    ktg.start_soon(k.watch_liveness)
                    task_status.started()
                    await k.stop_requested.wait()
                    ktg.cancel_scope.cancel()
            if failure is not None:
                raise failure
        finally:
            k.closing = True
            k.abandon("it was shut down")
            with anyio.move_on_after(_RELEASE_DEADLINE, shield=True):
                await self._release(k)
            self._kernels.pop(k.id, None)
            self._bindings.kernel_gone(k.id)
            k.stopped.set()

    async def _release(self, k: Kernel) -> None:
        """The connection is closed already (its task ended); shut down the
        process hdsp started, and say the kernel is gone."""
        if k.process is not None:
            await k.process.shutdown()
        await self._close_api(k.id)
        if k.announced:
            k.status = KernelState.DEAD
            await self._emit(KernelShutdown(payload=(k.id,)))
            log.info("kernel shut down" if k.owned else "kernel detached", kernel_id=k.id)

    # ---- interrupt and restart --------------------------------------------------

    async def interrupt_kernel(self, kernel_id: str) -> KernelRef:
        k = self._get(kernel_id)
        await k.interrupt()
        return KernelRef(kernel_id=k.id, status=k.status)

    async def restart_kernel(self, kernel_id: str) -> KernelRef:
        """Restart a kernel hdsp started (a dead one too). Its state is lost; an
        execution running in it ends with status "restarted"."""
        k = self._get(kernel_id)
        await k.restart(now=k.status is KernelState.DEAD)
        return KernelRef(kernel_id=k.id, status=k.status)

    # ---- executing --------------------------------------------------------------

    async def execute(
        self,
        kernel_id: str,
        code: str,
        *,
        time_limit: float | None = None,
        on_output: OutputCallback | None = None,
        on_input: InputCallback | None = None,
        task_id: str | None = None,
    ) -> ExecutionResult:
        """Run `code` after the executions queued before it, and return its result.

        Outputs go to `on_output` (and out as `executionOutput` events) as they
        come, coalesced. `input()` calls `on_input`; without it, the code cannot
        read input. Past `time_limit` seconds (the default limit when None) the
        kernel is interrupted, then restarted if it does not stop. Cancelling the
        caller stops the code the same way before the cancellation goes on.
        """
        k = self._get(kernel_id)
        limit = self.default_time_limit if time_limit is None else time_limit
        return await k.execute(
            code, time_limit=limit, on_output=on_output, on_input=on_input, task_id=task_id
        )

    async def _attached_died(self, k: Kernel) -> None:
        """A kernel hdsp attached to (a notebook's) died or its connection went
        away (Lab shut it down, restarted it, or its server stopped). It is not
        hdsp's to restart: hdsp detaches from it, and each task bound to it is
        told (a note for the model, a `notebook_kernel` message in its history)
        that its next code runs in a kernel of its own. A prompt from the
        notebook attaches its kernel again."""
        note = (
            f"The notebook's kernel {k.name} ({k.id}), which runs outside hdsp, "
            f"{k.death_reason or 'stopped answering'} (it was shut down or restarted where "
            "it runs, e.g. in JupyterLab). hdsp detached from it and did not restart it. "
            "Its variables are out of reach: the task's next code runs in a new kernel of "
            "the task's own, in the workspace, until a message from the notebook attaches "
            "its kernel again."
        )
        log.warning("attached kernel lost", kernel_id=k.id, reason=k.death_reason)
        await self._tell_tasks(k, note, replace_notes=True)
        k.closing = True  # no code starts in it any more
        k.stop_requested.set()  # detach (never a shutdown: it has no process of hdsp's)

    async def _remote_gone(self, k: Kernel) -> None:
        """The Jupyter server no longer has a kernel hdsp started there (it culled
        it for idling, or someone shut it down there): its tasks are told, as of
        a kernel hdsp culled, and the next code run starts a new one."""
        note = (
            f"The kernel {k.name} ({k.id}) on the Jupyter server {k.server_url} was shut down "
            "there (the server culls idle kernels, or someone shut it down): its variables "
            "and imports are gone. The next code run starts a new kernel."
        )
        k.closing = True  # no code starts in it any more; the tasks get a new one
        tasks = await self._bindings.culled(k.id, note)
        log.warning("remote kernel gone", kernel_id=k.id, server=k.server_url, tasks=tasks)
        k.stop_requested.set()  # its owner releases it (nothing left to shut down)

    async def _remote_restarted(self, k: Kernel) -> None:
        """A kernel hdsp started on a Jupyter server came back as a new process
        that hdsp did not restart (it died there and the server restarted it):
        its tasks are told that their variables are gone."""
        note = (
            f"The kernel {k.name} ({k.id}) on the Jupyter server {k.server_url} died there "
            "and the server restarted it: its variables and imports are gone."
        )
        log.warning("remote kernel restarted by its server", kernel_id=k.id)
        self._bindings.note(k.id, note)

    async def _attached_restarted(self, k: Kernel) -> None:
        """A kernel hdsp attached to was restarted where it runs (JupyterLab's
        Restart): hdsp stays attached (same connection file), and its tasks are
        told that the variables are gone."""
        note = (
            f"The notebook's kernel {k.name} ({k.id}), which runs outside hdsp, was restarted "
            "where it runs (e.g. in JupyterLab): its variables and imports are gone. The "
            "task's code still runs in it."
        )
        log.warning("attached kernel restarted elsewhere", kernel_id=k.id)
        await self._tell_tasks(k, note, replace_notes=False)

    async def _tell_tasks(self, k: Kernel, note: str, *, replace_notes: bool) -> None:
        """Note `note` for the model of each task bound to `k` (for its next code)
        and have `on_notebook_kernel` record it in the task's history."""
        tasks = sorted(self._bindings.tasks_of(k.id))
        if replace_notes:
            for task_id in tasks:
                self._bindings.drop_notes(task_id)
        self._bindings.note(k.id, note)
        if self._on_notebook_kernel is not None:
            for task_id in tasks:
                try:
                    await self._on_notebook_kernel(task_id, note)
                except Exception:
                    log.exception("recording what befell a kernel failed", task_id=task_id)

    async def execute_silently(
        self, kernel_id: str, code: str, time_limit: float
    ) -> ExecutionResult:
        """Run `code` as Jupyter's silent execution, never behind other code
        (KernelBusy at once) and never interrupting anything: past `time_limit`
        the result is given up on (status "timeout"). For inspections that bound
        themselves inside the kernel."""
        return await self._get(kernel_id).execute_silently(code, time_limit=time_limit)

    async def list_variables(
        self, kernel_id: str, *, include_private: bool = False
    ) -> VariableInspection:
        """The kernel's variables (see :mod:`.variables`)."""
        self._get(kernel_id)
        run = functools.partial(self.execute_silently, kernel_id)
        return await list_variables(run, include_private=include_private, limits=self._limits)

    async def describe_variable(self, kernel_id: str, name: str) -> VariableInspection:
        """One variable of the kernel in depth (see :mod:`.variables`)."""
        self._get(kernel_id)
        run = functools.partial(self.execute_silently, kernel_id)
        return await describe_variable(run, name, limits=self._limits)

    async def list_task_variables(
        self, *, task_id: str | None, kernel_id: str | None, include_private: bool = False
    ) -> VariableList:
        """ListVariables: a kernel's variables, by id or as the kernel a task's
        code runs in. No kernel is started for a task that has none yet."""
        if kernel_id is None and task_id is not None:
            bound = self._bindings.kernel_of(task_id)
            k = self._kernels.get(bound) if bound is not None else None
            if k is None or k.closing or not k.announced:
                return VariableList(
                    status="no_kernel", message="The task has no kernel yet: it ran no code."
                )
            kernel_id = k.id
        if kernel_id is None:
            raise KernelNotFound("ListVariables needs a taskId or a kernelId.")
        k = self._get(kernel_id)
        if k.status is KernelState.DEAD:
            return VariableList(kernel_id=k.id, status="error", message=k.dead_message())
        found = await self.list_variables(k.id, include_private=include_private)
        if found.listing is not None:
            # The user's values may hold a key the daemon knows: scrubbed, as
            # kernel output is everywhere else.
            listing = msgspec.structs.replace(found.listing, kernel_id=k.id)
            return _scrubbed.decode(scrubber.scrub_json(msgspec.json.encode(listing)))
        status = found.status if found.status in ("busy", "timeout") else "error"
        return VariableList(kernel_id=k.id, status=status, message=found.message)

    def _restarted(self, k: Kernel, running_task: str | None) -> None:
        note = "The kernel was restarted; its variables are gone."
        self._bindings.note(k.id, note, except_task=running_task)

    # ---- tasks ------------------------------------------------------------------

    def bind_task(self, task_id: str, kernel_id: str) -> None:
        """Make `task_id`'s code run in `kernel_id` from now on. A kernel hdsp
        started for the task that nothing uses any more (a prompt from a notebook
        moved the task to the notebook's kernel) is shut down."""
        previous = self._bindings.bind(task_id, self._get(kernel_id).id)
        old = self._kernels.get(previous) if previous not in (None, kernel_id) else None
        if (
            old is not None
            and old.owned
            and old.started_for == task_id
            and not old.closing
            and old.current is None
            and old.waiting == 0
            and not self._bindings.tasks_of(old.id)
        ):
            log.info("kernel released: its task moved", kernel_id=old.id, task_id=task_id)
            old.stop_requested.set()  # its owner shuts it down

    async def kernel_for_task(self, task_id: str, workspace: Path | str) -> TaskKernel:
        """The task's kernel: its bound one, restarted if it died, or a new one
        started in the task's workspace on first use."""
        notes = self._bindings.take_notes(task_id)
        kernel_id = self._bindings.kernel_of(task_id)
        k = self._kernels.get(kernel_id) if kernel_id is not None else None
        if k is not None and (k.closing or not k.announced):
            k = None
        if kernel_id is not None and k is None and not notes:
            notes.append(
                f"The kernel this task used ({kernel_id}) was shut down; a new one was "
                "started, so earlier variables and imports are gone."
            )
        if k is None:
            info = await self.start_kernel(cwd=str(workspace), for_task=task_id)
            k = self._kernels[info.kernel_id]
        elif k.status is KernelState.DEAD:
            if not k.owned:
                raise KernelDead(k.dead_message())
            reason = k.death_reason or "unknown cause"
            await k.restart(now=True)
            self._bindings.drop_notes(task_id)
            notes.append(
                f"The kernel had died ({reason}) and was restarted before this code ran: "
                "earlier variables and imports are gone."
            )
        return TaskKernel(kernel_id=k.id, name=k.name, cwd=k.cwd, notes=notes)

    def describe_for_task(self, task_id: str, workspace: Path | str) -> str:
        """One line for the system prompt: which kernel the task's code runs in."""
        k = self._kernels.get(self._bindings.kernel_of(task_id) or "")
        if k is None or k.closing:
            try:
                server = self.providers.for_task(task_id) if self.providers else None
            except KernelError:
                server = None
            if server is not None:
                name = server.kernel_name or "the server's default kernel"
                return (
                    f"{name} on the Jupyter server {_shown(server.url)}, started on first use "
                    f"of execute_code. {_REMOTE_NOTE}"
                )
            return (
                f"{self.default_kernel}, started on first use of execute_code, "
                f"working directory {workspace}"
            )
        if k.remote:
            origin = "started by hdsp" if k.owned else "attached (it runs outside hdsp)"
            return (
                f"{k.name} (id {k.id}, {origin}) on the Jupyter server {k.server_url}, status "
                f"{k.status.value}. {_REMOTE_NOTE}"
            )
        origin = "started by hdsp" if k.owned else "attached (it runs outside hdsp)"
        where = f"working directory {k.cwd}" if k.cwd else "working directory unknown"
        return f"{k.name} (id {k.id}, {origin}), {where}, status {k.status.value}"

    async def release_task(self, task_id: str) -> None:
        """Forget the task's binding; shut down the kernel started for it when no
        other task uses it."""
        self._bindings.drop_notes(task_id)
        kernel_id = self._bindings.unbind(task_id)
        k = self._kernels.get(kernel_id) if kernel_id is not None else None
        if k is None:
            return
        if k.owned and k.started_for == task_id and not self._bindings.tasks_of(k.id):
            if not k.closing:  # (culled meanwhile: stopping already)
                await self._stop(k)

    # ---- culling --------------------------------------------------------------

    async def _cull_loop(self, after: float) -> None:
        """Shut down the kernels hdsp started for tasks once they and their tasks
        have been idle for `after` seconds (Jupyter Server's cull_idle_timeout).
        Kernels hdsp attached to are someone else's: never culled."""
        while True:
            await anyio.sleep(min(60.0, after / 4))
            now = anyio.current_time()
            for k in list(self._kernels.values()):
                if (
                    k.owned
                    and k.announced
                    and not k.closing
                    and k.current is None
                    and k.waiting == 0
                    and now - k.last_active >= after
                    and not self._bindings.any_busy(k.id)
                ):
                    await self._cull(k, now - k.last_active)

    async def _cull(self, k: Kernel, idle: float) -> None:
        note = (
            f"The kernel {k.name} ({k.id}) was shut down after {idle / 60:.0f} min idle, "
            "to give its memory back (kernels.cull_idle_seconds): its variables and "
            "imports are gone. The next code run starts a new kernel."
        )
        k.closing = True  # from now on no code starts in it; the tasks get a new one
        tasks = await self._bindings.culled(k.id, note)
        log.info("kernel culled", kernel_id=k.id, idle_seconds=round(idle), tasks=tasks)
        await self._stop(k)

    # ---- events -------------------------------------------------------------

    async def _emit(self, event: Event) -> None:
        try:
            await self._emit_event(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The journal closed first (the daemon is going down): nobody listens.
            pass


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _shown(url: str) -> str:
    from .gateway import shown_url

    return shown_url(url)


def _remote_kernel(model: dict[str, Any], used: dict[str | None, str]) -> RemoteKernel:
    remote_id = str(model["id"])
    connections = model.get("connections")
    return RemoteKernel(
        remote_id=remote_id,
        name=_text(model.get("name")),
        execution_state=_text(model.get("execution_state")),
        last_activity=_text(model.get("last_activity")),
        connections=connections if isinstance(connections, int) else None,
        kernel_id=used.get(remote_id),
    )


def _remote_session(model: dict[str, Any]) -> RemoteSession:
    kernel = model.get("kernel")
    notebook = model.get("notebook")
    path = _text(model.get("path"))
    if path is None and isinstance(notebook, dict):
        path = _text(notebook.get("path"))
    return RemoteSession(
        session_id=str(model["id"]),
        path=path,
        name=_text(model.get("name")),
        type=_text(model.get("type")),
        remote_kernel_id=_text(kernel.get("id")) if isinstance(kernel, dict) else None,
    )


async def _handshake_or_exit(k: Kernel) -> bool:
    """The kernel's handshake, or its process's exit, whichever comes first: True
    when the process exited (a kernel that cannot start, such as an interpreter
    its sandbox cannot see, fails at once, not at the start's time limit)."""
    exited = False
    async with anyio.create_task_group() as race:

        async def handshake() -> None:
            await k.conn.handshake(certain=k.owned)
            race.cancel_scope.cancel()

        async def watch() -> None:
            nonlocal exited
            process = k.process
            if process is None:
                return  # (not started here: its handshake alone says)
            while await process.is_alive():  # noqa: ASYNC110 (a process, polled)
                await anyio.sleep(_EXIT_POLL)
            exited = True
            race.cancel_scope.cancel()

        race.start_soon(handshake)
        race.start_soon(watch)
    return exited
