"""The jupyter_server extension: settings, handlers, and the task that owns the
link to hdspd from the server's start to its stop."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import anyio
from jupyter_server.extension.application import ExtensionApp
from jupyter_server.serverapp import ServerApp
from traitlets import Bool, Unicode

from .handlers import handlers
from .link import DaemonLink
from .shared_notebooks import SharedNotebooks

__all__ = ["HdspExtension"]


class HdspExtension(ExtensionApp):
    """hdsp's JupyterLab plugin, server half: a relay to the user's hdspd."""

    name = "hdsp"
    load_other_extensions = True

    start_daemon = Bool(
        False,
        config=True,
        help="Start hdspd (in the background, outliving this server) when it is not running.",
    )
    live_edits = Bool(
        True,
        config=True,
        help=(
            "Apply the agent's notebook edits to the notebooks open in JupyterLab (through "
            "jupyter-collaboration's shared documents when it is installed) instead of their files."
        ),
    )
    hdsp_runtime_dir = Unicode(
        None,
        allow_none=True,
        config=True,
        help="hdspd's runtime dir (by default HDSP_RUNTIME_DIR or the per-user one).",
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.link: DaemonLink | None = None
        #: The one asyncio task that hosts the link's task group (asyncio has no
        #: task group that outlives a call; this is its root, cancelled on stop).
        self._runner: asyncio.Task[None] | None = None
        #: The document host of the notebooks open here, when real-time
        #: collaboration is on (see shared_notebooks).
        self.shared_notebooks: SharedNotebooks | None = None

    def initialize_settings(self) -> None:
        self.link = DaemonLink(self.hdsp_runtime_dir, start_daemon=self.start_daemon, log=self.log)
        # A panel's declarations of the notebooks its window holds (panel_hosts)
        # are forwarded only while live edits are on.
        self.settings["hdsp_live_edits"] = self.live_edits

    def initialize_handlers(self) -> None:
        assert self.link is not None
        self.handlers.extend(handlers(self.link))

    async def _start_jupyter_server_extension(self, serverapp: ServerApp) -> None:
        link = self.link
        assert link is not None
        ydoc = self._ydoc_extension(serverapp) if self.live_edits else None
        if ydoc is not None:
            self.shared_notebooks = SharedNotebooks(link, ydoc, serverapp.root_dir, log=self.log)
            self.log.info("hdsp: the agent edits open notebooks through their shared documents")
        self._runner = asyncio.get_running_loop().create_task(self._run(), name="hdsp-link")
        await link.wait_started()

    async def _run(self) -> None:
        """The link, and the document host when there is one, in one task group."""
        assert self.link is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.link.run)
            if self.shared_notebooks is not None:
                tg.start_soon(self.shared_notebooks.run)

    @staticmethod
    def _ydoc_extension(serverapp: ServerApp) -> Any:
        """jupyter-collaboration's server extension, when it runs with RTC on."""
        apps = serverapp.extension_manager.extension_apps.get("jupyter_server_ydoc") or set()
        for app in apps:
            if hasattr(app, "get_document") and not getattr(app, "disable_rtc", False):
                return app
        return None

    async def stop_extension(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
