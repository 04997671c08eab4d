"""Secrets (API keys) by name: the OS keyring first, the environment second.

Why this shape:

- Settings and profiles name secrets and never hold them, so the settings file,
  replies, events and exports can be shown and shared. The values live in the OS
  keyring (the freedesktop Secret Service, macOS Keychain, Windows Credential
  Locker) under the service ``hdsp``, one entry per name.
- Environment variables are the fallback on read, for servers and CI where no
  keyring runs: the conventional names map to the variables people already set
  (``anthropic`` -> ``ANTHROPIC_API_KEY``, ``openai`` -> ``OPENAI_API_KEY``,
  ``default``/``hdsp`` -> ``HDSP_API_KEY``). A value in the keyring wins.
- With no usable keyring backend (no D-Bus session, say), reading falls back to
  the environment quietly, and setting fails with :class:`SecretStoreUnavailable`,
  whose message says how to configure a backend. keyrings.alt's EncryptedKeyring
  is refused: it asks for a password on a terminal, which a daemon does not have.
- Keyring calls block (D-Bus round trips, file I/O, possibly an unlock dialog), so
  the async methods run them on a worker thread, one at a time: backends are not
  known to be thread-safe.
- Every value read or set is added to the daemon's scrubber
  (:data:`hdsp.daemon.scrubber.scrubber`) at once, under its name, and so are the
  environment fallbacks present at start: no log line, event or stored text shows
  it even if an error message quotes it. :meth:`SecretStore.known_values` gives
  them to whoever must keep them out of a child process's environment.
- A file keyring that stores values unencrypted (keyrings.alt's
  PlaintextKeyring) works, but :meth:`SecretStore.plaintext_file` names its file,
  so that users are told where their keys lie in plain text.

Errors::

    SecretError
    ├── InvalidSecret            the name or the value is not acceptable
    ├── SecretStoreUnavailable   no usable keyring backend (the message says how to get one)
    └── SecretStoreFailed        the backend failed: locked, D-Bus error, unreadable file
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import anyio.to_thread
import structlog

from hdsp.daemon.errors import HdspError
from hdsp.daemon.scrubber import SecretScrubber, scrubber
from hdsp.protocol import ErrorCode

from .provider_kinds import PROVIDER_KINDS

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

__all__ = [
    "ENV_FALLBACKS",
    "SECRET_NAME_PATTERN",
    "SERVICE",
    "InvalidSecret",
    "SecretError",
    "SecretNotFound",
    "SecretStatus",
    "SecretStore",
    "SecretStoreFailed",
    "SecretStoreUnavailable",
    "check_secret_name",
]

log = structlog.get_logger("hdsp.secrets")

#: The keyring service every hdsp secret is stored under.
SERVICE: Final = "hdsp"

#: Names of secrets: a letter or digit, then letters, digits, ``_``, ``.``, ``-``.
SECRET_NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
_NAME = re.compile(SECRET_NAME_PATTERN)

#: Environment variables read, in order, when the keyring has no value for a name:
#: the provider kinds' conventional secrets, then hdsp's own.
ENV_FALLBACKS: Final[Mapping[str, tuple[str, ...]]] = {
    **{
        row.conventional_secret: row.env_vars
        for row in PROVIDER_KINDS.values()
        if row.conventional_secret is not None
    },
    # The `default` profile made from HDSP_BASE_URL/HDSP_MODEL uses this name.
    "default": ("HDSP_API_KEY", "OPENAI_API_KEY"),
    "hdsp": ("HDSP_API_KEY",),
}

_HOW_TO_CONFIGURE = (
    "Run hdspd where a desktop keyring is available (GNOME Keyring or KWallet, which "
    "need a D-Bus session; macOS and Windows have one built in), or install "
    "keyrings.alt and start hdspd with "
    "PYTHON_KEYRING_BACKEND=keyrings.alt.file.PlaintextKeyring (it keeps keys "
    "unencrypted in a file only you can read)."
)


class SecretError(HdspError):
    """A secret could not be stored, read or removed; the message says why."""


class InvalidSecret(SecretError, ValueError):
    """The name or the value of a secret is not acceptable."""

    code = ErrorCode.INVALID_REQUEST


class SecretNotFound(SecretError, LookupError):
    """The keyring holds no secret of that name: there was nothing to remove."""

    code = ErrorCode.INVALID_REQUEST


class SecretStoreUnavailable(SecretError):
    """No usable keyring backend: secrets can be read from the environment only."""

    code = ErrorCode.UNAVAILABLE


class SecretStoreFailed(SecretError):
    """The keyring backend failed (locked, D-Bus error, unreadable file)."""

    code = ErrorCode.UNAVAILABLE


#: An answer not looked for yet.
_NOT_YET: Final = object()


@dataclass(frozen=True, slots=True)
class SecretStatus:
    """Whether a secret has a value, and where from; never the value."""

    name: str
    is_set: bool
    source: Literal["keyring", "environment"] | None = None
    env_vars: tuple[str, ...] = ()
    #: Why the store could not tell (the keyring failed), if it could not.
    error: str | None = None


def check_secret_name(name: str) -> str:
    """Return `name` if it can name a secret, else raise :class:`InvalidSecret`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidSecret(
            f"{name!r} cannot name a secret: use up to 64 letters, digits, '_', '.' or "
            "'-', starting with a letter or digit (for example 'anthropic' or 'work-openai')."
        )
    return name


def _check_value(name: str, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidSecret(f"The value of secret {name!r} is empty; nothing was stored.")
    if any(ch in value for ch in "\r\n\x00"):
        raise InvalidSecret(
            f"The value of secret {name!r} contains a line break; give the key alone "
            "(`hdsp secret set` reads one line)."
        )


def _prompts(backend: Any) -> bool:
    """Whether `backend` asks for a password on a terminal (keyrings.alt's
    EncryptedKeyring and its kin derive from a class named ``Encrypted``)."""
    return any(cls.__name__ == "Encrypted" for cls in type(backend).__mro__)


def _unusable_reason(backend: Any) -> str | None:
    """Why `backend` cannot serve the daemon, or None when it can."""
    from keyring.backends import chainer, fail, null

    if isinstance(backend, fail.Keyring):
        return "the keyring library found no backend"
    if isinstance(backend, null.Keyring):
        return "the configured backend is the null keyring, which stores nothing"
    if isinstance(backend, chainer.ChainerBackend):
        chained = list(backend.backends)
        prompting = [b for b in chained if _prompts(b)]
        if prompting:
            return _unusable_reason(prompting[0])
        reasons = [_unusable_reason(b) for b in chained]
        if not reasons or all(reasons):
            return reasons[0] if reasons else "the keyring library found no backend"
        return None
    if _prompts(backend):
        return (
            f"{type(backend).__name__} asks for its password on a terminal, which a "
            "daemon does not have"
        )
    return None


@dataclass
class _Backend:
    backend: Any = None
    unusable: str | None = None
    warned: set[str] = field(default_factory=set)
    #: `plaintext_file()`'s answer, found once.
    plaintext_file: object = _NOT_YET


class SecretStore:
    """Secrets by name over `keyring` (service :data:`SERVICE`), with the environment
    as the fallback on read (see the module docstring).

    `backend` is a keyring backend to use instead of the one `keyring` chooses
    (tests pass a keyrings.alt backend writing under their temp dir); `env` is the
    environment to fall back on (``os.environ`` by default).
    """

    def __init__(
        self,
        *,
        backend: KeyringBackend | None = None,
        env: Mapping[str, str] | None = None,
        service: str = SERVICE,
        scrubber: SecretScrubber = scrubber,
    ) -> None:
        self._chosen = backend
        self._env = os.environ if env is None else env
        self.service = service
        self._lock = threading.Lock()
        self._state: _Backend | None = None
        self._scrubber = scrubber
        # Known from the start, read or not: a kernel or a shell may print them.
        for name, env_vars in ENV_FALLBACKS.items():
            for var in env_vars:
                value = self._env.get(var)
                if value:
                    scrubber.add(value, name=name if len(env_vars) == 1 else var.lower())

    @property
    def scrubber(self) -> SecretScrubber:
        """The scrubber this store adds every value it sees to."""
        return self._scrubber

    def known_values(self) -> frozenset[str]:
        """Every secret value the daemon knows (read, set, or in the environment
        fallbacks), for dropping environment variables that hold one from a child
        process's environment. Never log or send these."""
        return self._scrubber.known_values()

    # ---- the environment ---------------------------------------------------------

    @staticmethod
    def env_vars(name: str) -> tuple[str, ...]:
        """The environment variables read for `name` when the keyring has none."""
        return ENV_FALLBACKS.get(name, ())

    def _from_env(self, name: str) -> tuple[str, str] | None:
        for var in self.env_vars(name):
            value = self._env.get(var)
            if value:
                self._scrubber.add(value, name=name)
                return var, value
        return None

    # ---- async API ------------------------------------------------------------------

    async def get(self, name: str) -> str | None:
        """The value of secret `name`, from the keyring or else the environment, or
        None when neither has one.

        Raises:
            InvalidSecret: `name` cannot name a secret.
            SecretStoreFailed: the keyring failed and the environment has no value.
        """
        return await anyio.to_thread.run_sync(self.get_blocking, name)

    async def status(self, name: str) -> SecretStatus:
        """Whether `name` has a value and where from; a keyring failure is reported
        in `error` instead of raised."""
        return await anyio.to_thread.run_sync(self.status_blocking, name)

    async def set(self, name: str, value: str) -> None:
        """Store `value` under `name` in the keyring.

        Raises:
            InvalidSecret: the name or the value is not acceptable.
            SecretStoreUnavailable: no usable keyring backend (says how to get one).
            SecretStoreFailed: the backend refused or failed.
        """
        await anyio.to_thread.run_sync(self.set_blocking, name, value)

    async def delete(self, name: str) -> bool:
        """Remove `name` from the keyring; False when it held no value there.

        Raises:
            InvalidSecret: `name` cannot name a secret.
            SecretStoreUnavailable: no usable keyring backend.
            SecretStoreFailed: the backend failed.
        """
        return await anyio.to_thread.run_sync(self.delete_blocking, name)

    # ---- blocking API (worker threads, scripts) -------------------------------------

    def get_blocking(self, name: str) -> str | None:
        return self._lookup(check_secret_name(name))[1]

    def status_blocking(self, name: str) -> SecretStatus:
        check_secret_name(name)
        env_vars = self.env_vars(name)
        try:
            source, value = self._lookup(name)
        except SecretStoreFailed as exc:
            return SecretStatus(name, False, env_vars=env_vars, error=str(exc))
        return SecretStatus(name, value is not None, source, env_vars)

    def set_blocking(self, name: str, value: str) -> None:
        check_secret_name(name)
        _check_value(name, value)
        # Registered first: from here on no log line can show it, whatever fails.
        self._scrubber.add(value, name=name)
        with self._lock:
            backend = self._usable_backend(f"cannot store the secret {name!r}")
            try:
                backend.set_password(self.service, name, value)
            except Exception as exc:  # any backend's own errors: translated here
                raise SecretStoreFailed(
                    f"The keyring ({_describe(backend)}) refused to store the secret "
                    f"{name!r}: {exc}. Unlock it, or configure another backend. "
                    + _HOW_TO_CONFIGURE
                ) from exc
        log.info("secret stored", secret_name=name, keyring=_describe(backend))

    def delete_blocking(self, name: str) -> bool:
        check_secret_name(name)
        from keyring.errors import PasswordDeleteError

        with self._lock:
            backend = self._usable_backend(f"cannot remove the secret {name!r}")
            try:
                if backend.get_password(self.service, name) is None:
                    return False
                backend.delete_password(self.service, name)
            except PasswordDeleteError:
                return False
            except Exception as exc:  # any backend's own errors: translated here
                raise SecretStoreFailed(
                    f"The keyring ({_describe(backend)}) failed to remove the secret "
                    f"{name!r}: {exc}."
                ) from exc
        log.info("secret removed", secret_name=name)
        return True

    def backend_name(self) -> str:
        """The keyring backend secrets go to (the first of a chain), by class.
        Blocking: it may choose the backend."""
        from keyring.backends import chainer

        with self._lock:
            backend = self._resolve().backend
        if isinstance(backend, chainer.ChainerBackend) and backend.backends:
            backend = backend.backends[0]
        return _describe(backend)

    def plaintext_file(self) -> str | None:
        """The file where the keyring backend keeps secrets unencrypted, when it is
        a plain-text file backend (keyrings.alt's PlaintextKeyring), else None.
        Blocking: it may choose the backend."""
        with self._lock:
            state = self._resolve()
            if state.plaintext_file is _NOT_YET:
                state.plaintext_file = _plaintext_file(state.backend)
            return cast(str | None, state.plaintext_file)

    def plaintext_file_known(self) -> tuple[str | None] | None:
        """`plaintext_file()`'s answer if it was found already (it does not change
        once the backend is chosen), in a tuple; None if not yet: without blocking."""
        state = self._state
        if state is None or state.plaintext_file is _NOT_YET:
            return None
        return (cast(str | None, state.plaintext_file),)

    def warm(self) -> None:
        """Import `keyring` and choose the backend (blocking, reads no secret), so that
        the first request does not wait for it."""
        with self._lock:
            self._resolve()

    # ---- internals --------------------------------------------------------------------

    def _lookup(self, name: str) -> tuple[Literal["keyring", "environment"] | None, str | None]:
        """(source, value) of `name`: keyring first, environment second."""
        from keyring.errors import NoKeyringError

        failure: Exception | None = None
        with self._lock:
            state = self._resolve()
            if state.unusable is None:
                try:
                    value = state.backend.get_password(self.service, name)
                except NoKeyringError:
                    value = None
                except Exception as exc:  # any backend's own errors: translated here
                    value, failure = None, exc
                if value:
                    self._scrubber.add(value, name=name)
                    return "keyring", value
            elif "reading" not in state.warned:
                state.warned.add("reading")
                log.info(
                    "no usable keyring: secrets come from the environment only",
                    reason=state.unusable,
                )
        found = self._from_env(name)
        if found is not None:
            if failure is not None:
                log.warning(
                    "the keyring failed; using the environment",
                    secret_name=name,
                    env_var=found[0],
                    error=str(failure),
                )
            return "environment", found[1]
        if failure is not None:
            env = " or ".join(self.env_vars(name))
            hint = f", or set {env} in hdspd's environment" if env else ""
            raise SecretStoreFailed(
                f"Reading the secret {name!r} from the keyring "
                f"({_describe(state.backend)}) failed: {failure}. Unlock the keyring{hint}."
            ) from failure
        return None, None

    def _resolve(self) -> _Backend:
        """The backend, chosen once (the lock is held)."""
        if self._state is None:
            backend: Any = self._chosen
            if backend is None:
                import keyring

                backend = keyring.get_keyring()
            self._state = _Backend(backend, _unusable_reason(backend))
            log.debug("keyring backend", keyring=_describe(backend), unusable=self._state.unusable)
        return self._state

    def _usable_backend(self, doing: str) -> Any:
        state = self._resolve()
        if state.unusable is not None:
            raise SecretStoreUnavailable(
                f"hdspd {doing}: no usable keyring ({state.unusable}). " + _HOW_TO_CONFIGURE
            )
        return state.backend


def _plaintext_file(backend: Any) -> str | None:
    """Where `backend` (or a backend it chains) keeps secrets in plain text, if it does."""
    from keyring.backends import chainer

    if isinstance(backend, chainer.ChainerBackend):
        for chained in backend.backends:
            found = _plaintext_file(chained)
            if found is not None:
                return found
        return None
    plain = any("plaintext" in cls.__name__.lower() for cls in type(backend).__mro__)
    path = getattr(backend, "file_path", None)
    if plain:
        return str(path) if path is not None else "(a file the keyring backend chose)"
    return None


def _describe(backend: Any) -> str:
    cls = type(backend)
    return f"{cls.__module__}.{cls.__qualname__}"
