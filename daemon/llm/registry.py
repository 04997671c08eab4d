"""Providers by profile name: created on first use, reused, closed at shutdown."""

from __future__ import annotations

import importlib
import os
from contextlib import ExitStack
from types import TracebackType

from hdsp.daemon.config import DEMO_PROFILE, Profile, ProfileNotFound

from .base import Provider

__all__ = ["Providers"]


class Providers:
    def __init__(self, profiles: dict[str, Profile], default: str | None = None) -> None:
        self.profiles = profiles
        self.default = default or ("default" if "default" in profiles else None)
        self._cache: dict[str, Provider] = {}
        self._exit = ExitStack()

    def resolve_name(self, name: str | None) -> str:
        chosen = name or self.default
        if chosen is None:
            raise ProfileNotFound(
                "No provider is configured. Set HDSP_BASE_URL and HDSP_MODEL (and "
                "HDSP_API_KEY) before starting hdspd, or run with `--profile demo` for a "
                "simulated model."
            )
        if chosen not in self.profiles:
            known = ", ".join(sorted(self.profiles))
            raise ProfileNotFound(f"No provider profile named {chosen!r}. Known: {known}.")
        return chosen

    def get(self, name: str | None) -> Provider:
        chosen = self.resolve_name(name)
        provider = self._cache.get(chosen)
        if provider is None:
            provider = self._create(self.profiles[chosen])
            self._cache[chosen] = provider
        return provider

    def _create(self, profile: Profile) -> Provider:
        # The SDKs take a third of a second to import: not at start-up (see warm()).
        from .demo import DemoServer, demo_provider
        from .openai_compat import OpenAICompatibleProvider

        if profile.provider == "demo" or profile.name == DEMO_PROFILE:
            # A small delay per chunk so that the demo shows streaming as it is.
            server = self._exit.enter_context(DemoServer(chunk_delay=0.02))
            return demo_provider(server)
        key = os.environ.get(profile.api_key_env) if profile.api_key_env else None
        return OpenAICompatibleProvider(
            model=profile.model, base_url=profile.base_url, api_key=key, name=profile.name
        )

    @staticmethod
    def warm() -> None:
        """Import the provider SDKs (blocking): run on a worker thread once the daemon
        is ready, so that neither start-up nor the first task waits for them."""
        importlib.import_module("hdsp.daemon.llm.openai_compat")

    async def aclose(self) -> None:
        providers, self._cache = list(self._cache.values()), {}
        try:
            for provider in providers:
                await provider.aclose()
        finally:
            self._exit.close()

    async def __aenter__(self) -> Providers:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
