"""What a provider module is given to build a profile's provider.

Each kind of provider is one row of
:data:`hdsp.daemon.config.provider_kinds.PROVIDER_KINDS`, which names its
module here, and that module's ``build(recipe)``. The registry
(:mod:`.registry`) imports the module (on a worker thread: the SDKs are slow to
import) and calls ``build``; it knows no kind by name.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from hdsp.daemon.config.settings import ProviderProfile
from hdsp.daemon.conversation import ModelInfo

from .base import Provider

__all__ = ["ProviderModule", "ProviderRecipe", "Shared"]

T = TypeVar("T")


class Shared(Protocol):
    def __call__(self, key: str, make: Callable[[], AbstractContextManager[T]], /) -> T:
        """The resource `key` the providers share (entered once, from `make`,
        and closed with the registry)."""
        ...


@dataclass(frozen=True, kw_only=True)
class ProviderRecipe:
    #: The profile's name, and the profile.
    name: str
    profile: ProviderProfile
    #: Its API key (None: it names none, or needs none).
    key: str | None
    #: Its model's limits and prices, the settings' overrides applied; None for
    #: a kind without a model table, whose provider knows its own.
    model_info: ModelInfo | None
    #: How to give the profile a key, for the provider's error messages.
    key_hint: str
    shared: Shared
    #: True the first time it is called for (profile, topic): a warning said once.
    first_time: Callable[[str, str], bool]


class ProviderModule(Protocol):
    def build(self, recipe: ProviderRecipe) -> Provider: ...
