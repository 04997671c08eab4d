"""Where a kernel runs: on this machine (`local`) or on a Jupyter server
(`gateway`), and which server.

The choice is made, first to last: by the task (its configuration's
`kernelProvider`) or the command (`StartKernel.provider`), by the task's
profile (`profiles.NAME.kernels.provider`), by the settings
(`kernels.provider`). The server is the profile's `kernels.gateway`, else the
settings' `kernels.gateway`. Its token is read, by the secret's name, when a
kernel is started or attached, and kept in memory only (:mod:`.gateway`).

The tasks are above this layer: the task manager hands in `task_choice`, which
says what a task chose and its profile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hdsp.daemon.config.profiles import ProfileNotFound, Profiles
from hdsp.daemon.config.settings import GatewaySettings, ProviderProfile, Settings
from hdsp.daemon.errors import HdspError

from .errors import KernelStartFailed
from .gateway import GatewayTarget, shown_url

__all__ = ["KernelProviders", "ReadSecret", "TaskChoice"]

#: (provider the task chose or None, the task's profile) for a task id.
TaskChoice = Callable[[str], tuple[str | None, str | None]]
#: Reads a secret by name (the SecretStore's `get`).
ReadSecret = Callable[[str], Awaitable[str | None]]


class KernelProviders:
    def __init__(
        self,
        settings: Callable[[], Settings],
        secrets: ReadSecret,
        *,
        profiles: Profiles | None = None,
        task_choice: TaskChoice | None = None,
    ) -> None:
        self._settings = settings
        self._secrets = secrets
        self._profiles = profiles
        self.task_choice = task_choice

    def _profile(self, name: str | None) -> ProviderProfile | None:
        if self._profiles is None:
            return None
        try:
            return self._profiles.get(name)
        except ProfileNotFound:
            if name is not None:
                raise KernelStartFailed(
                    f"No profile named {name!r}; `hdsp profile list` lists them."
                ) from None
            return None  # no current profile: the settings decide

    def choose(self, provider: str | None, profile: str | None) -> GatewaySettings | None:
        """The Jupyter server to use, or None for a local kernel."""
        settings = self._settings()
        chosen = self._profile(profile)
        own = chosen.kernels if chosen is not None else None
        kind = provider or (own.provider if own is not None else None) or settings.kernels.provider
        if kind == "local":
            return None
        server = (own.gateway if own is not None else None) or settings.kernels.gateway
        if server is None:
            raise KernelStartFailed(
                "Kernels are to run on a Jupyter server, but none is configured: `hdsp config "
                'set kernels.gateway \'{"url": "http://HOST:8888/", "token_secret": "NAME"}\'` '
                "(and `hdsp secret set NAME` for its token)."
            )
        return server

    def for_task(self, task_id: str) -> GatewaySettings | None:
        """The Jupyter server of the task's kernels, or None for local ones."""
        provider, profile = self.task_choice(task_id) if self.task_choice else (None, None)
        return self.choose(provider, profile)

    async def target(self, server: GatewaySettings) -> GatewayTarget:
        """`server` with its token read."""
        token = None
        name = server.token_secret
        if name is not None:
            try:
                token = await self._secrets(name)
            except HdspError as exc:
                raise KernelStartFailed(
                    f"The token of the Jupyter server at {shown_url(server.url)} (the secret "
                    f"{name!r}) cannot be read: {exc.message}"
                ) from None
            if not token:
                raise KernelStartFailed(
                    f"The secret {name!r}, the token of the Jupyter server at "
                    f"{shown_url(server.url)}, is not set: `hdsp secret set {name}`."
                )
        return GatewayTarget(
            url=server.url,
            token=token,
            token_secret=name,
            kernel_name=server.kernel_name,
            path=server.path,
            request_timeout=server.request_timeout_seconds,
            poll_interval=server.poll_seconds,
        )
