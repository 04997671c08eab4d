"""Settings, provider profiles and secrets on the wire: the commands, their results,
and the payload of the daemon-wide `settingsChanged` event.

The settings document itself travels as a plain JSON object (`settings`) rather
than as structs: its sections belong to different parts of the daemon, unknown
keys from older and newer versions are kept, and the daemon validates it. Its keys
are snake_case, as in the file the daemon keeps (`settings.json` in its data dir).

A secret's *value* travels exactly once, client to daemon, inside `SetSecret` over
the local socket; no result, event or export ever carries one. Settings and
profiles refer to secrets by name, and results say only whether a name is set.

Settings commands run concurrently (their ordering key is None); the daemon
applies changes one at a time and answers each with the state it produced.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from ._base import CommandBase, WireStruct

__all__ = [
    "DeleteProfile",
    "DeleteSecret",
    "ExportSettings",
    "GetModels",
    "GetModelsData",
    "GetSettings",
    "ImportResult",
    "ImportSettings",
    "ImportSettingsData",
    "ListProfiles",
    "ModelEntry",
    "ModelList",
    "ProfileData",
    "ProfileInfo",
    "ProfileList",
    "ProfileNameData",
    "Rejection",
    "SaveProfile",
    "SaveProfileData",
    "SecretInfo",
    "SecretNameData",
    "SelectProfile",
    "SetSecret",
    "SetSecretData",
    "SettingsChange",
    "SettingsExport",
    "SettingsView",
    "UpdateSettings",
    "UpdateSettingsData",
]


# ---- records ------------------------------------------------------------------


class SecretInfo(WireStruct, frozen=True):
    """A secret by name: whether the daemon has a value for it, never the value."""

    name: str
    is_set: bool
    source: Annotated[
        Literal["keyring", "environment"] | None,
        Meta(
            description=(
                'Where the value comes from: "keyring" or "environment"; absent when not set.'
            )
        ),
    ] = None
    env_vars: Annotated[
        list[str],
        Meta(description="Environment variables the daemon reads when the keyring has no value."),
    ] = []
    error: Annotated[
        str | None,
        Meta(description="Why the daemon could not tell whether it is set (the keyring failed)."),
    ] = None
    plaintext_keyring: Annotated[
        str | None,
        Meta(
            description=(
                "The file where the daemon's keyring keeps secrets unencrypted, when its "
                "backend is a plain-text file (keyrings.alt's PlaintextKeyring); absent "
                "otherwise."
            )
        ),
    ] = None
    keyring_backend: Annotated[
        str | None,
        Meta(
            description="The keyring backend that stored it (its class, e.g. "
            '"keyring.backends.SecretService.Keyring"); set in the reply to SetSecret.'
        ),
    ] = None


class ProfileData(WireStruct, frozen=True):
    """A provider profile as a client writes it (`SaveProfile`)."""

    name: str
    provider: Annotated[
        str,
        Meta(description='"anthropic", "openai", "openai-compatible" or "demo".'),
    ]
    model: str
    base_url: Annotated[
        str | None,
        Meta(description="The API's base URL; absent for the provider's own (OpenAI, Anthropic)."),
    ] = None
    options: Annotated[
        dict[str, Any],
        Meta(
            description=(
                "Provider options, e.g. `thinking_budget` (Anthropic), `reasoning_effort` "
                "(OpenAI), `max_tokens`, and the bounds on the server's silence in seconds: "
                "`first_byte_timeout` (before its response begins, default 30) and "
                "`idle_timeout` (between two events of a reply, default 120)."
            )
        ),
    ] = {}
    secret: Annotated[
        str | None,
        Meta(description="The NAME of the secret holding the API key (`SetSecret`), never a key."),
    ] = None


class ProfileInfo(WireStruct, frozen=True):
    """A profile as the daemon uses it."""

    name: str
    provider: str
    model: str
    source: Annotated[
        Literal["settings", "builtin", "environment"],
        Meta(
            description=(
                '"settings" (saved by a user), "builtin" (`demo`) or "environment" (the '
                "`default` profile made from HDSP_BASE_URL/HDSP_MODEL/HDSP_API_KEY)."
            )
        ),
    ]
    base_url: str | None = None
    options: dict[str, Any] = {}
    secret: str | None = None
    secret_set: Annotated[
        bool | None,
        Meta(
            description=(
                "Whether the named secret has a value (keyring or environment); absent when the"
                " profile names no secret."
            )
        ),
    ] = None
    current: Annotated[
        bool,
        Meta(description="True for the profile new tasks use when they name none."),
    ] = False


class ProfileList(WireStruct, frozen=True):
    profiles: list[ProfileInfo]
    current: Annotated[
        str | None,
        Meta(
            description=(
                "The profile new tasks use when they name none; absent when there is none."
            )
        ),
    ] = None
    plaintext_keyring: Annotated[
        str | None,
        Meta(
            description=(
                "The file where the daemon's keyring keeps keys unencrypted, if it does (see "
                "`SecretInfo.plaintext_keyring`)."
            )
        ),
    ] = None


class SettingsView(WireStruct, frozen=True):
    """The settings document, with secrets shown only as names."""

    settings: dict[str, Any]
    secrets: Annotated[
        list[SecretInfo],
        Meta(
            description=(
                "Every secret name the settings refer to, plus the conventional ones "
                '("anthropic", "openai", "default").'
            )
        ),
    ]
    path: Annotated[str, Meta(description="The settings file.")]
    problems: Annotated[
        list[str],
        Meta(
            description=(
                "Problems the daemon found in the file when it started (a corrupt file moved "
                "aside, parts it had to drop), for people to read."
            )
        ),
    ] = []


class SettingsExport(WireStruct, frozen=True):
    """A portable copy of the settings: secrets appear only as names."""

    settings: dict[str, Any]
    secret_names: Annotated[
        list[str],
        Meta(
            description=(
                "The secret names the profiles refer to; set them on the new machine with `hdsp"
                " secret set NAME`."
            )
        ),
    ] = []


class Rejection(WireStruct, frozen=True):
    path: Annotated[
        str,
        Meta(
            description='Dotted path of what was left out: "profiles.work", "retry.max_attempts".'
        ),
    ]
    reason: str


class ImportResult(WireStruct, frozen=True):
    settings: Annotated[dict[str, Any], Meta(description="The settings after the import.")]
    applied: Annotated[
        list[str],
        Meta(
            description=(
                'Dotted paths of what was taken: top-level keys, "profiles.NAME", "models.NAME".'
            )
        ),
    ] = []
    rejected: Annotated[
        list[Rejection],
        Meta(description="What was left out, and why; the rest was applied."),
    ] = []


class ModelEntry(WireStruct, frozen=True):
    """One model of the daemon's model table (with the user's overrides)."""

    provider: str
    id: str
    context_window: int
    max_output: int
    input_price: Annotated[float, Meta(description="USD per million tokens.")] = 0.0
    output_price: float = 0.0
    cache_read_price: float = 0.0
    cache_write_price: float = 0.0
    supports_images: bool = False
    source: Annotated[
        Literal["builtin", "settings"],
        Meta(description='"builtin" (hdsp\'s table) or "settings" (the user\'s `models` section).'),
    ] = "builtin"


class ModelList(WireStruct, frozen=True):
    models: list[ModelEntry]


class SettingsChange(WireStruct, frozen=True):
    """The payload of `settingsChanged`: what changed, never a secret's value.

    `reason` is one of "updated", "imported", "profileSaved", "profileDeleted",
    "profileSelected", "secretSet", "secretDeleted", or "recovered" (the daemon
    found the settings file corrupt or invalid at start; `message` says where the
    old file went). Clients re-read what they show with `GetSettings` or
    `ListProfiles`.
    """

    reason: str
    keys: Annotated[
        list[str],
        Meta(
            description=(
                "Top-level settings keys that changed, or the names of the profile or secret."
            )
        ),
    ] = []
    current_profile: Annotated[
        str | None,
        Meta(description="The profile new tasks use after the change."),
    ] = None
    client_id: Annotated[
        str | None,
        Meta(description="The client whose command made the change."),
    ] = None
    message: str | None = None


# ---- payloads -------------------------------------------------------------------


class UpdateSettingsData(WireStruct, frozen=True):
    patch: Annotated[
        dict[str, Any],
        Meta(
            description=(
                "A JSON Merge Patch (RFC 7396) of the settings document: objects merge, `null` "
                "removes a key (its default applies), anything else replaces."
            )
        ),
    ]


class SaveProfileData(WireStruct, frozen=True):
    profile: Annotated[
        ProfileData,
        Meta(description="Replaces a saved profile of the same name whole."),
    ]
    select: Annotated[bool, Meta(description="Also make it the current profile.")] = False


class ProfileNameData(WireStruct, frozen=True):
    name: str


class SetSecretData(WireStruct, frozen=True):
    name: str
    value: str

    def __repr__(self) -> str:
        # Keep the value out of any log line or traceback that shows the struct.
        return f"SetSecretData(name={self.name!r}, value=<hidden>)"


class SecretNameData(WireStruct, frozen=True):
    name: str


class ImportSettingsData(WireStruct, frozen=True):
    settings: Annotated[
        dict[str, Any],
        Meta(description="A settings document, as `ExportSettings` gives it."),
    ]
    merge: Annotated[
        bool,
        Meta(
            description=(
                "True merges it into the current settings (JSON Merge Patch); False replaces "
                "them, with defaults for what it leaves out."
            )
        ),
    ] = True


class GetModelsData(WireStruct, frozen=True):
    provider: Annotated[
        str | None,
        Meta(description='Only this provider\'s models ("anthropic", "openai", ...).'),
    ] = None


# ---- commands -------------------------------------------------------------------


class GetSettings(CommandBase[SettingsView], tag="GetSettings", frozen=True):
    pass


class UpdateSettings(CommandBase[SettingsView], tag="UpdateSettings", frozen=True):
    """Change settings; an invalid result is refused whole, listing the fields."""

    data: UpdateSettingsData


class ListProfiles(CommandBase[ProfileList], tag="ListProfiles", frozen=True):
    pass


class SaveProfile(CommandBase[ProfileInfo], tag="SaveProfile", frozen=True):
    data: SaveProfileData


class DeleteProfile(CommandBase[ProfileList], tag="DeleteProfile", frozen=True):
    data: ProfileNameData


class SelectProfile(CommandBase[ProfileList], tag="SelectProfile", frozen=True):
    """Make a profile the one new tasks use when they name none."""

    data: ProfileNameData


class SetSecret(CommandBase[SecretInfo], tag="SetSecret", frozen=True):
    """Store a secret in the daemon's keyring. The value is never echoed or logged."""

    data: SetSecretData


class DeleteSecret(CommandBase[SecretInfo], tag="DeleteSecret", frozen=True):
    """Remove a secret from the keyring (an environment variable stays in effect)."""

    data: SecretNameData


class ExportSettings(CommandBase[SettingsExport], tag="ExportSettings", frozen=True):
    pass


class ImportSettings(CommandBase[ImportResult], tag="ImportSettings", frozen=True):
    """Apply a settings document; parts that do not validate are left out and
    reported in the result, the rest is applied."""

    data: ImportSettingsData


class GetModels(CommandBase[ModelList], tag="GetModels", frozen=True):
    """Roo's GetModels: the reply lists the models, and a daemon-wide
    `modelsResponse` event carries them too, keyed by model id."""

    data: GetModelsData = GetModelsData()
