"""Settings (the approvals' among them), provider profiles and secrets."""

from __future__ import annotations

from .approvals import ApprovalSettings
from .profiles import (
    DEFAULT_PROFILE,
    DEMO_PROFILE,
    ProfileNotFound,
    Profiles,
    env_default_profile,
    secret_name,
)
from .secrets import (
    InvalidSecret,
    SecretError,
    SecretStatus,
    SecretStore,
    SecretStoreFailed,
    SecretStoreUnavailable,
)
from .service import ConfigService
from .settings import (
    CheckpointSettings,
    ModelInfoOverride,
    ProviderProfile,
    Settings,
    SettingsError,
    SettingsInvalid,
    SettingsStore,
)

__all__ = [
    "DEFAULT_PROFILE",
    "DEMO_PROFILE",
    "ApprovalSettings",
    "CheckpointSettings",
    "ConfigService",
    "InvalidSecret",
    "ModelInfoOverride",
    "ProfileNotFound",
    "Profiles",
    "ProviderProfile",
    "SecretError",
    "SecretStatus",
    "SecretStore",
    "SecretStoreFailed",
    "SecretStoreUnavailable",
    "Settings",
    "SettingsError",
    "SettingsInvalid",
    "SettingsStore",
    "env_default_profile",
    "secret_name",
]
