"""The settings store: validated, cached, written atomically and privately; a
corrupt file kept aside and reported; unknown keys kept; changes never lost."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest

from hdsp.daemon.config.provider_kinds import PROVIDER_KINDS, ProviderKind
from hdsp.daemon.config.settings import (
    SETTINGS_VERSION,
    Settings,
    SettingsError,
    SettingsInvalid,
    SettingsStore,
    merge_patch,
    migrate,
)
from hdsp.daemon.llm.models import PROVIDER_FAMILIES, list_models

_CORRUPT = re.compile(r"^settings\.json\.corrupt-\d{8}T\d{6}Z(-\d+)?$")

WORK_PROFILE = {
    "provider": "anthropic",
    "model": "claude-sonnet-4-6",
    "secret": "anthropic",
    "options": {"thinking_budget": 2048},
}


async def open_store(path: Path) -> SettingsStore:
    store = SettingsStore(path)
    await store.load()
    return store


def read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def corrupt_copies(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if _CORRUPT.match(p.name))


async def test_no_file_means_defaults_and_nothing_written(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "settings.json")
    assert store.settings == Settings()
    assert store.settings.kernels.default_timeout_seconds == 120
    assert store.settings.retry.max_delay == 600
    assert store.problems == []
    assert names_in(tmp_path) == []


async def test_an_update_is_written_atomically_and_privately(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    store = await open_store(path)
    await store.update({"profiles": {"work": WORK_PROFILE}, "current_profile": "work"})
    first_inode = path.stat().st_ino

    settings = await store.update({"retry": {"max_attempts": 4}})

    # A new file was renamed over the old one (never rewritten in place), it is
    # private, and no temporary file is left behind.
    assert path.stat().st_ino != first_inode
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert names_in(tmp_path) == ["settings.json"]
    on_disk = read_json(path)
    assert on_disk == settings.document()
    assert on_disk["version"] == SETTINGS_VERSION
    assert on_disk["profiles"]["work"]["name"] == "work"
    assert on_disk["retry"]["max_attempts"] == 4
    # The cache serves what was written, and a fresh load reads the same.
    assert store.settings is settings
    assert (await open_store(path)).settings == settings


async def test_a_failed_write_changes_nothing_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    store = await open_store(path)
    before = store.settings
    path.mkdir()  # renaming a file over a directory fails, for real, even for root
    with pytest.raises(SettingsError, match="Nothing was changed"):
        await store.update({"retry": {"max_attempts": 2}})
    assert store.settings is before
    assert names_in(tmp_path) == ["settings.json"]


async def test_a_corrupt_file_is_moved_aside_and_defaults_apply(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    garbage = b'{"profiles": {"work": '
    path.write_bytes(garbage)

    store = await open_store(path)

    assert store.settings == Settings()
    (kept,) = corrupt_copies(tmp_path)
    assert kept.read_bytes() == garbage
    assert store.moved_aside == kept
    assert not path.exists()
    assert len(store.problems) == 1
    assert "not a JSON object" in store.problems[0] and str(kept) in store.problems[0]
    # The next save writes a fresh file and keeps the corrupt copy.
    await store.update({"retry": {"max_attempts": 3}})
    assert read_json(path)["retry"]["max_attempts"] == 3
    assert kept.read_bytes() == garbage


@pytest.mark.parametrize("content", [b"", b"[1, 2]", b"\xff\xfe not utf-8", b'{"version": -3}'])
async def test_unreadable_documents_are_moved_aside_too(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(content)
    store = await open_store(path)
    assert store.settings == Settings()
    assert [p.read_bytes() for p in corrupt_copies(tmp_path)] == [content]
    assert store.problems


async def test_an_invalid_file_keeps_what_validates_and_reports_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    document = {
        "version": 1,
        "current_profile": "work",
        "profiles": {
            "work": WORK_PROFILE,
            "broken": {"provider": "gemini", "model": "x"},
        },
        "retry": {"base_delay": -1, "max_attempts": 3},
    }
    path.write_text(json.dumps(document))

    store = await open_store(path)

    s = store.settings
    assert list(s.profiles) == ["work"] and s.current_profile == "work"
    assert s.retry.max_attempts == 3 and s.retry.base_delay == 1.0  # the default
    (kept,) = corrupt_copies(tmp_path)
    assert json.loads(kept.read_text()) == document
    (problem,) = store.problems
    assert "profiles.broken.provider" in problem and "retry.base_delay" in problem


async def test_an_invalid_update_is_refused_whole_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    store = await open_store(path)
    await store.update({"profiles": {"work": WORK_PROFILE}})
    before_bytes, before_mtime = path.read_bytes(), path.stat().st_mtime_ns
    before = store.settings

    with pytest.raises(SettingsInvalid) as caught:
        await store.update(
            {
                "kernels": {"default_timeout_seconds": 0},
                "profiles": {"work": {"provider": "gemini"}},
                "retry": {"max_attempts": 5},  # valid, but refused with the rest
            }
        )

    paths = {e.path for e in caught.value.errors}
    assert paths == {"kernels.default_timeout_seconds", "profiles.work.provider"}
    assert "kernels.default_timeout_seconds" in str(caught.value)
    assert path.read_bytes() == before_bytes and path.stat().st_mtime_ns == before_mtime
    assert store.settings is before


@pytest.mark.parametrize(
    "patch",
    [
        {"profiles": {"x": {"provider": "openai", "model": "gpt-4o", "api_key": "sk-abc"}}},
        {"approvals": {"github_token": "ghp_1234567890"}},
        {"password": "hunter2hunter2"},
    ],
)
async def test_secret_values_never_enter_the_settings(tmp_path: Path, patch: Any) -> None:
    store = await open_store(tmp_path / "settings.json")
    with pytest.raises(SettingsInvalid, match="hdsp secret set"):
        await store.update(patch)
    assert not (tmp_path / "settings.json").exists()


async def test_unknown_keys_survive_a_load_and_save(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    document = {
        "version": 1,
        "from_the_future": {"nested": [1, 2, {"a": None}]},
        "profiles": {"work": {**WORK_PROFILE, "organization": "acme"}},
        "retry": {"max_attempts": 2, "jitter": "equal"},
        "kernels": {"default_timeout_seconds": 60, "env": {"A": "1"}},
        "models": {"my-model": {"context_window": 32000, "tokenizer": "llama"}},
    }
    path.write_text(json.dumps(document))
    store = await open_store(path)
    assert store.problems == []

    await store.update({"current_profile": "work"})

    saved = read_json(path)
    assert saved["from_the_future"] == {"nested": [1, 2, {"a": None}]}
    assert saved["profiles"]["work"]["organization"] == "acme"
    assert saved["retry"]["jitter"] == "equal"
    assert saved["kernels"]["env"] == {"A": "1"}
    assert saved["models"]["my-model"]["tokenizer"] == "llama"


async def test_a_newer_file_keeps_its_version(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": SETTINGS_VERSION + 5, "new_section": {"x": 1}}))
    store = await open_store(path)
    await store.update({"retry": {"max_attempts": 2}})
    saved = read_json(path)
    assert saved["version"] == SETTINGS_VERSION + 5
    assert saved["new_section"] == {"x": 1}


def test_migrate_brings_an_unversioned_document_up_to_date() -> None:
    assert migrate({"profiles": {}}) == {"profiles": {}, "version": SETTINGS_VERSION}
    with pytest.raises(SettingsInvalid, match="version"):
        migrate({"version": "two"})


async def test_a_file_readable_by_others_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}")
    os.chmod(path, 0o644)
    await open_store(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_concurrent_updates_are_all_applied(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    store = await open_store(path)

    async def add(i: int) -> None:
        await store.update({"models": {f"model-{i}": {"context_window": 1000 + i}}})

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(add, i)

    expected = {f"model-{i}" for i in range(40)}
    assert set(store.settings.models) == expected
    assert set(read_json(path)["models"]) == expected
    assert (await open_store(path)).settings == store.settings


def test_merge_patch_follows_rfc_7396() -> None:
    target = {"a": {"b": 1, "c": 2}, "d": [1, 2], "e": "x"}
    patch = {"a": {"b": None, "z": 3}, "d": [3], "e": None, "f": {"g": None}}
    assert merge_patch(target, patch) == {"a": {"c": 2, "z": 3}, "d": [3], "f": {}}
    assert target == {"a": {"b": 1, "c": 2}, "d": [1, 2], "e": "x"}  # untouched


async def test_null_restores_a_default(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "settings.json")
    await store.update({"kernels": {"default_timeout_seconds": 30}})
    settings = await store.update({"kernels": {"default_timeout_seconds": None}})
    assert settings.kernels.default_timeout_seconds == 120


async def test_an_import_applies_what_validates_and_reports_the_rest(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "settings.json")
    await store.update({"profiles": {"keep": WORK_PROFILE}, "retry": {"max_attempts": 7}})

    settings, rejected = await store.import_document(
        {
            "profiles": {
                "new": {"provider": "openai", "model": "gpt-4o"},
                "bad": {"provider": "openai"},  # no model
            },
            "retry": {"max_attempts": 0},  # below 1: the current value stays
            "kernels": {"interrupt_grace_seconds": 9},
        }
    )

    assert sorted(settings.profiles) == ["keep", "new"]
    assert settings.retry.max_attempts == 7
    assert settings.kernels.interrupt_grace_seconds == 9
    assert {r.path for r in rejected} == {"profiles.bad.model", "retry.max_attempts"}

    replaced, rejected = await store.import_document(
        {"profiles": {"only": {"provider": "demo", "model": "hdsp-demo"}}}, merge=False
    )
    assert list(replaced.profiles) == ["only"] and rejected == []
    assert replaced.retry.max_attempts == 5  # the default, not the old value


def test_profile_names_come_from_their_keys() -> None:
    settings = Settings.model_validate(
        {"profiles": {"work": {"name": "other", "provider": "openai", "model": "gpt-4o"}}}
    )
    assert settings.profiles["work"].name == "work"


def test_version_1_files_lose_the_unlimited_retries_they_were_written_with() -> None:
    # hdsp wrote every default into the file, so a version-1 file says
    # max_attempts: null whether or not anyone chose it: the finite default applies.
    old = {"version": 1, "retry": {"base_delay": 2.0, "max_attempts": None}}
    assert migrate(old) == {"version": SETTINGS_VERSION, "retry": {"base_delay": 2.0}}
    kept = {"version": 1, "retry": {"max_attempts": 9}}
    assert migrate(kept)["retry"] == {"max_attempts": 9}
    assert Settings.model_validate(migrate(old)).retry.max_attempts == 5


def test_the_provider_kinds_table_and_the_settings_literal_agree() -> None:
    """A profile's `provider` validates against the Literal; everything else reads
    the kinds' table: both name the same kinds, and every family has a model table."""
    assert set(get_args(ProviderKind)) == set(PROVIDER_KINDS)
    families = {row.family for row in PROVIDER_KINDS.values()} - {None}
    assert families == set(PROVIDER_FAMILIES.values()) == {"anthropic", "openai"}
    assert all(list_models(family) for family in families)


# ---- gateway (issue 25): kernels on a Jupyter server -------------------------------

_SERVER = {"url": "https://jupyter.example.org/user/ada/", "token_secret": "team-jupyter"}


async def test_a_jupyter_server_is_named_with_its_token_by_name(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "settings.json")
    patch = {"kernels": {"provider": "gateway", "gateway": {**_SERVER, "kernel_name": "py"}}}
    settings = await store.update(patch)
    assert settings.kernels.provider == "gateway"
    assert settings.kernels.gateway is not None
    assert settings.kernels.gateway.token_secret == "team-jupyter"
    # A profile may run its tasks' kernels elsewhere.
    profile = {**WORK_PROFILE, "kernels": {"provider": "local"}}
    settings = await store.update({"profiles": {"work": profile}})
    assert settings.profiles["work"].kernels is not None
    assert settings.profiles["work"].kernels.provider == "local"


@pytest.mark.parametrize(
    ("gateway", "says"),
    [
        ({"url": "http://127.0.0.1:8888/?token=abcdef0123456789"}, "must not carry credentials"),
        ({"url": "http://ada:pw-4711@127.0.0.1:8888/"}, "must not carry credentials"),
        ({"url": "ftp://127.0.0.1/"}, "http:// or https://"),
        ({**_SERVER, "token_secret": "9f" * 24}, "looks like a token itself"),
        ({**_SERVER, "token": "9f" * 24}, "looks like a secret value"),
    ],
)
async def test_a_token_written_into_the_settings_is_refused(
    tmp_path: Path, gateway: dict[str, str], says: str
) -> None:
    store = await open_store(tmp_path / "settings.json")
    with pytest.raises(SettingsInvalid, match=re.escape(says)):
        await store.update({"kernels": {"gateway": gateway}})
    assert not (tmp_path / "settings.json").exists()


async def test_the_gateway_provider_needs_a_server(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "settings.json")
    with pytest.raises(SettingsInvalid, match=re.escape("kernels.gateway first")):
        await store.update({"kernels": {"provider": "gateway"}})


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://hdsp:hunter2@db.example/hdsp",
        "postgres://me:@localhost/hdsp",
        "postgresql:///hdsp?password=hunter2",
        "postgresql:///hdsp?host=/run/postgresql&sslpassword=x",
    ],
)
async def test_a_store_url_never_holds_a_password(tmp_path: Path, url: str) -> None:
    store = await open_store(tmp_path / "settings.json")
    with pytest.raises(SettingsInvalid, match=r"must not hold a password.*store\.secret"):
        await store.update({"store": {"url": url}})
    assert not (tmp_path / "settings.json").exists()


async def test_a_store_url_names_a_postgres_database_and_a_secret_its_password(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "settings.json")
    with pytest.raises(SettingsInvalid, match="must be a PostgreSQL URL"):
        await store.update({"store": {"url": "sqlite:///tmp/x.db"}})
    url = "postgresql://hdsp@db.example:5432/hdsp?sslmode=require"
    await store.update({"store": {"url": url, "secret": "pg"}})
    assert store.settings.store.url == url and store.settings.store.secret == "pg"
    # The secret's *name* is what the file holds (as a profile's `secret`).
    assert read_json(tmp_path / "settings.json")["store"] == {"url": url, "secret": "pg"}
    await store.update({"store": None})
    assert store.settings.store.url is None
