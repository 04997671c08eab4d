"""Provider profiles: which API, model, base URL and key a task talks to.

This first version knows two profiles: the built-in `demo` (a bundled simulated
model, no key) and `default`, taken from the environment:

    HDSP_BASE_URL   base URL of an OpenAI-compatible API (Ollama, vLLM, OpenAI)
    HDSP_MODEL      model name
    HDSP_API_KEY    key (falls back to OPENAI_API_KEY)
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgspec

__all__ = ["DEMO_PROFILE", "Profile", "ProfileNotFound", "profiles_from_env"]

DEMO_PROFILE = "demo"


class ProfileNotFound(LookupError):
    pass


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    provider: str
    model: str
    base_url: str | None = None
    #: Name of the environment variable holding the key (never the key itself).
    api_key_env: str | None = None


def profiles_from_env(env: Mapping[str, str] | None = None) -> dict[str, Profile]:
    env = os.environ if env is None else env
    profiles = {DEMO_PROFILE: Profile(name=DEMO_PROFILE, provider="demo", model="hdsp-demo")}
    if env.get("HDSP_BASE_URL") or env.get("HDSP_MODEL"):
        key_env = "HDSP_API_KEY" if env.get("HDSP_API_KEY") else "OPENAI_API_KEY"
        profiles["default"] = Profile(
            name="default",
            provider="openai-compatible",
            model=env.get("HDSP_MODEL", "gpt-4o-mini"),
            base_url=env.get("HDSP_BASE_URL"),
            api_key_env=key_env,
        )
    return profiles
