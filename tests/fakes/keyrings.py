"""Keyring backends that misbehave as real ones do, for the tests of secrets."""

from __future__ import annotations

from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked

__all__ = ["LockedKeyring"]


class LockedKeyring(KeyringBackend):
    """A keyring that is there but locked, as a Secret Service collection is until
    someone unlocks it."""

    priority = 1  # type: ignore[assignment]

    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringLocked("the collection is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise KeyringLocked("the collection is locked")

    def delete_password(self, service: str, username: str) -> None:
        raise KeyringLocked("the collection is locked")
