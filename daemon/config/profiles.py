"""Provider profiles: which API, model, base URL and secret a task talks to.

The profiles a task can name come from three places, in this order of precedence:

- the settings (``profiles`` in ``settings.json``), saved with `SaveProfile` or
  ``hdsp profile add``;
- ``default``, made from the environment when ``HDSP_BASE_URL`` or ``HDSP_MODEL``
  is set (an OpenAI-compatible API; its key is the secret ``default``, which falls
  back to ``HDSP_API_KEY``, then ``OPENAI_API_KEY``). It is how hdsp was pointed
  at a model before profiles existed, and a saved profile of that name wins;
- the built-in ``demo`` (hdsp's simulated model, no key), always there and never
  replaced.

A task that names no profile uses the settings' ``current_profile``, else
``default`` when there is one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final, Literal, Protocol

import structlog

from hdsp.daemon.errors import HdspError
from hdsp.protocol import ErrorCode

from .provider_kinds import PROVIDER_KINDS
from .settings import ProviderProfile, Settings

__all__ = [
    "DEFAULT_PROFILE",
    "DEMO_MODEL",
    "DEMO_PROFILE",
    "ProfileNotFound",
    "ProfileSource",
    "Profiles",
    "SettingsSource",
    "demo_profile",
    "env_default_profile",
    "secret_name",
]

log = structlog.get_logger("hdsp.profiles")

DEMO_PROFILE: Final = "demo"
DEFAULT_PROFILE: Final = "default"
#: The model id of the demo (kept here so that listing profiles does not import the
#: provider SDKs that :mod:`hdsp.daemon.llm.demo` needs).
DEMO_MODEL: Final = "hdsp-demo"

ProfileSource = Literal["settings", "builtin", "environment"]


class ProfileNotFound(HdspError, LookupError):
    """No profile has that name, or none is configured; the message says what to do."""

    code = ErrorCode.INVALID_REQUEST


def demo_profile() -> ProviderProfile:
    return ProviderProfile(name=DEMO_PROFILE, provider="demo", model=DEMO_MODEL)


def env_default_profile(env: Mapping[str, str]) -> ProviderProfile | None:
    """The ``default`` profile from HDSP_BASE_URL/HDSP_MODEL, or None when neither is set."""
    base_url = env.get("HDSP_BASE_URL") or None
    model = env.get("HDSP_MODEL") or None
    if base_url is None and model is None:
        return None
    return ProviderProfile(
        name=DEFAULT_PROFILE,
        provider="openai-compatible",
        model=model or "gpt-4o-mini",
        base_url=base_url,
        secret=DEFAULT_PROFILE,
    )


def secret_name(profile: ProviderProfile) -> str | None:
    """The secret holding `profile`'s key: its own `secret`, else its provider
    kind's conventional one ("anthropic", "openai"), else None."""
    if profile.secret is not None:
        return profile.secret
    return PROVIDER_KINDS[profile.provider].conventional_secret


class SettingsSource(Protocol):
    """Anything that serves the current settings (a :class:`SettingsStore`)."""

    @property
    def settings(self) -> Settings: ...


class Profiles:
    """The profiles in effect: the settings' ones over the environment's `default`
    and the built-in `demo` (see the module docstring). Reads the settings anew on
    every call, so it always agrees with them."""

    def __init__(self, settings: Settings | SettingsSource, env: Mapping[str, str] | None = None):
        self._source = settings
        env = os.environ if env is None else env
        try:
            self._env_default = env_default_profile(env)
        except ValueError as exc:  # pydantic's ValidationError: HDSP_BASE_URL is no URL
            log.warning("ignoring HDSP_BASE_URL/HDSP_MODEL", error=str(exc))
            self._env_default = None
        self._demo = demo_profile()

    @property
    def settings(self) -> Settings:
        source = self._source
        return source if isinstance(source, Settings) else source.settings

    def all(self) -> dict[str, ProviderProfile]:
        """Every profile in effect, by name: built-in and environment ones first."""
        profiles = {DEMO_PROFILE: self._demo}
        if self._env_default is not None:
            profiles[DEFAULT_PROFILE] = self._env_default
        for name, profile in self.settings.profiles.items():
            if name != DEMO_PROFILE:
                profiles[name] = profile
        return profiles

    def source(self, name: str) -> ProfileSource:
        if name == DEMO_PROFILE:
            return "builtin"
        if name in self.settings.profiles:
            return "settings"
        return "environment"

    def current(self) -> str | None:
        """The profile a task that names none uses, or None when there is none."""
        chosen = self.settings.current_profile
        if chosen is not None:
            return chosen
        return DEFAULT_PROFILE if DEFAULT_PROFILE in self.all() else None

    def resolve_name(self, name: str | None) -> str:
        """The profile `name`, or the current one when `name` is None.

        Raises:
            ProfileNotFound: there is no such profile, or none is configured.
        """
        chosen = name or self.current()
        if chosen is None:
            raise ProfileNotFound(
                "No provider profile is configured. Add one and select it "
                "(`hdsp profile add NAME --provider anthropic --model claude-sonnet-4-6 "
                "--secret anthropic`, `hdsp secret set anthropic`, `hdsp profile use NAME`), "
                "or set HDSP_BASE_URL and HDSP_MODEL before starting hdspd, or use "
                "`--profile demo` for a simulated model."
            )
        profiles = self.all()
        if chosen not in profiles:
            known = ", ".join(sorted(profiles))
            why = " (it is the current profile)" if name is None else ""
            raise ProfileNotFound(
                f"No provider profile named {chosen!r}{why}. Known: {known}. "
                "`hdsp profile list` shows them; `hdsp profile add` adds one."
            )
        return chosen

    def get(self, name: str | None) -> ProviderProfile:
        """The profile `name` (or the current one). Raises ProfileNotFound."""
        return self.all()[self.resolve_name(name)]
