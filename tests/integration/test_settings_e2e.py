"""Settings, profiles and secrets through the real daemon: a saved profile and a
secret set over the socket reach the model server as its key; every client hears
of every change; exports carry no secret; and the secret's value shows up nowhere
it should not: not in an event, a reply, an export, the settings file or the log.

The daemon runs with keyrings.alt's PlaintextKeyring under the test's own temp dir
(tests/support/daemon_process.py), never the developer's keyring."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.client import Client, CommandFailed, connect
from hdsp.protocol import (
    ErrorCode,
    ModelsResponse,
    SettingsChange,
    SettingsChanged,
    TaskCompleted,
    TaskEvent,
    encode,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.support.daemon_process import DaemonProcess, call_failed, short_tmp_dir
from tests.support.events import collect_turn

pytestmark = pytest.mark.timeout(60)

# Not shaped like any well-known key, so that only the daemon's registration of
# the value (not the log's `sk-...` pattern) can be what hides it.
SECRET = "hdsp-e2e-" + "Zq7Xv3Lp9Tn2Wr5KmB8c" * 2
NEW_SECRET = "hdsp-e2e-" + "Yh4Gd6Fs1Ja8Ok3PlM0n" * 2

#: The conventional keys of the developer's shell must not leak into these daemons.
ISOLATED = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}


@contextmanager
def running_daemon(
    request: pytest.FixtureRequest, *args: str, env: dict[str, str] | None = None
) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(short_tmp_dir(), env=ISOLATED | (env or {}))
    try:
        yield proc
    finally:
        proc.finish(show_log=call_failed(request))


@pytest.fixture
def settings_daemon(request: pytest.FixtureRequest) -> Iterator[DaemonProcess]:
    with running_daemon(request) as proc:
        proc.start("--log-level", "debug")
        yield proc


@pytest.fixture
async def c(settings_daemon: DaemonProcess) -> AsyncIterator[Client]:
    async with connect(settings_daemon.runtime_dir, name="test") as client:
        yield client


async def save_work_profile(c: Client, fake: FakeOpenAI, **extra: Any) -> None:
    await c.save_profile(
        "work",
        provider="openai-compatible",
        model="gpt-test",
        base_url=fake.base_url,
        secret="work-key",
        **extra,
    )


async def run_turn(c: Client, text: str, *, profile: str | None = None) -> str:
    head = (await c.status()).head_seq
    ref = await c.start_task(text, profile=profile)
    events = await collect_turn(c, ref.task_id, head)
    assert isinstance(events[-1].data, TaskCompleted), events[-1]
    return ref.task_id


async def all_events(c: Client) -> list[TaskEvent]:
    events: list[TaskEvent] = []
    cursor = 0
    while True:
        page = await c.replay(cursor)
        events += page.events
        if not page.more:
            return events
        cursor = page.events[-1].seq or cursor


def changes(events: list[TaskEvent]) -> list[SettingsChange]:
    return [e.data.payload[0] for e in events if isinstance(e.data, SettingsChanged)]


async def test_a_saved_profile_and_its_secret_reach_the_model_server(
    c: Client, fake_openai: FakeOpenAI
) -> None:
    await save_work_profile(c, fake_openai)
    info = await c.set_secret("work-key", SECRET)
    assert (info.name, info.is_set, info.source) == ("work-key", True, "keyring")

    task_id = await run_turn(c, "Hello", profile="work")
    assert fake_openai.received[0].headers["authorization"] == f"Bearer {SECRET}"

    # A new value: the provider is rebuilt, the next request of the same task uses it.
    await c.set_secret("work-key", NEW_SECRET)
    head = (await c.status()).head_seq
    await c.send_message(task_id, "Again")
    await collect_turn(c, task_id, head)
    assert fake_openai.received[1].headers["authorization"] == f"Bearer {NEW_SECRET}"

    # The current profile is what a task that names none uses.
    listing = await c.select_profile("work")
    assert listing.current == "work"
    await run_turn(c, "Third")
    assert fake_openai.received[2].headers["authorization"] == f"Bearer {NEW_SECRET}"
    assert [r.body["model"] for r in fake_openai.received] == ["gpt-test"] * 3


async def test_every_client_hears_of_every_change(
    settings_daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    async with connect(settings_daemon.runtime_dir) as a, connect(settings_daemon.runtime_dir) as b:
        head = (await b.status()).head_seq
        await a.update_settings({"retry": {"max_attempts": 3}})
        await save_work_profile(a, fake_openai)
        await a.select_profile("work")
        await a.set_secret("work-key", SECRET)
        await a.delete_secret("work-key")
        await a.delete_profile("work")

        seen: list[SettingsChange] = []
        async with b.events(None, since_seq=head) as stream:
            async for event in stream:
                if isinstance(event.data, SettingsChanged):
                    seen.append(event.data.payload[0])
                    if len(seen) == 6:
                        break

    assert [(s.reason, s.keys) for s in seen] == [
        ("updated", ["retry"]),
        ("profileSaved", ["work"]),
        ("profileSelected", ["work"]),
        ("secretSet", ["work-key"]),
        ("secretDeleted", ["work-key"]),
        ("profileDeleted", ["work"]),
    ]
    assert all(s.client_id == a.client_id for s in seen)
    assert seen[2].current_profile == "work" and seen[5].current_profile is None


async def test_an_invalid_update_is_refused_with_its_fields(c: Client) -> None:
    before = await c.get_settings()
    with pytest.raises(CommandFailed) as caught:
        await c.update_settings(
            {"kernels": {"default_timeout_seconds": -1}, "retry": {"max_delay": "soon"}}
        )
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    assert "kernels.default_timeout_seconds" in caught.value.message
    paths = {e["path"] for e in caught.value.details["errors"]}
    assert paths == {"kernels.default_timeout_seconds", "retry.max_delay"}
    assert (await c.get_settings()).settings == before.settings

    with pytest.raises(CommandFailed, match="no profile is named 'ghost'"):
        await c.update_settings({"current_profile": "ghost"})
    with pytest.raises(CommandFailed, match="'demo' is built in"):
        await c.delete_profile("demo")
    with pytest.raises(CommandFailed, match="No provider profile named 'ghost'"):
        await c.start_task("hi", profile="ghost")


async def test_export_has_no_secret_and_import_reports_what_it_left_out(
    c: Client, fake_openai: FakeOpenAI
) -> None:
    await save_work_profile(c, fake_openai)
    await c.set_secret("work-key", SECRET)

    exported = await c.export_settings()
    assert SECRET.encode() not in encode(exported)
    assert exported.settings["profiles"]["work"]["secret"] == "work-key"
    assert exported.secret_names == ["work-key"]

    document = json.loads(json.dumps(exported.settings))
    document["profiles"]["local"] = {
        "provider": "openai-compatible",
        "model": "llama3.1",
        "base_url": "http://localhost:11434/v1",
    }
    document["profiles"]["broken"] = {"provider": "gemini", "model": "x"}
    document["profiles"]["leaky"] = {"provider": "openai", "model": "gpt-4o", "api_key": "k" * 20}
    document["kernels"] = {"default_timeout_seconds": 30}
    document["current_profile"] = "nowhere"

    result = await c.import_settings(document)

    rejected = {r.path: r.reason for r in result.rejected}
    assert set(rejected) == {
        "current_profile",
        "profiles.broken.provider",
        "profiles.leaky.api_key",
    }
    assert "hdsp secret set" in rejected["profiles.leaky.api_key"]
    assert {"profiles.work", "profiles.local", "kernels"} <= set(result.applied)
    names = [p.name for p in (await c.list_profiles()).profiles]
    assert names == ["demo", "local", "work"]
    assert result.settings["kernels"]["default_timeout_seconds"] == 30
    assert "k" * 20 not in json.dumps(result.settings)


async def test_get_models_replies_and_emits_models_response(c: Client) -> None:
    await c.update_settings({"models": {"llama3.1": {"context_window": 131072}}})
    head = (await c.status()).head_seq
    listing = await c.get_models("openai-compatible")
    ids = {m.id: m for m in listing.models}
    assert ids["llama3.1"].context_window == 131072 and ids["llama3.1"].source == "settings"
    assert "gpt-4o" in ids
    page = await c.replay(head)
    (event,) = [e.data for e in page.events if isinstance(e.data, ModelsResponse)]
    assert event.payload[0]["llama3.1"]["contextWindow"] == 131072
    every = await c.get_models()
    assert {"anthropic", "openai"} <= {m.provider for m in every.models}


async def test_the_secret_value_appears_nowhere(
    settings_daemon: DaemonProcess, fake_openai: FakeOpenAI
) -> None:
    replies: list[bytes] = []
    async with connect(settings_daemon.runtime_dir) as c:

        async def keep(result: Any) -> Any:
            replies.append(encode(result))
            return result

        await keep(await save_work_profile(c, fake_openai))
        await keep(await c.set_secret("work-key", SECRET))
        await keep(await c.select_profile("work"))
        task_id = await run_turn(c, "Use the key")
        await keep(await c.get_task(task_id))
        await keep(await c.list_tasks())
        await keep(await c.get_settings())
        await keep(await c.list_profiles())
        exported = await keep(await c.export_settings())
        await keep(await c.import_settings(exported.settings))
        await keep(await c.update_settings({"retry": {"max_attempts": 2}}))
        with pytest.raises(CommandFailed) as refused:
            await c.set_secret("bad name", SECRET)
        replies.append(refused.value.message.encode())
        await keep(await c.delete_secret("work-key"))
        events = await all_events(c)
    assert settings_daemon.stop() == 0

    assert fake_openai.received[0].headers["authorization"] == f"Bearer {SECRET}"  # it was used
    assert changes(events), "the changes were announced"
    needle = SECRET.encode()
    for event in events:
        assert needle not in encode(event), event
    for reply in replies:
        assert needle not in reply
    log = settings_daemon.stderr()
    assert "secret stored" in log  # the log did talk about it, by name
    assert SECRET not in log
    settings_file = settings_daemon.data_dir / "settings.json"
    assert SECRET not in settings_file.read_text()
    assert stat.S_IMODE(settings_file.stat().st_mode) == 0o600


async def test_a_corrupt_settings_file_is_reported_at_start(
    request: pytest.FixtureRequest,
) -> None:
    with running_daemon(request) as proc:
        proc.data_dir.mkdir(parents=True)
        garbage = '{"profiles": {"work": {"provider": "openai",'
        (proc.data_dir / "settings.json").write_text(garbage)
        proc.start()
        async with connect(proc.runtime_dir) as c:
            (change,) = changes(await all_events(c))
            view = await c.get_settings()
        assert change.reason == "recovered"
        assert change.message is not None and "settings.json.corrupt-" in change.message
        (problem,) = view.problems
        (kept,) = proc.data_dir.glob("settings.json.corrupt-*")
        assert kept.read_text() == garbage
        assert str(kept) in problem
        assert "settings file unusable" in proc.stderr()


async def test_without_a_keyring_setting_fails_and_the_environment_serves(
    request: pytest.FixtureRequest, fake_openai: FakeOpenAI
) -> None:
    env = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "OPENAI_API_KEY": SECRET}
    with running_daemon(request, env=env) as proc:
        proc.start()
        async with connect(proc.runtime_dir) as c:
            with pytest.raises(CommandFailed) as caught:
                await c.set_secret("openai", NEW_SECRET)
            assert caught.value.code == ErrorCode.UNAVAILABLE
            assert "PYTHON_KEYRING_BACKEND=keyrings.alt.file.PlaintextKeyring" in str(caught.value)

            info = await c.save_profile(
                "gpt", provider="openai", model="gpt-4o", base_url=fake_openai.base_url
            )
            assert (info.secret, info.secret_set) == ("openai", True)
            await run_turn(c, "Hello", profile="gpt")
        assert fake_openai.received[0].headers["authorization"] == f"Bearer {SECRET}"
        assert NEW_SECRET not in proc.stderr() and SECRET not in proc.stderr()


async def test_the_cli_manages_profiles_secrets_and_settings(
    settings_daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    hdsp = str(Path(sys.executable).parent / "hdsp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HDSP_")}
    env["HDSP_RUNTIME_DIR"] = str(settings_daemon.runtime_dir)

    async def run(*args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        done = await anyio.run_process([hdsp, *args], input=stdin, env=env, check=False)
        out, err = done.stdout.decode(), done.stderr.decode()
        assert SECRET not in out and SECRET not in err
        return done.returncode, out, err

    code, out, _ = await run(
        "profile", "add", "work", "--provider", "openai-compatible", "--model", "gpt-test",
        "--base-url", fake_openai.base_url, "--secret", "work-key",
    )  # fmt: skip
    assert code == 0 and "hdsp secret set work-key" in out
    code, out, _ = await run("secret", "set", "work-key", stdin=SECRET.encode() + b"\n")
    assert code == 0 and "stored" in out
    code, out, _ = await run("profile", "use", "work")
    assert code == 0 and "* work" in out and "key: work-key (set)" in out
    code, out, _ = await run("secret", "list")
    assert code == 0 and any(
        line.startswith("work-key") and "set (keyring)" in line for line in out.splitlines()
    )

    code, out, _ = await run("run", "Say hello")
    assert code == 0
    assert fake_openai.received[0].headers["authorization"] == f"Bearer {SECRET}"

    code, out, _ = await run("config", "set", "retry.max_attempts", "3")
    assert (code, out.strip()) == (0, "3")
    code, out, _ = await run("config", "get", "retry.max_attempts")
    assert (code, out.strip()) == (0, "3")
    code, out, _ = await run("config", "get", "profiles.work.secret")
    assert (code, json.loads(out)) == (0, "work-key")
    code, _, err = await run("config", "get", "no.such.key")
    assert code == 2 and "No setting 'no.such.key'" in err
    code, _, err = await run("config", "set", "kernels.default_timeout_seconds", "-5")
    assert code == 2 and "kernels.default_timeout_seconds" in err

    exported = tmp_path / "settings-export.json"
    code, _, err = await run("config", "export", str(exported))
    assert code == 0 and "work-key" in err
    assert stat.S_IMODE(exported.stat().st_mode) == 0o600
    document = json.loads(exported.read_text())
    assert document["profiles"]["work"]["secret"] == "work-key"

    document["profiles"]["bad"] = {"provider": "gemini", "model": "x"}
    incoming = tmp_path / "incoming.json"
    incoming.write_text(json.dumps(document))
    code, out, _ = await run("config", "import", str(incoming))
    assert code == 1
    assert "left out  profiles.bad.provider" in out and "imported  profiles.work" in out

    code, _, err = await run("secret", "set", "empty", stdin=b"\n")
    assert code == 2 and "empty" in err
    code, out, _ = await run("secret", "rm", "work-key")
    assert code == 0 and "removed" in out
    code, out, _ = await run("profile", "rm", "work")
    assert code == 0 and "No current profile" in out
    code, _, err = await run("profile", "rm", "work")
    assert code == 2 and "No saved profile is named 'work'" in err
