"""Providers built from profiles and secrets, in-process, with the real SDKs
against the wire-level fakes: the right key reaches the server, and a changed
profile or secret gives a rebuilt provider."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from keyrings.alt.file import PlaintextKeyring

from hdsp.daemon.config import ConfigService, ProfileNotFound, Profiles, SecretStore, SettingsStore
from hdsp.daemon.config.profiles import DEMO_PROFILE
from hdsp.daemon.config.provider_kinds import PROVIDER_KINDS
from hdsp.daemon.conversation import ApiMessage, ModelRequest, TextBlock
from hdsp.daemon.llm.errors import AuthenticationFailed
from hdsp.daemon.llm.models import model_table
from hdsp.daemon.llm.registry import Providers
from hdsp.protocol import ProfileData, SaveProfileData
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.keyrings import LockedKeyring
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-first-key-0123456789abcdefghij"
NEW_KEY = "sk-second-key-9876543210zyxwvutsr"

REQUEST = ModelRequest(
    system="You are terse.",
    messages=[ApiMessage(role="user", content=[TextBlock(text="hi")], ts=1)],
    max_tokens=256,
)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
async def config(tmp_path: Path) -> ConfigService:
    keyring = PlaintextKeyring()
    keyring.file_path = str(tmp_path / "keyring_pass.cfg")
    store = SettingsStore(tmp_path / "settings.json")
    await store.load()
    secrets = SecretStore(backend=keyring, env={"OPENAI_API_KEY": NEW_KEY})
    return ConfigService(store, secrets, Profiles(store, env={}), model_table=model_table)


@pytest.fixture
async def providers(config: ConfigService) -> AsyncIterator[Providers]:
    async with Providers(config.profiles, config.secrets) as providers:
        config.subscribe(providers.on_change)
        yield providers


async def ask(providers: Providers, profile: str) -> None:
    async with providers.get(profile).stream(REQUEST) as chunks:
        async for _ in chunks:
            pass


async def save(config: ConfigService, name: str, **fields: str) -> None:
    await config.save_profile(SaveProfileData(profile=ProfileData(name=name, **fields)))


async def test_the_profiles_secret_reaches_the_server_and_a_new_one_rebuilds(
    config: ConfigService, providers: Providers, fake_openai: FakeOpenAI
) -> None:
    work = {"provider": "openai-compatible", "base_url": fake_openai.base_url, "secret": "work-key"}
    await save(config, "work", model="gpt-test", **work)
    await config.set_secret("work-key", KEY)
    first = providers.get("work")
    assert providers.get("work") is first  # cached
    await ask(providers, "work")

    await config.set_secret("work-key", NEW_KEY)
    assert providers.get("work") is not first
    await ask(providers, "work")

    await save(config, "work", model="gpt-other", **work)
    await ask(providers, "work")

    received = fake_openai.received
    assert [r.headers["authorization"] for r in received] == [
        f"Bearer {KEY}",
        f"Bearer {NEW_KEY}",
        f"Bearer {NEW_KEY}",
    ]
    assert [r.body["model"] for r in received] == ["gpt-test", "gpt-test", "gpt-other"]


async def test_openai_profiles_without_a_secret_use_the_conventional_one(
    config: ConfigService, providers: Providers, fake_openai: FakeOpenAI
) -> None:
    await save(config, "gpt", provider="openai", model="gpt-4o", base_url=fake_openai.base_url)
    await ask(providers, "gpt")  # secret "openai": not in the keyring, so OPENAI_API_KEY
    assert fake_openai.received[0].headers["authorization"] == f"Bearer {NEW_KEY}"


async def test_anthropic_profiles_get_the_anthropic_provider(
    config: ConfigService, providers: Providers, fake_anthropic: FakeAnthropic
) -> None:
    await save(
        config,
        "claude",
        provider="anthropic",
        model="claude-sonnet-4-6",
        base_url=fake_anthropic.base_url,
        secret="anthropic",
    )
    await config.set_secret("anthropic", KEY)
    provider = providers.get("claude")
    assert provider.info().known
    await ask(providers, "claude")
    headers = fake_anthropic.received[0].headers
    # The SDK sends the key as x-api-key, or (newer versions) as a bearer token.
    assert headers.get("x-api-key", headers.get("authorization")) in (KEY, f"Bearer {KEY}")


async def test_each_kind_is_built_by_the_module_its_row_names(
    config: ConfigService, providers: Providers
) -> None:
    """A provider is one row (PROVIDER_KINDS) plus one module with its `build`:
    the registry knows no kind by name."""
    for row in PROVIDER_KINDS.values():
        module = importlib.import_module(f"hdsp.daemon.llm.{row.module}")
        assert callable(module.build), row.kind
    # Two profiles of the demo kind: both answer (from the one demo server the
    # registry keeps, closed with it).
    await save(config, "demo-2", provider="demo", model="demo")
    await ask(providers, DEMO_PROFILE)
    await ask(providers, "demo-2")
    assert providers.get("demo-2").model == providers.get(DEMO_PROFILE).model


async def test_model_overrides_from_the_settings_apply(
    config: ConfigService, providers: Providers
) -> None:
    await save(config, "local", provider="openai-compatible", model="llama3.1", base_url="http://x")
    assert providers.get("local").info().known is False
    await config.update({"models": {"llama3.1": {"context_window": 131072, "input_price": 0}}})
    info = providers.get("local").info()
    assert (info.context_window, info.known) == (131072, True)


async def test_unknown_and_missing_profiles(config: ConfigService, providers: Providers) -> None:
    with pytest.raises(ProfileNotFound, match="No provider profile is configured"):
        providers.get(None)
    with pytest.raises(ProfileNotFound, match=r"'nope'.*Known: demo"):
        providers.get("nope")
    await config.select_profile("demo")
    assert providers.resolve_name(None) == "demo"


async def test_a_key_that_cannot_be_read_fails_the_request_with_advice(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    store = SettingsStore(tmp_path / "settings.json")
    await store.load()
    await store.update(
        {
            "profiles": {
                "work": {
                    "provider": "openai-compatible",
                    "model": "gpt-test",
                    "base_url": fake_openai.base_url,
                    "secret": "work-key",
                }
            }
        }
    )
    secrets = SecretStore(backend=LockedKeyring(), env={})
    async with Providers(Profiles(store, env={}), secrets) as providers:
        with pytest.raises(AuthenticationFailed, match=r"could not be read.*locked"):
            await ask(providers, "work")
    assert fake_openai.received == []
