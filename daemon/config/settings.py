"""The daemon's global settings: the store that keeps them.

Why this shape (seed 001's ContextProxy, seed 003's StateProxy):

- One document, ``settings.json`` in the data dir, validated by the models of
  :mod:`.settings_model`. Readers get a cached, validated, immutable copy
  (:attr:`SettingsStore.settings`); nothing re-reads the file on the hot path.
- Every change goes through :meth:`SettingsStore.modify`: computed on a copy,
  validated whole, written atomically (a temporary file in the same directory,
  fsync, rename, fsync of the directory) and only then served. An invalid change
  raises :class:`SettingsInvalid` listing every bad field, and nothing is written.
  Changes are applied one at a time, so concurrent updates never lose each other.
- Unknown keys, from an older or a newer hdsp, are kept through a load/save cycle
  (``extra="allow"`` at every level), and ``version`` names the document's shape;
  :func:`migrate` brings older documents up to date, step by step.
- A corrupt or invalid file is never silently emptied: it is moved aside as
  ``settings.json.corrupt-<UTC timestamp>``; what still validates is kept (a
  file that is not JSON keeps nothing: defaults apply); and the problem is logged
  and kept in :attr:`SettingsStore.problems` for the daemon to report.
- Settings hold the *names* of secrets, never their values (see :mod:`.secrets`).
  A key that looks like a secret (``api_key``, ``token``...) is refused anywhere
  in the document, so a pasted key cannot end up in the file, a reply or an export.

The models are in :mod:`.settings_model`, what is done to documents (migration,
merge, validation, and the errors) in :mod:`.settings_documents`; this module
re-exports both, so ``hdsp.daemon.config.settings`` names everything.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog

from hdsp.daemon.atomic_write import fsync_directory, write_atomically

from .settings_documents import (
    SECRET_REASON,
    FieldError,
    SettingsError,
    SettingsInvalid,
    check_document,
    merge_patch,
    migrate,
    secret_like_keys,
    validate_salvaging,
)
from .settings_model import *  # noqa: F403
from .settings_model import Settings
from .settings_model import __all__ as _model_all

__all__ = [
    "FieldError",
    "SettingsError",
    "SettingsInvalid",
    "SettingsStore",
    "check_document",
    "merge_patch",
    "migrate",
    "validate_salvaging",
    *_model_all,
]

log = structlog.get_logger("hdsp.settings")


# ---- the store --------------------------------------------------------------------------


def _utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


class SettingsStore:
    """The settings file behind a cache (see the module docstring).

    Call :meth:`load` once; then :attr:`settings` serves the cached copy and
    :meth:`update`, :meth:`modify` and :meth:`import_document` change it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._settings: Settings | None = None
        self._lock = anyio.Lock()
        #: What was wrong with the file at load, for people to read.
        self.problems: list[str] = []
        #: Where the corrupt or invalid file went, if it was moved aside.
        self.moved_aside: Path | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            raise RuntimeError("SettingsStore.load() has not run")
        return self._settings

    # ---- loading -------------------------------------------------------------------

    async def load(self) -> Settings:
        """Read the file once (on a worker thread); see :meth:`load_blocking`."""
        return await anyio.to_thread.run_sync(self.load_blocking)

    def load_blocking(self) -> Settings:
        """Read and validate the file; defaults when there is none.

        A corrupt or invalid file is moved aside and reported (:attr:`problems`,
        :attr:`moved_aside`, a warning in the log); what still validates is kept.

        Raises:
            SettingsError: the file exists but cannot be read or moved aside.
        """
        self.problems = []
        self.moved_aside = None
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._settings = Settings()
            return self._settings
        except OSError as exc:
            raise SettingsError(
                f"Cannot read the settings file {self.path}: {exc.strerror or exc}. "
                "Fix its permissions, or move it away to start with defaults."
            ) from exc
        self._tighten_mode()
        try:
            document = json.loads(raw.decode("utf-8"))
            if not isinstance(document, dict):
                raise ValueError(f"the file holds a JSON {type(document).__name__}, not an object")
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            self._settings = Settings()
            self._set_aside(f"it is not a JSON object ({exc}); defaults apply")
            return self._settings
        try:
            settings, dropped = validate_salvaging(migrate(document))
        except SettingsInvalid as exc:
            self._settings = Settings()
            self._set_aside(f"{exc}; defaults apply")
            return self._settings
        self._settings = settings
        if dropped:
            listed = "; ".join(str(e) for e in dropped)
            self._set_aside(f"these parts were invalid and are left out: {listed}")
        return settings

    def _tighten_mode(self) -> None:
        try:
            mode = stat.S_IMODE(self.path.stat().st_mode)
            if mode & 0o077:
                os.chmod(self.path, 0o600)
                log.warning(
                    "settings file was readable by others; made it private",
                    path=str(self.path),
                    mode=oct(mode),
                )
        except OSError:
            pass

    def _set_aside(self, why: str) -> None:
        stamp = _utc_stamp()
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
            n += 1
        try:
            os.replace(self.path, target)
            fsync_directory(self.path.parent)
        except OSError as exc:
            raise SettingsError(
                f"The settings file {self.path} is unusable ({why}), and moving it aside "
                f"to {target.name} failed: {exc.strerror or exc}. Move it away by hand."
            ) from exc
        self.moved_aside = target
        message = (
            f"The settings file {self.path} was unusable: {why}. The old file is kept as {target}."
        )
        self.problems.append(message)
        log.warning(
            "settings file unusable: moved aside",
            path=str(self.path),
            moved_to=str(target),
            problem=why,
        )

    # ---- changes -----------------------------------------------------------------------

    async def modify(self, change: Callable[[dict[str, Any]], Mapping[str, Any]]) -> Settings:
        """Apply `change` (current document -> new document), validate the result
        whole, write it atomically, and serve it. Changes run one at a time.

        Raises:
            SettingsInvalid: the new document does not validate; nothing was written.
            SettingsError: writing the file failed; nothing changed.
        """
        async with self._lock:
            document = change(self.settings.document())
            settings = check_document(document)
            await self._save(settings)
            return settings

    async def update(self, patch: Mapping[str, Any]) -> Settings:
        """Apply a JSON Merge Patch (see :func:`merge_patch`) to the settings.

        Raises:
            SettingsInvalid: the patch or its result does not validate (listing
                every bad field); nothing was written.
            SettingsError: writing the file failed; nothing changed.
        """
        if not isinstance(patch, Mapping):
            raise SettingsInvalid([FieldError("", "a patch must be a JSON object")])
        if "version" in patch:
            raise SettingsInvalid([FieldError("version", "is managed by hdsp; leave it out")])
        bad = secret_like_keys(patch)
        if bad:
            raise SettingsInvalid([FieldError(".".join(p), SECRET_REASON) for p in bad])
        return await self.modify(lambda current: merge_patch(current, patch))

    async def import_document(
        self, document: Mapping[str, Any], *, merge: bool = True
    ) -> tuple[Settings, list[FieldError]]:
        """Apply a settings document (an export), leaving out the parts that do not
        validate. `merge` merges it into the current settings; otherwise it
        replaces them (defaults for what it leaves out). Returns the settings and
        what was left out, and why.

        Raises:
            SettingsInvalid: `document` is not a settings document at all.
            SettingsError: writing the file failed; nothing changed.
        """
        if not isinstance(document, Mapping):
            raise SettingsInvalid([FieldError("", "must be a JSON object")], "Nothing was imported")
        async with self._lock:
            current = self.settings.document()
            incoming = migrate(dict(document))
            incoming.pop("version", None)
            combined = merge_patch(current, incoming) if merge else incoming
            base = current if merge else {}
            settings, rejected = validate_salvaging(combined, base)
            await self._save(settings)
            return settings, rejected

    async def _save(self, settings: Settings) -> None:
        data = (json.dumps(settings.document(), indent=2, ensure_ascii=False) + "\n").encode()
        try:
            await anyio.to_thread.run_sync(write_atomically, self.path, data)
        except OSError as exc:
            raise SettingsError(
                f"Could not save the settings to {self.path}: {exc.strerror or exc}. "
                "Nothing was changed; check the disk and the directory's permissions."
            ) from exc
        self._settings = settings
