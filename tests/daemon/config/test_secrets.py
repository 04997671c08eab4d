"""Secrets by name: a real keyrings.alt keyring under tmp_path (never the
developer's own), the environment as the fallback, and clear advice when there is
no keyring backend at all."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from keyring.backends import fail
from keyrings.alt.file import EncryptedKeyring, PlaintextKeyring

from hdsp.daemon.config.secrets import (
    SERVICE,
    InvalidSecret,
    SecretStore,
    SecretStoreFailed,
    SecretStoreUnavailable,
)
from hdsp.daemon.logs import redact_text
from tests.fakes.keyrings import LockedKeyring

KEY = "sk-ant-test-0123456789abcdefghijklmnop"
OTHER_KEY = "sk-other-test-9876543210zyxwvutsrqpo"


@pytest.fixture
def keyring_file(tmp_path: Path) -> PlaintextKeyring:
    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring_pass.cfg")
    return backend


async def test_set_get_delete_in_a_keyring(keyring_file: PlaintextKeyring) -> None:
    store = SecretStore(backend=keyring_file, env={})
    assert await store.get("work") is None

    await store.set("work", KEY)

    assert await store.get("work") == KEY
    assert keyring_file.get_password(SERVICE, "work") == KEY  # under service "hdsp"
    status = await store.status("work")
    assert (status.is_set, status.source) == (True, "keyring")
    assert await store.delete("work") is True
    assert await store.get("work") is None
    assert await store.delete("work") is False


async def test_values_set_or_read_are_redacted_from_logs(keyring_file: PlaintextKeyring) -> None:
    stored = "kr-" + "a1b2c3d4" * 4
    from_env = "env-" + "z9y8x7w6" * 4
    keyring_file.set_password(SERVICE, "written-elsewhere", stored)
    store = SecretStore(backend=keyring_file, env={"OPENAI_API_KEY": from_env})

    assert await store.get("written-elsewhere") == stored
    assert await store.get("openai") == from_env
    # Each shows which secret it was, never its value.
    assert redact_text(f"key={stored} and {from_env}") == (
        "key=[secret:written-elsewhere] and [secret:openai]"
    )

    fresh = "set-" + "q1w2e3r4" * 4
    await store.set("fresh", fresh)
    assert redact_text(fresh) == "[secret:fresh]"
    assert {stored, from_env, fresh} <= store.known_values()


async def test_the_keyring_wins_over_the_environment(keyring_file: PlaintextKeyring) -> None:
    env = {"ANTHROPIC_API_KEY": OTHER_KEY, "HDSP_API_KEY": "", "OPENAI_API_KEY": OTHER_KEY}
    store = SecretStore(backend=keyring_file, env=env)

    status = await store.status("anthropic")
    assert (status.is_set, status.source) == (True, "environment")
    assert status.env_vars == ("ANTHROPIC_API_KEY",)
    assert await store.get("anthropic") == OTHER_KEY

    await store.set("anthropic", KEY)
    assert await store.get("anthropic") == KEY
    assert (await store.status("anthropic")).source == "keyring"
    # `default` (the HDSP_BASE_URL profile) reads HDSP_API_KEY, then OPENAI_API_KEY.
    assert await store.get("default") == OTHER_KEY
    assert await store.get("unconventional") is None


async def test_without_a_backend_setting_says_how_to_get_one(tmp_path: Path) -> None:
    store = SecretStore(backend=fail.Keyring(), env={"ANTHROPIC_API_KEY": KEY})

    with pytest.raises(SecretStoreUnavailable) as caught:
        await store.set("anthropic", OTHER_KEY)
    message = str(caught.value)
    assert "PYTHON_KEYRING_BACKEND=keyrings.alt.file.PlaintextKeyring" in message
    assert "D-Bus" in message
    assert OTHER_KEY not in message
    with pytest.raises(SecretStoreUnavailable):
        await store.delete("anthropic")

    # Reading falls back to the environment.
    assert await store.get("anthropic") == KEY
    status = await store.status("anthropic")
    assert (status.is_set, status.source, status.error) == (True, "environment", None)
    assert await store.get("openai") is None


async def test_an_encrypted_keyring_is_refused_it_would_prompt() -> None:
    # Built without its __init__ (which needs a crypto library this machine may
    # lack): the store refuses it by its class, before asking it anything.
    prompting = EncryptedKeyring.__new__(EncryptedKeyring)
    store = SecretStore(backend=prompting, env={})
    with pytest.raises(SecretStoreUnavailable, match="asks for its password on a terminal"):
        await store.set("work", KEY)
    assert await store.get("work") is None


async def test_a_failing_keyring_is_reported_and_the_environment_still_works() -> None:
    store = SecretStore(backend=LockedKeyring(), env={"OPENAI_API_KEY": KEY})
    assert await store.get("openai") == KEY

    with pytest.raises(SecretStoreFailed, match="locked"):
        await store.get("work")
    status = await store.status("work")
    assert status.is_set is False and status.error is not None and "locked" in status.error
    with pytest.raises(SecretStoreFailed, match="refused to store"):
        await store.set("work", KEY)


@pytest.mark.parametrize("name", ["", "has space", "-leading-dash", "x" * 65, "a/b"])
async def test_bad_names_are_refused(keyring_file: PlaintextKeyring, name: str) -> None:
    store = SecretStore(backend=keyring_file, env={})
    with pytest.raises(InvalidSecret, match="cannot name a secret"):
        await store.set(name, KEY)


@pytest.mark.parametrize("value", ["", "   ", "two\nlines", "nul\x00"])
async def test_bad_values_are_refused(keyring_file: PlaintextKeyring, value: str) -> None:
    store = SecretStore(backend=keyring_file, env={})
    with pytest.raises(InvalidSecret):
        await store.set("work", value)
    assert keyring_file.get_password(SERVICE, "work") is None


def test_the_backend_comes_from_the_environment_as_configured(tmp_path: Path) -> None:
    """What the daemon does: no backend given, keyring chooses by its own rules
    (here PYTHON_KEYRING_BACKEND), writing under XDG_DATA_HOME in tmp_path."""
    data_home = tmp_path / "xdg-data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "PYTHON_KEYRING"))}
    env |= {
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "XDG_DATA_HOME": str(data_home),
        "HOME": str(tmp_path / "home"),
    }
    code = textwrap.dedent(
        f"""
        import anyio
        from hdsp.daemon.config.secrets import SecretStore

        async def main():
            store = SecretStore(env={{}})
            await store.set("work", {KEY!r})
            assert await store.get("work") == {KEY!r}
            assert (await store.status("work")).source == "keyring"

        anyio.run(main)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    stored = list(data_home.rglob("*.cfg"))
    assert stored, "the keyring file should be under XDG_DATA_HOME"
    assert KEY not in result.stderr and KEY not in result.stdout
