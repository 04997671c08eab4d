"""Starting, attaching and stopping kernels, and owning each while it lives.

A kernel starts here (a process hdsp starts, :mod:`.process`), on a Jupyter
server (:mod:`.gateway`: hdsp starts it there through the server's REST API),
or is attached to (by connection file, or by its id on a Jupyter server). All
ways share one open path (`_open`): the kernel is put in the registry, bound to
the task it is for (bound before it starts, so that kernelStarted names the
task; put back if it fails), and handed to its owner (`_run_kernel`), a task in
the service's task group, which launches it, runs its connection, waits for its
handshake (or its process's early exit), watches its liveness, and on the way
out (shutdown, daemon stop, cancellation) releases it under a shielded
deadline: a kernel hdsp started is shut down, one it attached to is only
detached from, never killed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from hdsp.protocol import KernelInfo, KernelShutdown, KernelStarted, KernelState

from .bindings import TaskBindings
from .connection import KernelConnection, StatusCallback, ZmqKernelConnection, load_client
from .errors import KernelError, KernelNotFound, KernelStartFailed
from .execution import Emit
from .fates import KernelFates
from .gateway import (
    GatewayTarget,
    RemoteKernelProcess,
    ServerApi,
    WebSocketKernelConnection,
    check_remote_id,
)
from .kernel import Kernel, KernelPolicy
from .launcher import KernelLauncher
from .process import KernelProcess
from .providers import KernelProviders
from .registry import KernelRegistry
from .workdir import kernel_workdir

__all__ = ["KernelStarter"]

log = structlog.get_logger("hdsp.kernels")

#: How long releasing one kernel may take (polite shutdown, then kill).
_RELEASE_DEADLINE = 10.0
#: How often a starting kernel's process is checked for an early exit (seconds).
_EXIT_POLL = 0.2
#: What a spare kernel runs, silently, before a task takes it (see `start_spare`).
_WARM_UP = "get_ipython().displayhook.compute_format_data(2); get_ipython().transform_cell('1+1')"


async def _nothing_to_launch() -> None:
    pass


class KernelStarter:
    def __init__(
        self,
        *,
        kernels: KernelRegistry,
        bindings: TaskBindings,
        fates: KernelFates,
        policy: KernelPolicy,
        emit: Emit,
        runtime_dir: Path,
        default_kernel: str,
        private_dirs: Sequence[Path],
        startup_timeout: float,
        attach_timeout: float,
        launcher: KernelLauncher | None,
        providers: KernelProviders | None,
    ) -> None:
        """`emit` is the service's (quiet once the journal closed); `private_dirs`:
        hdspd's own directories, which no kernel a client starts may work in (see
        :mod:`.workdir`)."""
        self._kernels = kernels
        self._bindings = bindings
        self._fates = fates
        self._policy = policy
        self._emit = emit
        self.runtime_dir = runtime_dir
        self.default_kernel = default_kernel
        self.private_dirs = [Path(os.path.realpath(d)) for d in private_dirs]
        self.startup_timeout = startup_timeout
        self.attach_timeout = attach_timeout
        self.launcher = launcher
        self.providers = providers
        #: The REST clients of remote kernels, by kernel id (closed with the kernel).
        self._apis: dict[str, ServerApi] = {}
        self._tg: TaskGroup | None = None
        #: No kernel starts any more (the daemon is stopping).
        self.closing = False
        #: Makes a Kernel with what every kernel shares.
        self._kernel = functools.partial(
            Kernel, policy=policy, emit=emit, on_restarted=fates.restarted
        )

    # ---- lifetime -----------------------------------------------------------------

    @contextlib.contextmanager
    def serving(self, tg: TaskGroup) -> Iterator[None]:
        """Kernels start in `tg` (the service's) until the block ends."""
        self._tg = tg
        try:
            yield
        finally:
            self.closing = True
            self._tg = None

    async def aclose(self) -> None:
        """Start no kernel any more; shut down (or detach from) every one."""
        self.closing = True
        async with anyio.create_task_group() as tg:
            for k in list(self._kernels.values()):
                tg.start_soon(self.stop, k)

    async def stop(self, k: Kernel) -> None:
        k.stop_requested.set()
        await k.stopped.wait()

    async def announce(self, k: Kernel) -> None:
        """From now on commands reach `k` and its status changes are published."""
        k.announced = True
        await self._emit(KernelStarted(payload=(self._kernels.info(k),)))

    def _require_open(self) -> TaskGroup:
        if self._tg is None or self.closing:
            raise KernelStartFailed("The kernel service is not running (is the daemon stopping?).")
        return self._tg

    # ---- where a kernel runs ------------------------------------------------------

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
        return await self.start_local(kernel_name, cwd, for_task)

    def check_provider(self, provider: str | None, profile: str | None) -> None:
        """Raise KernelStartFailed (saying what to set) when kernels cannot run
        where `provider` and `profile` say."""
        if self.providers is not None:
            self.providers.choose(provider, profile)
        elif provider == "gateway":
            raise KernelStartFailed("This daemon runs no kernels on a Jupyter server.")

    async def gateway(self, profile: str | None) -> GatewayTarget:
        """The Jupyter server of the settings (or of `profile`)."""
        providers = self.providers
        server = providers.choose("gateway", profile) if providers is not None else None
        if providers is None or server is None:
            raise KernelStartFailed("This daemon runs no kernels on a Jupyter server.")
        return await providers.target(server)

    # ---- starting -----------------------------------------------------------------

    async def start_local(
        self, kernel_name: str | None, cwd: str | None, for_task: str | None, *, spare: bool = False
    ) -> KernelInfo:
        tg = self._require_open()
        name = kernel_name or self.default_kernel
        workdir = await kernel_workdir(cwd, self.private_dirs, for_task=for_task is not None)
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
        k = self._zmq_kernel(
            kernel_id,
            name,
            process.connection_file,
            process.client,
            process=process,
            cwd=workdir,
            started_for=for_task,
        )
        info = await self._open(
            tg, k, process.start, self.startup_timeout, for_task=for_task, announce=not spare
        )
        log.info("kernel started", kernel_id=k.id, kernel_name=name, cwd=workdir, spare=spare)
        return info

    async def start_spare(self, name: str, workdir: str) -> str:
        """A hidden kernel for the pool (:mod:`.pool`), warmed up; its id."""
        kernel_id = (await self.start_local(name, workdir, None, spare=True)).kernel_id
        # A kernel's first execution costs more than the next (IPython sets up its
        # formatters and input transformers lazily): paid now, silently (no
        # history, no count, no name bound; an error in another language is moot).
        try:
            await self._kernels[kernel_id].execute_silently(_WARM_UP, time_limit=10.0)
        except KernelError:
            pass
        return kernel_id

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

        k = self._kernel(
            kernel_id=kernel_id,
            name=kernel_name or target.kernel_name or "(server default)",
            connection_file=None,
            connect=connect,
            process=process,
            started_for=for_task,
            on_replaced=self._fates.remote_restarted,
            on_gone=self._fates.remote_gone,
            server_url=target.shown,
            remote_id="(starting)",
        )
        self._apis[kernel_id] = api

        async def launch() -> None:
            await process.start()
            assert process.remote_id is not None
            k.name = process.kernel_name or k.name
            k.remote_id = made[0].remote_id = process.remote_id

        info = await self._open(tg, k, launch, self.startup_timeout, for_task=for_task)
        log.info(
            "kernel started on a Jupyter server",
            kernel_id=k.id,
            kernel_name=k.name,
            server=target.shown,
            remote_id=k.remote_id,
        )
        return info

    # ---- attaching ----------------------------------------------------------------

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
        target = await self.gateway(profile)
        return await self.attach_remote_kernel(target, remote_kernel_id)

    async def attach_remote_kernel(self, target: GatewayTarget, remote_id: str) -> KernelInfo:
        """Use a kernel the Jupyter server `target` runs already, by its id there.
        hdsp never restarts or shuts it down (`shutdown_kernel` detaches)."""
        tg = self._require_open()
        check_remote_id(remote_id)
        other = self._kernels.find(
            lambda k: k.remote_id == remote_id and k.server_url == target.shown
        )
        if other is not None:
            return self._kernels.info(other)
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

        k = self._kernel(
            kernel_id=kernel_id,
            name=str(model.get("name") or "unknown"),
            connection_file=None,
            connect=connect,
            process=None,
            on_died=self._fates.attached_died,
            on_replaced=self._fates.attached_restarted,
            on_gone=self._fates.attached_died,
            server_url=target.shown,
            remote_id=remote_id,
        )
        info = await self._open(tg, k, _nothing_to_launch, self.attach_timeout)
        log.info("remote kernel attached", kernel_id=k.id, server=target.shown, remote_id=remote_id)
        return info

    async def attach_kernel(self, connection_file: str) -> KernelInfo:
        """Use a running kernel through its connection file. hdsp never shuts it
        down; `shutdown_kernel` and the daemon's stop only detach."""
        tg = self._require_open()
        path = await anyio.Path(connection_file).expanduser()
        if not await path.is_file():
            raise KernelStartFailed(f"There is no connection file at {path}.")
        resolved = str(await path.resolve())
        other = self._kernels.find(lambda k: k.connection_file == resolved)
        if other is not None:
            return self._kernels.info(other)
        kc = load_client(resolved)
        name = str(getattr(kc, "kernel_name", "") or "") or "unknown"
        k = self._zmq_kernel(str(uuid.uuid4()), name, resolved, lambda: kc)
        info = await self._open(tg, k, _nothing_to_launch, self.attach_timeout)
        log.info("kernel attached", kernel_id=k.id, connection_file=resolved)
        return info

    # ---- the shared path ----------------------------------------------------------

    def _zmq_kernel(
        self,
        kernel_id: str,
        name: str,
        connection_file: str,
        make_client: Callable[[], Any],
        *,
        process: KernelProcess | None = None,
        cwd: str | None = None,
        started_for: str | None = None,
    ) -> Kernel:
        """A kernel talked to over ZeroMQ: one hdsp starts (`process`) or attached to."""

        def connect(on_status: StatusCallback) -> KernelConnection:
            return ZmqKernelConnection(make_client, kernel_id=kernel_id, on_status=on_status)

        return self._kernel(
            kernel_id=kernel_id,
            name=name,
            connect=connect,
            connection_file=connection_file,
            process=process,
            cwd=cwd,
            started_for=started_for,
            on_died=None if process is not None else self._fates.attached_died,
            on_replaced=None if process is not None else self._fates.attached_restarted,
        )

    async def _open(
        self,
        tg: TaskGroup,
        k: Kernel,
        launch: Callable[[], Awaitable[None]],
        limit: float,
        *,
        for_task: str | None = None,
        announce: bool = True,
    ) -> KernelInfo:
        """Start `k`'s owner, `k` bound to `for_task` (put back if it fails);
        with `announce` false (a spare) it stays hidden."""
        # Bound before it starts, so that kernelStarted names the task.
        previous = self._bindings.bind(for_task, k.id) if for_task is not None else None
        self._kernels.add(k)
        try:
            await tg.start(self._run_kernel, k, launch, limit, announce)
        except BaseException:
            self._kernels.remove(k.id)
            if for_task is not None:
                self._bindings.restore(for_task, previous)
            await self._close_api(k.id)
            raise
        return self._kernels.info(k)

    async def _run_kernel(
        self,
        k: Kernel,
        launch: Callable[[], Awaitable[None]],
        limit: float,
        announce: bool = True,
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
                    k.last_active = anyio.current_time()
                    if announce:
                        await self.announce(k)
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
            self._kernels.remove(k.id)
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

    async def _close_api(self, kernel_id: str) -> None:
        api = self._apis.pop(kernel_id, None)
        if api is not None:
            with anyio.move_on_after(5, shield=True):
                await api.aclose()


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
