"""Settings, provider profiles and secrets."""

from __future__ import annotations

from .profiles import DEMO_PROFILE, Profile, ProfileNotFound, profiles_from_env

__all__ = ["DEMO_PROFILE", "Profile", "ProfileNotFound", "profiles_from_env"]
