"""Providers by profile name: made on first use, reused, rebuilt when their
profile or secret changes, closed at shutdown.

Which provider a profile gets: its kind's row in
:data:`~hdsp.daemon.config.provider_kinds.PROVIDER_KINDS` names the module whose
``build`` makes it (:mod:`.recipe`); the registry knows no kind by name. The
SDKs take a third of a second to import (seconds on a busy machine), so a provider
module is imported when its first provider is made, or by :meth:`Providers.warm`
once the daemon is ready; either way on a worker thread, never on the event loop.
Python lets one thread at a time import a module, and the others that want it
wait for the whole import: a first request made while the warm-up imports its
SDK used to stop the event loop (every client, every Ping) until the warm-up was
done.

The API key is read when a provider's first request is made, not when the
provider is handed out: reading the keyring blocks (D-Bus, an unlock dialog), so
it happens on a worker thread from the request's async code, and a key that
cannot be read fails that request with a message that says how to set it. The
engine asks for its provider before every request, so a rebuilt provider is
picked up by the next request; one still streaming keeps its old client until
the reply ends, and is closed then.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.to_thread
import msgspec
import structlog

from hdsp.daemon.config.profiles import ProfileNotFound, Profiles, secret_name
from hdsp.daemon.config.provider_kinds import PROVIDER_KINDS
from hdsp.daemon.config.secrets import SecretError, SecretStore
from hdsp.daemon.config.settings import ModelInfoOverride, ProfileOptions, ProviderProfile
from hdsp.daemon.conversation import Chunk, ModelInfo, ModelRequest

from .base import Provider
from .errors import AuthenticationFailed
from .models import lookup_model
from .recipe import ProviderRecipe

if TYPE_CHECKING:
    from hdsp.protocol import SettingsChange

    from .recipe import ProviderModule

__all__ = ["Providers"]

log = structlog.get_logger("hdsp.llm")

T = TypeVar("T")


#: How long closing a retired provider's HTTP client may take.
_CLOSE_TIMEOUT = 5.0


def _key_hint(name: str, profile: ProviderProfile, secrets: SecretStore | None) -> str:
    """How to give profile `name` a key, for the providers' error messages."""
    secret = secret_name(profile)
    if secret is None:
        return (
            f"store one with `hdsp secret set NAME` and name it in the profile "
            f"(`hdsp profile add {name} --provider {profile.provider} --model "
            f"{profile.model} --secret NAME`)"
        )
    env = " or ".join(SecretStore.env_vars(secret))
    also = f" (or set {env} in hdspd's environment)" if env else ""
    return f"run `hdsp secret set {secret}`{also}, then retry"


def _load_module(kind: str) -> object:
    """Import the module of providers of `kind`, as its row names it (blocking:
    call on a worker thread)."""
    return importlib.import_module(f"{__package__}.{PROVIDER_KINDS[kind].module}")


class _ProfileProvider:
    """A profile's provider, built on its first request (see the module docstring).

    Retired (:meth:`aclose`) when the profile or its secret changes: closed at
    once when idle, else when its last reply ends.
    """

    def __init__(
        self,
        name: str,
        profile: ProviderProfile,
        info: ModelInfo | None,
        build: Callable[[str | None], Provider],
        read_key: Callable[[], Any],
        load: Callable[[], object],
    ) -> None:
        self.name = name
        self.profile = profile
        self._info = info
        self._build = build
        self._read_key = read_key
        self._load = load
        self._inner: Provider | None = None
        self._lock = anyio.Lock()
        self._active = 0
        self._retired = False

    @property
    def model(self) -> str:
        return self._inner.model if self._inner is not None else self.profile.model

    def info(self) -> ModelInfo:
        if self._inner is not None:
            return self._inner.info()
        return self._info if self._info is not None else ModelInfo(known=False)

    async def _ensure(self) -> Provider:
        async with self._lock:
            if self._inner is None:
                key: str | None = await self._read_key()
                # Blocks for the import (and waits for another thread's): off
                # the loop, so that `_build` finds the module loaded. A cancelled
                # task does not wait for it: the import goes on, harmless.
                await anyio.to_thread.run_sync(self._load, abandon_on_cancel=True)
                self._inner = self._build(key)
            return self._inner

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncGenerator[AsyncIterator[Chunk]]:
        self._active += 1
        try:
            inner = await self._ensure()
            async with inner.stream(request) as chunks:
                yield chunks
        finally:
            self._active -= 1
            if self._retired and self._active == 0:
                with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                    await self._close()

    async def count_tokens(self, request: ModelRequest) -> int | None:
        self._active += 1
        try:
            inner = await self._ensure()
            return await inner.count_tokens(request)
        finally:
            self._active -= 1
            if self._retired and self._active == 0:
                with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                    await self._close()

    async def _close(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            await inner.aclose()

    async def aclose(self) -> None:
        """Retire: close now when idle, else when the last reply ends."""
        self._retired = True
        if self._active == 0:
            await self._close()


@dataclass(frozen=True, slots=True)
class _Built:
    provider: _ProfileProvider
    #: What it was built from; a change to either rebuilds it.
    profile: ProviderProfile
    models: Mapping[str, ModelInfoOverride]


class Providers:
    """Providers by profile name (see the module docstring).

    `profiles` are the profiles in effect (settings, environment, built-in);
    `secrets` reads their keys (None: no keys, for tests of keyless servers).
    """

    def __init__(self, profiles: Profiles, secrets: SecretStore | None = None) -> None:
        self.profiles = profiles
        self.secrets = secrets
        self._cache: dict[str, _Built] = {}
        self._exit = ExitStack()
        #: What the providers share (the demo server), by key (see :class:`~.recipe.Shared`).
        self._resources: dict[str, object] = {}
        self._warned: set[tuple[str, str]] = set()

    def resolve_name(self, name: str | None) -> str:
        """The profile `name`, or the current one. Raises ProfileNotFound."""
        return self.profiles.resolve_name(name)

    def get(self, name: str | None) -> Provider:
        """The provider of profile `name` (or of the current profile). Raises
        ProfileNotFound. Cheap: the key is read and the SDK client made on the
        provider's first request."""
        chosen = self.resolve_name(name)
        built = self._cache.get(chosen)
        if built is None:
            profile = self.profiles.all()[chosen]
            models = dict(self.profiles.settings.models)
            provider = _ProfileProvider(
                chosen,
                profile,
                self._model_info(profile, models),
                lambda key: self._create(chosen, profile, models, key),
                lambda: self._read_key(chosen, profile),
                lambda: _load_module(profile.provider),
            )
            built = self._cache[chosen] = _Built(provider, profile, models)
        return built.provider

    def options(self, name: str | None) -> ProfileOptions:
        """The options of profile `name` (or of the current one); defaults for a
        profile that is gone. Raises nothing."""
        try:
            return self.profiles.all()[self.resolve_name(name)].options
        except (ProfileNotFound, KeyError):
            return ProfileOptions()

    # ---- building --------------------------------------------------------------------

    def _model_info(
        self, profile: ProviderProfile, models: Mapping[str, ModelInfoOverride]
    ) -> ModelInfo | None:
        if profile.provider == "demo":
            return None  # the demo provider knows its own
        kind = profile.provider
        extra = {model_id: o.apply(lookup_model(kind, model_id)) for model_id, o in models.items()}
        info = lookup_model(kind, profile.model, extra)
        if not info.known and (kind, profile.model) not in self._warned:
            self._warned.add((kind, profile.model))
            log.warning(
                "unknown model: default limits apply and costs show as zero; describe it "
                "in the settings' `models` section (`hdsp config set models.MODEL ...`)",
                provider=kind,
                model=profile.model,
                context_window=info.context_window,
            )
        max_tokens = profile.options.max_tokens
        if max_tokens is not None:
            info = msgspec.structs.replace(info, max_output=max_tokens)
        images = profile.options.supports_images
        if images is not None:
            info = msgspec.structs.replace(info, supports_images=images)
        return info

    async def _read_key(self, name: str, profile: ProviderProfile) -> str | None:
        secret = secret_name(profile)
        if secret is None or self.secrets is None:
            return None
        try:
            return await self.secrets.get(secret)
        except SecretError as exc:
            raise AuthenticationFailed(
                f"The API key of profile {name!r} could not be read: {exc}"
            ) from exc

    def _create(
        self,
        name: str,
        profile: ProviderProfile,
        models: Mapping[str, ModelInfoOverride],
        key: str | None,
    ) -> Provider:
        module = cast("ProviderModule", _load_module(profile.provider))
        recipe = ProviderRecipe(
            name=name,
            profile=profile,
            key=key,
            model_info=self._model_info(profile, models),
            key_hint=_key_hint(name, profile, self.secrets),
            shared=self._shared,
            first_time=self._first_time,
        )
        return module.build(recipe)

    def _shared(self, key: str, make: Callable[[], AbstractContextManager[T]]) -> T:
        found = self._resources.get(key)
        if found is None:
            found = self._resources[key] = self._exit.enter_context(make())
        return cast(T, found)

    def _first_time(self, name: str, topic: str) -> bool:
        if (name, topic) in self._warned:
            return False
        self._warned.add((name, topic))
        return True

    # ---- changes ---------------------------------------------------------------------

    async def on_change(self, change: SettingsChange) -> None:
        """Rebuild the providers that `change` concerns: a profile that changed or
        went, a secret of theirs that was set or removed, a change of the model table."""
        secrets_changed = change.reason in ("secretSet", "secretDeleted")
        profiles = self.profiles.all()
        models = self.profiles.settings.models
        stale = [
            name
            for name, built in self._cache.items()
            if profiles.get(name) != built.profile
            or dict(models) != dict(built.models)
            or (secrets_changed and secret_name(built.profile) in change.keys)
        ]
        for name in stale:
            built = self._cache.pop(name)
            log.info("provider rebuilt on next use", profile=name, reason=change.reason)
            await built.provider.aclose()

    def warm(self) -> None:
        """Import the SDKs of the providers the profiles use and choose the keyring
        backend (blocking): run on a worker thread once the daemon is ready, so that
        neither start-up nor the first task waits for them. An SDK no profile uses
        is not imported (the anthropic SDK alone costs about a second of CPU and
        tens of MB); a profile added later imports its SDK on its first request,
        on a worker thread as always."""
        for kind in sorted({p.provider for p in self.profiles.all().values()}):
            _load_module(kind)
        if self.secrets is not None:
            self.secrets.warm()

    async def aclose(self) -> None:
        cached, self._cache = list(self._cache.values()), {}
        try:
            for built in cached:
                await built.provider.aclose()
        finally:
            self._exit.close()

    async def __aenter__(self) -> Providers:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
