"""The settings commands: what `GetSettings`, `SaveProfile`, `SetSecret`... do.

One object, owned by the daemon, in front of the :class:`SettingsStore`, the
:class:`SecretStore` and the :class:`Profiles` in effect. It answers with the
protocol's result types and raises the config's errors, each with its wire code
and a message a person can act on (see :mod:`hdsp.daemon.errors`). After every change it calls its listeners with a
:class:`SettingsChange`, which the daemon turns into the `settingsChanged` event and
into rebuilding the providers that changed; so every path that changes settings
tells every client and every cached provider, and none can forget to.

A secret's value comes in through :meth:`ConfigService.set_secret` and goes only
to the keyring: no result, change or log line carries it.

A base URL may carry credentials (``https://user:pass@host/v1``, ``?api_key=...``).
The settings file keeps them, since the provider needs them, but every view of
the settings (`GetSettings`, `ListProfiles`, `ExportSettings`) shows the URL with
them replaced by ``[REDACTED]``, and the values are added to the scrubber so that
no event or log line shows them either. A redacted URL coming back (an export
imported again, a view edited and saved) keeps the current URL of that profile
when it redacts to the same text; otherwise it is refused, naming the profile.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio.to_thread
import msgspec
import structlog

from hdsp.daemon.scrubber import REDACTED, url_credentials
from hdsp.protocol import (
    ImportResult,
    ModelEntry,
    ModelList,
    ProfileData,
    ProfileInfo,
    ProfileList,
    Rejection,
    SaveProfileData,
    SecretInfo,
    SettingsChange,
    SettingsExport,
    SettingsView,
)

from .profiles import (
    DEFAULT_PROFILE,
    DEMO_PROFILE,
    ProfileNotFound,
    Profiles,
    secret_name,
)
from .provider_kinds import PROVIDER_KINDS
from .secrets import (
    ENV_FALLBACKS,
    SecretNotFound,
    SecretStatus,
    SecretStore,
)
from .settings import (
    FieldError,
    ProviderProfile,
    Settings,
    SettingsInvalid,
    SettingsStore,
)

__all__ = ["ConfigService", "Listener", "ModelTable"]

log = structlog.get_logger("hdsp.settings")

#: Called after every change, in order; the daemon emits `settingsChanged` from one
#: and rebuilds providers from another.
Listener = Callable[[SettingsChange], Awaitable[None]]

#: The model catalogue GetModels answers from, with the user's `settings.models`
#: applied, for one provider or (None) for all: :func:`hdsp.daemon.llm.models.model_table`,
#: handed in by the daemon, since the catalogue lives with the providers, above the config.
ModelTable = Callable[["Settings", str | None], list[ModelEntry]]


def _secret_info(status: SecretStatus, plaintext_keyring: str | None = None) -> SecretInfo:
    return SecretInfo(
        name=status.name,
        is_set=status.is_set,
        source=status.source,
        env_vars=list(status.env_vars),
        error=status.error,
        plaintext_keyring=plaintext_keyring,
    )


_REDACTED_URL_REASON = (
    "holds credentials hidden as {marker} (an export or a view of the settings); "
    "give the whole URL again, or set the key with `hdsp secret set` and name it in "
    "the profile's `secret`"
)


def _profile_document(data: ProfileData) -> dict[str, Any]:
    document: dict[str, Any] = {"name": data.name, "provider": data.provider, "model": data.model}
    if data.base_url is not None:
        document["base_url"] = data.base_url
    if data.options:
        document["options"] = dict(data.options)
    if data.secret is not None:
        document["secret"] = data.secret
    return document


def _changed_keys(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


class ConfigService:
    """Settings, profiles and secrets, as the commands see them (module docstring)."""

    def __init__(
        self,
        store: SettingsStore,
        secrets: SecretStore,
        profiles: Profiles,
        *,
        model_table: ModelTable,
    ) -> None:
        self.store = store
        self.secrets = secrets
        self.profiles = profiles
        self._model_table = model_table
        self._listeners: list[Listener] = []
        self._register_url_credentials()

    def _register_url_credentials(self) -> None:
        """Add the credentials in every profile's base URL to the scrubber."""
        for name, profile in self.profiles.all().items():
            if profile.base_url:
                for value in url_credentials(profile.base_url):
                    self.secrets.scrubber.add(value, name=f"{name}-url")

    def _shown_url(self, url: str | None) -> str | None:
        return None if url is None else self.secrets.scrubber.scrub_url(url)

    def _shown_document(self) -> dict[str, Any]:
        """The settings document with the profiles' base URLs fit to show."""
        document = self.settings.document()
        for profile in (document.get("profiles") or {}).values():
            if isinstance(profile, dict) and isinstance(profile.get("base_url"), str):
                profile["base_url"] = self._shown_url(profile["base_url"])
        return document

    def _restore_redacted_urls(self, document: Mapping[str, Any]) -> list[FieldError]:
        """Put back, in `document` (changed in place), the current base URL of each
        profile whose incoming URL is that URL as shown, redacted; leave out and
        report the profiles whose redacted URL matches nothing."""
        profiles = document.get("profiles")
        if not isinstance(profiles, dict):
            return []
        rejected: list[FieldError] = []
        current = self.settings.profiles
        for name, profile in list(profiles.items()):
            if not isinstance(profile, dict):
                continue
            url = profile.get("base_url")
            if not isinstance(url, str) or REDACTED not in url:
                continue
            old = current[name].base_url if name in current else None
            if old is not None and self._shown_url(old) == url:
                profile["base_url"] = old
            else:
                rejected.append(
                    FieldError(
                        f"profiles.{name}.base_url",
                        _REDACTED_URL_REASON.format(marker=REDACTED),
                    )
                )
                del profiles[name]
        return rejected

    async def plaintext_keyring(self) -> str | None:
        """The file where the keyring keeps secrets in plain text, if it does."""
        known = self.secrets.plaintext_file_known()
        if known is not None:  # found once: no trip to a worker thread (GetStatus)
            return known[0]
        return await anyio.to_thread.run_sync(self.secrets.plaintext_file)

    def subscribe(self, listener: Listener) -> None:
        """Call `listener` after every change (in the order of subscription)."""
        self._listeners.append(listener)

    @property
    def settings(self) -> Settings:
        return self.store.settings

    async def _changed(self, change: SettingsChange) -> None:
        self._register_url_credentials()
        for listener in self._listeners:
            await listener(change)

    def startup_report(self) -> SettingsChange | None:
        """The `recovered` change to announce when the file was unusable at start."""
        if not self.store.problems:
            return None
        return SettingsChange(
            reason="recovered",
            current_profile=self.profiles.current(),
            message=" ".join(self.store.problems),
        )

    # ---- reading -----------------------------------------------------------------

    async def _status(self, name: str) -> SecretStatus:
        return await self.secrets.status(name)

    async def _profile_info(
        self, name: str, profile: ProviderProfile, current: str | None
    ) -> ProfileInfo:
        secret = secret_name(profile)
        is_set = (await self._status(secret)).is_set if secret is not None else None
        return ProfileInfo(
            name=name,
            provider=profile.provider,
            model=profile.model,
            source=self.profiles.source(name),
            base_url=self._shown_url(profile.base_url),
            options=profile.options.model_dump(mode="json", exclude_none=True),
            secret=secret,
            secret_set=is_set,
            current=name == current,
        )

    async def list_profiles(self) -> ProfileList:
        current = self.profiles.current()
        infos = [
            await self._profile_info(name, profile, current)
            for name, profile in sorted(self.profiles.all().items())
        ]
        return ProfileList(
            profiles=infos, current=current, plaintext_keyring=await self.plaintext_keyring()
        )

    def secret_names(self) -> list[str]:
        """Every secret name in use: the profiles' and the conventional ones."""
        names = {name for name in ENV_FALLBACKS if name != "hdsp"}
        names.update(
            name for p in self.profiles.all().values() if (name := secret_name(p)) is not None
        )
        return sorted(names)

    async def view(self) -> SettingsView:
        plaintext = await self.plaintext_keyring()
        secrets = [
            _secret_info(await self._status(name), plaintext) for name in self.secret_names()
        ]
        return SettingsView(
            settings=self._shown_document(),
            secrets=secrets,
            path=str(self.store.path),
            problems=list(self.store.problems),
        )

    async def export(self) -> SettingsExport:
        names = sorted(
            {name for p in self.settings.profiles.values() if (name := secret_name(p)) is not None}
        )
        return SettingsExport(settings=self._shown_document(), secret_names=names)

    # ---- changing ------------------------------------------------------------------

    async def update(
        self, patch: Mapping[str, Any], *, client_id: str | None = None
    ) -> SettingsView:
        before = self.settings.document()
        if isinstance(patch, Mapping):
            patch = copy.deepcopy(dict(patch))
            refused = self._restore_redacted_urls(patch)
            if refused:
                raise SettingsInvalid(refused)
        if isinstance(patch, Mapping) and patch.get("current_profile") is not None:
            self._check_selectable(patch["current_profile"], patch)
        after = (await self.store.update(patch)).document()
        keys = _changed_keys(before, after)
        if keys:
            await self._changed(
                SettingsChange(
                    reason="updated",
                    keys=keys,
                    current_profile=self.profiles.current(),
                    client_id=client_id,
                )
            )
        return await self.view()

    def _check_selectable(self, name: Any, patch: Mapping[str, Any] | None = None) -> None:
        """Refuse to make current a profile that does not exist (nor comes with `patch`)."""
        incoming = patch.get("profiles") if patch is not None else None
        if isinstance(incoming, Mapping) and isinstance(incoming.get(name), Mapping):
            return
        if not isinstance(name, str) or name not in self.profiles.all():
            known = ", ".join(sorted(self.profiles.all()))
            raise SettingsInvalid(
                [FieldError("current_profile", f"no profile is named {name!r} (known: {known})")]
            )

    async def save_profile(
        self, data: SaveProfileData, *, client_id: str | None = None
    ) -> ProfileInfo:
        profile = data.profile
        name = profile.name
        if name == DEMO_PROFILE:
            raise SettingsInvalid(
                [FieldError("profile.name", "'demo' is built in; choose another name")]
            )
        document = _profile_document(profile)
        refused = self._restore_redacted_urls({"profiles": {name: document}})
        if refused:
            raise SettingsInvalid(refused)

        def change(current: dict[str, Any]) -> dict[str, Any]:
            current.setdefault("profiles", {})[name] = document
            if data.select:
                current["current_profile"] = name
            return current

        settings = await self.store.modify(change)
        log.info("profile saved", profile=name, provider=profile.provider, model=profile.model)
        await self._changed(
            SettingsChange(
                reason="profileSaved",
                keys=[name],
                current_profile=self.profiles.current(),
                client_id=client_id,
            )
        )
        return await self._profile_info(name, settings.profiles[name], self.profiles.current())

    async def delete_profile(self, name: str, *, client_id: str | None = None) -> ProfileList:
        if name not in self.settings.profiles:
            if name == DEMO_PROFILE:
                why = "'demo' is built in and cannot be removed."
            elif name == DEFAULT_PROFILE and name in self.profiles.all():
                why = (
                    "'default' comes from HDSP_BASE_URL/HDSP_MODEL in hdspd's environment; "
                    "unset them and restart hdspd to remove it."
                )
            else:
                known = ", ".join(sorted(self.settings.profiles)) or "none"
                why = f"No saved profile is named {name!r} (saved: {known})."
            raise ProfileNotFound(why)

        def change(current: dict[str, Any]) -> dict[str, Any]:
            current.get("profiles", {}).pop(name, None)
            if current.get("current_profile") == name:
                current["current_profile"] = None
            return current

        await self.store.modify(change)
        log.info("profile removed", profile=name)
        await self._changed(
            SettingsChange(
                reason="profileDeleted",
                keys=[name],
                current_profile=self.profiles.current(),
                client_id=client_id,
            )
        )
        return await self.list_profiles()

    async def select_profile(self, name: str, *, client_id: str | None = None) -> ProfileList:
        self.profiles.resolve_name(name)

        def change(current: dict[str, Any]) -> dict[str, Any]:
            current["current_profile"] = name
            return current

        await self.store.modify(change)
        log.info("profile selected", profile=name)
        await self._changed(
            SettingsChange(
                reason="profileSelected", keys=[name], current_profile=name, client_id=client_id
            )
        )
        return await self.list_profiles()

    async def set_secret(
        self, name: str, value: str, *, client_id: str | None = None
    ) -> SecretInfo:
        """Store a secret; the result names the plain-text file it went to, if so."""
        await self.secrets.set(name, value)
        await self._changed(
            SettingsChange(
                reason="secretSet",
                keys=[name],
                current_profile=self.profiles.current(),
                client_id=client_id,
            )
        )
        info = _secret_info(await self._status(name), await self.plaintext_keyring())
        backend = await anyio.to_thread.run_sync(self.secrets.backend_name)
        return msgspec.structs.replace(info, keyring_backend=backend)

    async def delete_secret(self, name: str, *, client_id: str | None = None) -> SecretInfo:
        removed = await self.secrets.delete(name)
        if not removed:
            status = await self._status(name)
            also = f" ({status.source} sets it)" if status.is_set else ""
            raise SecretNotFound(
                f"No secret {name!r} in the keyring{also}; nothing was removed "
                "(`hdsp secret list` lists the names in use)."
            )
        await self._changed(
            SettingsChange(
                reason="secretDeleted",
                keys=[name],
                current_profile=self.profiles.current(),
                client_id=client_id,
            )
        )
        return _secret_info(await self._status(name))

    async def import_settings(
        self, document: Mapping[str, Any], *, merge: bool = True, client_id: str | None = None
    ) -> ImportResult:
        before = self.settings.document()
        document = incoming = copy.deepcopy(dict(document))
        early: list[FieldError] = self._restore_redacted_urls(document)
        current = document.get("current_profile")
        if current is not None:
            try:
                self._check_selectable(current, document)
            except SettingsInvalid as exc:
                early += exc.errors
                incoming.pop("current_profile")
        if isinstance(document.get("profiles"), Mapping) and DEMO_PROFILE in document["profiles"]:
            early.append(FieldError("profiles.demo", "'demo' is built in; choose another name"))
            incoming["profiles"] = {
                k: v for k, v in document["profiles"].items() if k != DEMO_PROFILE
            }
        settings, rejected = await self.store.import_document(document, merge=merge)
        rejected = early + rejected
        after = settings.document()
        applied = [
            unit
            for unit in _units(document)
            if not any(r.path == unit or r.path.startswith(unit + ".") for r in rejected)
        ]
        for r in rejected:
            log.warning("import: left out", path=r.path, reason=r.message)
        keys = _changed_keys(before, after)
        if keys:
            await self._changed(
                SettingsChange(
                    reason="imported",
                    keys=keys,
                    current_profile=self.profiles.current(),
                    client_id=client_id,
                )
            )
        seen: set[tuple[str, str]] = set()
        rejections = []
        for r in rejected:
            if (r.path, r.message) not in seen:
                seen.add((r.path, r.message))
                rejections.append(Rejection(path=r.path, reason=r.message))
        return ImportResult(settings=after, applied=applied, rejected=rejections)

    # ---- models ------------------------------------------------------------------------

    def models(self, provider: str | None = None) -> ModelList:
        """The model table with the user's overrides, for one provider or all."""
        if provider is not None and provider not in PROVIDER_KINDS:
            raise SettingsInvalid(
                [
                    FieldError(
                        "provider",
                        f"must be one of {', '.join(PROVIDER_KINDS)}, not {provider!r}",
                    )
                ],
                "Cannot list models",
            )
        return ModelList(models=self._model_table(self.settings, provider))


def _units(document: Mapping[str, Any]) -> list[str]:
    units: list[str] = []
    for key, value in document.items():
        if key == "version":
            continue
        if key in ("profiles", "models") and isinstance(value, Mapping):
            units += [f"{key}.{name}" for name in value]
        else:
            units.append(key)
    return units
