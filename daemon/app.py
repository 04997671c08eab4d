"""The daemon: composes the store, the journal, the ZeroMQ server, the providers
and the task manager, each owned by one task group, and shuts them down in order.

Start-up comes in two steps, so that a client is answered as soon as it can be:

1. What a failure must stop the start for, and what answers a Connect: the
   directories and their locks, the settings, the store, the journal and the
   server. Then the discovery file, "hdspd ready" and READY=1.
2. The engine: the sandbox's check that bwrap works, the task manager and its
   tools, the approval policy, the kernel service (launching kernels through the
   sandbox), and the recovery of the turns left open. Their modules are
   imported, and the tools made, on a worker thread: a tenth of a second of CPU
   that the event loop keeps answering through. Then the command table
   (:mod:`.commands`), built with the parts it calls. Commands wait for this
   step; a Connect and a Ping do not. ``run``'s ``task_status`` reports started
   after it, so an owner in-process finds every attribute set.
3. The warm-up, after the first command can be answered: on a worker thread,
   the imports a turn needs and no command waits for (the provider SDKs of the
   profiles; jsonschema, with the check of every tool's schema; the `mcp` SDK
   if the settings name a server), then the freeze of the start-up's objects
   (see `_warm_and_freeze`).
"""

from __future__ import annotations

import gc
import importlib
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import structlog
import zmq
from anyio.abc import TaskGroup, TaskStatus

from hdsp.protocol import (
    PROTOCOL_VERSION,
    DaemonShuttingDown,
    Discovery,
    Event,
    Say,
    SettingsChange,
    SettingsChanged,
    StatusResult,
    StorageChanged,
    StorageState,
    TaskCommand,
    TcpStatus,
    __version__,
    encode,
)

from .atomic_write import write_atomically
from .config import (
    ConfigService,
    Profiles,
    SecretError,
    SecretStore,
    SettingsError,
    SettingsStore,
)
from .config.curve_keys import (
    AUTHORIZED_KEYS,
    AuthorizedKeys,
    CurveError,
    curve_dir_ready,
    load_server_keys,
)
from .config.secrets import ENV_FALLBACKS
from .llm.models import model_table
from .llm.registry import Providers
from .llm.retry import RetryPolicy
from .lock import DirectoryLock, LockHeld
from .logs import registered_secrets
from .memory import malloc_trim
from .paths import Paths, UnsafeRuntimeDir, ensure_private_runtime_dir, make_private_dir
from .sandbox import Sandbox
from .sdnotify import notify_ready, notify_stopping
from .server import HEARTBEAT_IVL_MS, Server, Session
from .server.curve import TcpBindFailed, TcpListener
from .store import STARTUP_CHECK_SECONDS, Journal, StorageUnavailable, Store, StoreError

if TYPE_CHECKING:
    from .approvals import ApprovalPolicy
    from .checkpoints import CheckpointService
    from .commands import Commands
    from .kernels import KernelService
    from .kernels.providers import KernelProviders
    from .mcp import McpHub
    from .tasks import TaskManager
    from .tools import ToolRegistry
    from .tools.notebook_hosts import NotebookHosts

__all__ = ["Daemon", "DaemonError", "Retention"]

log = structlog.get_logger("hdsp.daemon")

#: How long a graceful shutdown may take before the rest is cut off.
SHUTDOWN_GRACE = 20.0


@dataclass(frozen=True)
class Retention:
    """How long the event log keeps events (task histories are never pruned)."""

    max_age_seconds: float = 30 * 24 * 3600
    max_events: int = 1_000_000
    #: Pruning runs at start and then this often.
    interval_seconds: float = 600.0

    def describe(self) -> str:
        """What survives a prune, as a clause for the `cursor_expired` error."""
        return (
            f"the event log keeps the newest {self.max_events:,} events and none older than "
            f"{self.max_age_seconds / 86400:g} days, and is pruned at each start of hdspd and "
            f"every {self.interval_seconds / 60:g} min; task histories are never pruned"
        )


class DaemonError(Exception):
    """The daemon cannot start; the message says why and what to do."""


@dataclass(frozen=True)
class _Engine:
    """The engine's classes and the default tools, loaded by :func:`_load_engine`."""

    approval_policy: type[ApprovalPolicy]
    kernel_service: type[KernelService]
    task_manager: type[TaskManager]
    commands: type[Commands]
    tools: ToolRegistry
    checkpoint_service: type[CheckpointService]
    #: The notebooks open in JupyterLab, which the notebook tools edit there.
    documents: NotebookHosts
    #: MCP servers as tools (issue 23).
    mcp_hub: type[McpHub]
    #: Where kernels run: here, or on a Jupyter server (issue 25).
    kernel_providers: type[KernelProviders]


def _load_engine(sandbox: Sandbox, emit: Callable[[Event], Awaitable[None]]) -> _Engine:
    """Import the engine, make the default tools (their schemas are checked by the
    warm-up) and check that the sandbox works: the bulk of the start-up's CPU time, run on a worker
    thread after READY."""
    from .agents import agent_tools
    from .approvals import ApprovalPolicy
    from .checkpoints import CheckpointService
    from .commands import Commands
    from .kernels import KernelService
    from .kernels.providers import KernelProviders
    from .mcp import McpHub
    from .tasks import TaskManager
    from .tools import default_tools
    from .tools.notebook_hosts import NotebookHosts

    _report_sandbox(sandbox)
    documents = NotebookHosts(emit)
    tools = default_tools(sandbox, documents=documents)
    for tool in agent_tools():
        tools.register(tool)
    return _Engine(
        ApprovalPolicy,
        KernelService,
        TaskManager,
        Commands,
        tools,
        CheckpointService,
        documents,
        McpHub,
        KernelProviders,
    )


def _report_sandbox(sandbox: Sandbox) -> None:
    """Log how commands and kernels are confined: loudly when they are not."""
    status = sandbox.status()
    if status.mode == "off":
        log.warning(
            "NO SANDBOX: sandbox.mode is off, so shell commands and kernels run with all "
            "of your access (files, keys, network); `hdsp config set sandbox.mode "
            "workspace-write` turns it on"
        )
    elif status.problem is not None:
        log.warning("sandbox unavailable: commands and kernels are refused", problem=status.problem)
    else:
        log.info("sandbox ready", mode=status.mode, network=status.network)


#: Modules the engine imports where it first uses them (a turn's, never a
#: command's), so that no command waits for them at start-up: the warm-up
#: imports them.
_LAZY_MODULES = ("yaml", "pathspec")


def _warm(providers: Providers, mcp: McpHub, tools: ToolRegistry) -> None:
    """What no command waits for and a turn needs (blocking: on a worker thread):
    the provider SDKs of the profiles, the `mcp` SDK if the settings name an MCP
    server, jsonschema and the tools' checked schemas, the engine's lazily
    imported modules, and glibc's malloc_trim (found by running ldconfig)."""
    providers.warm()
    mcp.warm()
    tools.warm()
    for name in _LAZY_MODULES:
        importlib.import_module(name)
    malloc_trim()


async def _on_a_daemon_thread(func: Callable[..., object], *args: object) -> None:
    """Run `func` on a daemon thread of its own and wait for it. A shutdown does
    not wait for it: an import cannot be cancelled, and anyio's worker threads
    are joined at exit (a daemon stopped just after it started took 1.5 s more
    to exit, waiting for the provider SDKs it would never use)."""
    finished = anyio.Event()
    token = anyio.lowlevel.current_token()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            func(*args)
        except BaseException as exc:
            failed.append(exc)
        try:
            anyio.from_thread.run_sync(finished.set, token=token)
        except RuntimeError:
            pass  # the loop is gone: hdspd is exiting

    threading.Thread(target=run, name="hdsp warm-up", daemon=True).start()
    await finished.wait()
    if failed:
        raise failed[0]


async def _warm_and_freeze(
    providers: Providers, mcp: McpHub, tools: ToolRegistry, done: anyio.Event
) -> None:
    """Warm up (`_warm`), then move every object alive by then (modules, classes,
    the SDKs' schemas: most of the heap, and all of it for good) out of the
    cyclic garbage collector's sight (`gc.freeze`). Else each full collection
    walks them all: 0.2-0.45 s with the loop stopped, measured on 2 busy cores,
    and a burst of allocations (a subscription flood, a long history loaded) sets
    off one every second or two."""
    await _on_a_daemon_thread(_warm, providers, mcp, tools)
    gc.freeze()
    log.info("provider SDKs loaded; start-up objects frozen", objects=gc.get_freeze_count())
    done.set()


def _known_secrets() -> frozenset[str]:
    """The secret values no child environment may hold: those hdsp loaded, and the
    environment's API keys even before anything read them."""
    from_env = {os.environ.get(var, "") for names in ENV_FALLBACKS.values() for var in names}
    return registered_secrets() | {v for v in from_env if v}


def _tcp_listener(address: str, curve_dir: Path) -> TcpListener:
    """The listener for `address` (the `tcp.listen` setting), or CurveError
    saying why hdspd cannot listen there under CURVE."""
    where = f"tcp.listen is {address!r}"
    if not zmq.has("curve"):
        raise CurveError(
            f"{where}, but this libzmq ({zmq.zmq_version()}) has no CURVE, and hdspd "
            "listens on TCP only under CURVE. Install a pyzmq wheel (it bundles a "
            "libzmq with CURVE), or unset tcp.listen (`hdsp config set tcp.listen null`)."
        )
    try:
        keys = load_server_keys(curve_dir)
    except CurveError as exc:
        raise CurveError(
            f"{where}, and hdspd listens on TCP only under CURVE: {exc} (Or unset "
            "tcp.listen: `hdsp config set tcp.listen null`.)"
        ) from None
    authorized = AuthorizedKeys(curve_dir / AUTHORIZED_KEYS)
    try:
        authorized.load()
    except CurveError as exc:
        raise CurveError(f"{where}: {exc}") from None
    return TcpListener(
        address=address, public_key=keys.public, secret_key=keys.secret, authorized=authorized
    )


def _ignore_late_signals() -> None:
    """After the daemon's own signal handling has ended (everything is closed; only
    the interpreter's teardown is left), a SIGTERM/SIGINT changes nothing: the
    process ends with its usual status, never killed by the signal. (Ignored, not
    handled: the interpreter's teardown puts back the default action of every
    signal a Python handler had, and a signal then killed the daemon, but it
    leaves an ignored signal ignored.)"""
    if threading.current_thread() is not threading.main_thread():
        return  # run in-process by a test: the owner handles signals
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


class Daemon:
    def __init__(
        self,
        paths: Paths,
        *,
        max_message_size: int = 64 * 1024 * 1024,
        pub_hwm: int = 100_000,
        retention: Retention | None = None,
        startup_check_seconds: float | None = STARTUP_CHECK_SECONDS,
        heartbeat_ms: int | None = None,
    ) -> None:
        self.pub_hwm = pub_hwm
        self.heartbeat_ms = heartbeat_ms or HEARTBEAT_IVL_MS
        self.startup_check_seconds = startup_check_seconds
        self.paths = paths
        self.max_message_size = max_message_size
        self.retention = retention or Retention()
        self.started_monotonic = time.monotonic()
        self._shutdown = anyio.Event()
        self._shutdown_reason = ""
        self._engine_started = anyio.Event()
        #: Set once the warm-up has ended and the start-up's objects are frozen
        #: (see `_warm_and_freeze`): what an owner in-process waits for before
        #: it measures the daemon.
        self.warmed = anyio.Event()
        #: The graceful stop's scope, and whether a second signal asked to hurry.
        self._grace: anyio.CancelScope | None = None
        self._hurried = False
        #: The task count the last status read (see `status`).
        self._tasks_total = 0
        # Set in run(); every attribute below has exactly one owner there.
        self.store: Store
        self.journal: Journal
        self.server: Server
        self.tasks: TaskManager
        self.kernels: KernelService
        self.config: ConfigService
        self.sandbox: Sandbox
        self.mcp: McpHub
        self._tools: ToolRegistry
        self._commands: Commands

    def request_shutdown(self, reason: str) -> None:
        if not self._shutdown.is_set():
            self._shutdown_reason = reason
            self._shutdown.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until shut down. SIGTERM and SIGINT are handled from the first line
        to the last (see `_watch_signals`): the daemon always ends through its own
        code, with its usual exit status, however many signals come."""
        failure: Exception | None = None
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_signals, signals)
                try:
                    await self._run(task_status)
                except Exception as exc:  # raised as itself, not in a group
                    failure = exc
                finally:
                    tg.cancel_scope.cancel()
        _ignore_late_signals()
        if failure is not None:
            raise failure

    async def _run(self, task_status: TaskStatus[None]) -> None:
        paths = self.paths
        try:
            paths.check()
        except ValueError as exc:
            raise DaemonError(str(exc)) from None
        try:
            ensure_private_runtime_dir(paths.runtime_dir)
        except UnsafeRuntimeDir as exc:
            raise DaemonError(str(exc)) from None
        try:
            loosened = make_private_dir(paths.data_dir)
        except (OSError, ValueError) as exc:
            raise DaemonError(f"The data dir cannot be used: {exc}") from None
        if loosened is not None:
            log.warning(
                "data dir made private (0700)", path=str(paths.data_dir), was=f"{loosened:04o}"
            )
        with ExitStack() as locks:
            for lock_path, what in ((paths.runtime_lock, "runtime"), (paths.data_lock, "data")):
                try:
                    locks.enter_context(DirectoryLock(lock_path))
                except LockHeld as exc:
                    raise DaemonError(
                        f"Another hdspd (pid {exc.holder_pid or '?'}) is already running with "
                        f"this {what} dir ({lock_path.parent}). Use it (`hdsp daemon status`), "
                        "stop it (`hdsp daemon stop`), or start this one with other "
                        "--runtime-dir/--data-dir."
                    ) from None
            try:
                await self._run_locked(task_status)
            finally:
                paths.discovery_file.unlink(missing_ok=True)

    async def _run_locked(self, task_status: TaskStatus[None]) -> None:
        paths = self.paths
        self.config = await self._open_config()
        tcp = self._tcp_listener()
        providers = Providers(self.config.profiles, self.config.secrets)
        location, password = await self._store_location()
        async with (
            Store.open(
                location, check_seconds=self.startup_check_seconds, password=password
            ) as store,
            providers,
        ):
            self.store = store
            await self._prune_once()
            self.server = Server(
                control_endpoint=paths.control_endpoint,
                events_endpoint=paths.events_endpoint,
                handle=self._handle,
                head_seq=lambda: self.journal.head_seq,
                max_message_size=self.max_message_size,
                pub_hwm=self.pub_hwm,
                tcp=tcp,
                heartbeat_ms=self.heartbeat_ms,
            )
            self.journal = Journal(
                store, self.server.publish, publish_batch=self.server.publish_batch
            )
            self.config.subscribe(providers.on_change)
            self.config.subscribe(self._apply_settings)
            self.config.subscribe(self._announce_settings)
            async with anyio.create_task_group() as tg:
                await tg.start(self.journal.run)
                try:
                    await tg.start(self.server.run)
                except TcpBindFailed as exc:  # the TCP port is taken, say
                    raise DaemonError(str(exc)) from None
                report = self.config.startup_report()
                if report is not None:  # the settings file was corrupt: say so, durably
                    await self._announce_settings(report)
                tg.start_soon(self._watch_storage)
                tg.start_soon(self._prune_events)
                self._write_discovery()
                log.info(
                    "hdspd ready",
                    control=paths.control_endpoint,
                    events=paths.events_endpoint,
                    data_dir=str(paths.data_dir),
                    store=store.db.where,
                    pid=os.getpid(),
                )
                notify_ready()
                await self._start_engine(tg, providers)
                task_status.started()
                tg.start_soon(_warm_and_freeze, providers, self.mcp, self._tools, self.warmed)
                await self._shutdown.wait()
                notify_stopping()
                log.info("hdspd shutting down", reason=self._shutdown_reason)
                with anyio.move_on_after(SHUTDOWN_GRACE, shield=True) as scope:
                    self._grace = scope
                    if self._hurried:
                        scope.cancel()
                    await self._stop_gracefully()
                if self._hurried:
                    log.warning("graceful shutdown cut short by a second signal")
                if scope.cancelled_caught:
                    log.warning("graceful shutdown timed out", seconds=SHUTDOWN_GRACE)
                tg.cancel_scope.cancel()

    async def _start_engine(self, tg: TaskGroup, providers: Providers) -> None:
        """Step 2 of the start-up (see the module docstring); commands wait for it."""
        store = self.config.store
        self.sandbox = Sandbox(
            lambda: store.settings.sandbox, paths=self.paths, secret_values=_known_secrets
        )
        engine = await anyio.to_thread.run_sync(_load_engine, self.sandbox, self.journal.emit)
        settings = self.config.store.settings
        self.kernels = engine.kernel_service(
            self.journal.emit,
            runtime_dir=self.paths.runtime_dir / "k",
            private_dirs=(self.paths.data_dir, self.paths.runtime_dir),
            default_time_limit=settings.kernels.default_timeout_seconds,
            interrupt_grace=settings.kernels.interrupt_grace_seconds,
            cull_idle_after=settings.kernels.cull_idle_seconds,
            launcher=self.sandbox,
            pool_size=lambda: store.settings.kernels.pool_size,
            launch_profile=lambda: store.settings.sandbox.model_dump_json(),
            # Kernels and tasks know each other: the task manager, built just
            # below and before either runs, answers these two.
            task_busy=lambda task_id: self.tasks.is_busy(task_id),
            on_culled=lambda task_id, note: self.tasks.note_kernel(
                task_id, Say.KERNEL_CULLED, note
            ),
            on_notebook_kernel=lambda task_id, note: self.tasks.note_kernel(
                task_id, Say.NOTEBOOK_KERNEL, note
            ),
            providers=engine.kernel_providers(
                lambda: store.settings,
                self.config.secrets.get,
                profiles=self.config.profiles,
                task_choice=lambda task_id: self.tasks.kernel_choice(task_id),
            ),
        )
        checkpoints = engine.checkpoint_service(
            self.store,
            self.journal,
            self.paths.data_dir / "checkpoints",
            lambda: store.settings.checkpoints,
            clock=lambda: int(time.time() * 1000),
            kernels=self.kernels,
            private=(self.paths.data_dir, self.paths.runtime_dir),
            documents=engine.documents,
        )
        self.mcp = engine.mcp_hub(
            lambda: store.settings.mcp,
            secrets=self.config.secrets.get,
            emit=self.journal.emit,
            trust_file=self.paths.data_dir / "mcp-trust.json",
        )
        self.tasks = engine.task_manager(
            self.store,
            self.journal,
            providers,
            tools=engine.tools,
            approvals=engine.approval_policy(settings.approvals),
            retry_policy=RetryPolicy.from_settings(settings.retry),
            kernels=self.kernels,
            checkpoints=checkpoints,
            private_dirs=(self.paths.data_dir, self.paths.runtime_dir),
            mcp_offers=self.mcp,
        )
        self.tasks.apply_mode_settings(settings.custom_modes, settings.custom_instructions)
        self.tasks.apply_agent_settings(settings.agents, settings.agent_limits)
        self.tasks.deps.call_limits.apply(settings.tool_calls)
        engine.tools.add_source(self.mcp)
        self._tools = engine.tools
        await tg.start(self.mcp.run)
        await tg.start(self.kernels.run)
        await tg.start(self.tasks.run)
        self._commands = engine.commands(
            tasks=self.tasks,
            config=self.config,
            kernels=self.kernels,
            store=self.store,
            journal=self.journal,
            status=self.status,
            shutdown=self.request_shutdown,
            max_message_size=self.max_message_size,
            documents=engine.documents,
            mcp=self.mcp,
            retention=self.retention.describe(),
        )
        self._engine_started.set()

    async def _handle(self, cmd: TaskCommand, session: Session) -> Any:
        """Run a command once the engine has started."""
        if not self._engine_started.is_set():  # a set Event's wait() still yields
            await self._engine_started.wait()
        return await self._commands(
            cmd.data,
            client_id=session.client_id,
            client_name=session.name,
            client_user=session.user,
        )

    async def status(self) -> StatusResult:
        """GetStatus: what the daemon is, and how it is doing."""
        try:
            try:  # one index lookup: not worth a worker thread unless one has the reader
                total = self.store.read_now(self.store.db.task_count)
            except anyio.WouldBlock:
                total = await self.store.read(self.store.db.task_count)
            self._tasks_total = total
        except StorageUnavailable:
            # The database cannot be read now (a lost server): the status still
            # answers, with the last count and the storage's state, which says why.
            total = self._tasks_total
        stats = self.tasks.statistics()
        return StatusResult(
            server_version=__version__,
            protocol_version=PROTOCOL_VERSION,
            pid=os.getpid(),
            uptime_seconds=time.monotonic() - self.started_monotonic,
            head_seq=self.journal.head_seq,
            clients=self.server.live_clients(),
            tasks_total=total,
            tasks_running=stats["running"],
            data_dir=str(self.paths.data_dir),
            runtime_dir=str(self.paths.runtime_dir),
            sandbox=self.sandbox.status(),
            plaintext_keyring=await self.config.plaintext_keyring(),
            storage=self.store.monitor.health(),
            tcp=self._tcp_status(),
        )

    def _tcp_status(self) -> TcpStatus | None:
        tcp = self.server.tcp
        if tcp is None:
            return None
        return TcpStatus(
            control=tcp.control,
            events=tcp.events,
            server_public_key=tcp.public_key.decode(),
            authorized_clients=tcp.authorized.count(),
        )

    async def _watch_storage(self) -> None:
        """Tell every client when the storage stops or starts taking writes; stop
        the running tasks when it turns read-only (nothing they do would last)."""
        monitor = self.store.monitor
        seen = 0
        while True:
            seen = await monitor.wait_changed(seen)
            health = monitor.health()
            event = StorageChanged(payload=(health,))
            if health.state is StorageState.OK:
                log.info("storage takes writes again")
                await self.journal.emit(event)
                continue
            log.error(
                "storage cannot write: refusing new work",
                state=str(health.state),
                reason=health.reason,
                advice=health.advice,
            )
            await self.journal.announce(event)
            if health.state is StorageState.READ_ONLY and self._engine_started.is_set():
                await self.tasks.shutdown()

    async def _store_location(self) -> tuple[Path | str, str | None]:
        """Where the store is (``store.url``, else the SQLite file in the data dir),
        and the password from the keyring when ``store.secret`` names one."""
        settings = self.config.store.settings.store
        if settings.url is None:
            return self.paths.database, None
        if settings.secret is None:
            return settings.url, None
        try:
            password = await self.config.secrets.get(settings.secret)
        except SecretError as exc:
            raise DaemonError(
                f"store.secret names the secret {settings.secret!r}, which cannot be read: {exc}"
            ) from None
        if password is None:
            raise DaemonError(
                f"store.secret names the secret {settings.secret!r}, which the keyring does "
                "not hold. Store it with `keyring set hdsp "
                f"{settings.secret}` (hdspd cannot start without its database to take it "
                "with `hdsp secret set`), or unset store.secret to let libpq find the "
                "password (~/.pgpass, PGPASSFILE, a service file)."
            )
        return settings.url, password

    async def _open_config(self) -> ConfigService:
        """Load the settings (a corrupt file is moved aside and reported, see
        :mod:`.config.settings`) and put the profiles and secrets behind them."""
        store = SettingsStore(self.paths.settings_file)
        try:
            await store.load()
        except SettingsError as exc:
            raise DaemonError(str(exc)) from None
        return ConfigService(store, SecretStore(), Profiles(store), model_table=model_table)

    async def _apply_settings(self, change: SettingsChange) -> None:
        """Settings the engine reads live: approvals, the retry policy, custom
        modes and instructions."""
        settings = self.config.store.settings
        self.tasks.approvals.settings = settings.approvals
        self.tasks.retry_policy = RetryPolicy.from_settings(settings.retry)
        self.tasks.apply_mode_settings(settings.custom_modes, settings.custom_instructions)
        self.tasks.apply_agent_settings(settings.agents, settings.agent_limits)
        self.tasks.deps.call_limits.apply(settings.tool_calls)
        if any(key == "mcp" or key.startswith("mcp.") for key in change.keys):
            self.mcp.apply_settings()
        if any(key == "sandbox" or key.startswith("sandbox.") for key in change.keys):
            await anyio.to_thread.run_sync(_report_sandbox, self.sandbox)
        if any(key == "store" or key.startswith("store.") for key in change.keys):
            log.info(
                "the store settings changed: they take effect when hdspd starts again",
                store=self.store.db.where,
            )

    async def _announce_settings(self, change: SettingsChange) -> None:
        await self.journal.emit(SettingsChanged(payload=(change,)))

    async def _stop_gracefully(self) -> None:
        self.server.stop_accepting()
        self.paths.discovery_file.unlink(missing_ok=True)
        await self.tasks.shutdown()
        await self.mcp.aclose()
        await self.kernels.aclose()
        await self.journal.emit(DaemonShuttingDown(payload=(self._shutdown_reason,)))
        await self.journal.aclose()

    async def _prune_once(self) -> None:
        r = self.retention
        before = int((time.time() - r.max_age_seconds) * 1000)
        if not self.store.monitor.writable:
            return
        failures: tuple[type[Exception], ...] = (*self.store.errors, StoreError)
        try:
            deleted = await self.store.prune_events(before, r.max_events)
        except failures as exc:
            # Retention can wait: a full disk must not stop the start, nor the daemon.
            log.warning("pruning old events failed; will try again later", error=str(exc))
            return
        if deleted:
            log.info("pruned old events", deleted=deleted)

    async def _prune_events(self) -> None:
        while True:
            await anyio.sleep(self.retention.interval_seconds)
            await self._prune_once()

    async def _watch_signals(self, signals: AsyncIterator[int]) -> None:
        """The first SIGTERM/SIGINT shuts down gracefully; a later one hurries the
        shutdown (cuts its grace short: tasks still running are left for the
        recovery at the next start), and the daemon exits as usual, status 0."""
        async for signum in signals:
            name = signal.Signals(signum).name
            if not self._shutdown.is_set():
                self.request_shutdown(name)
                continue
            log.warning("second signal: hurrying the shutdown", signal=name)
            self._hurried = True
            if self._grace is not None:
                self._grace.cancel()

    def _tcp_listener(self) -> TcpListener | None:
        """What the server needs to listen on TCP (the `tcp.listen` setting),
        only ever under CURVE: DaemonError, naming the setting, when the keys
        are missing or open to others (nothing is bound then)."""
        address = self.config.store.settings.tcp.listen
        if address is None:
            return None
        curve_dir = self.paths.curve_dir
        try:
            curve_dir_ready(curve_dir)
            return _tcp_listener(address, curve_dir)
        except CurveError as exc:
            raise DaemonError(str(exc)) from None
        except OSError as exc:
            raise DaemonError(f"tcp.listen is {address!r}, but {curve_dir}: {exc}") from None

    def _write_discovery(self) -> None:
        tcp = self.server.tcp
        info = Discovery(
            protocol_version=PROTOCOL_VERSION,
            server_version=__version__,
            pid=os.getpid(),
            control=self.paths.control_endpoint,
            events=self.paths.events_endpoint,
            started_at=int(time.time() * 1000),
            server_public_key=None if tcp is None else tcp.public_key.decode(),
        )
        write_atomically(self.paths.discovery_file, encode(info))
