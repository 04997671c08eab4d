"""Secrets never leave the daemon's memory, through the real daemon: a provider that
quotes the key back in a 401 does not get it into the events, the snapshots, the
database file, the log or `hdsp show`; and base URLs with credentials in them are
shown without them by `hdsp config export`, `hdsp config get` and `hdsp profile list`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from hdsp.client import connect
from hdsp.protocol import Ask, MessageEvent, Say, encode
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import run_hdsp_sync
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.events import collect_turn, texts

pytestmark = pytest.mark.slow

#: Keys as providers issue them: one of a known shape, one that only the daemon's
#: list of known values can recognise.
KEYS = {
    "shaped": "sk-proj-Q7vX2mN9pL4kR8tY1wE6zA3sD5fG0hJcBnMvLqWe",
    "opaque": "Zt8Wq3Lm7Xp2Vn6Rk9Yb4Hs1Jd5Fg0Mc",
}


@pytest.fixture
def daemon() -> Iterator[DaemonProcess]:
    proc = DaemonProcess(short_tmp_dir())
    try:
        with proc:
            yield proc
    finally:
        proc.cleanup()


def _hdsp(
    daemon: DaemonProcess, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"HDSP_RUNTIME_DIR": str(daemon.runtime_dir), "NO_COLOR": "1"}
    return run_hdsp_sync(env, *args, stdin=stdin)


def _database_bytes(data_dir: Path) -> bytes:
    """The SQLite database and its write-ahead log, raw."""
    return b"".join(
        path.read_bytes() for path in sorted(data_dir.glob("hdsp.sqlite3*")) if path.is_file()
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(KEYS))
async def test_a_key_echoed_in_a_401_is_nowhere_but_the_user_learns_it_was_rejected(
    daemon: DaemonProcess, kind: str
) -> None:
    key = KEYS[kind]
    with FakeOpenAI() as fake:
        fake.script(FakeReply.unauthorized_echoing_key())
        async with connect(daemon.runtime_dir) as c:
            await c.set_secret("leaky", key)
            await c.save_profile(
                "leaky",
                provider="openai-compatible",
                model="gpt-test",
                base_url=fake.base_url,
                secret="leaky",
                select=True,
            )
            head = (await c.status()).head_seq
            ref = await c.start_task("analyse the data")
            with anyio.fail_after(30):
                events = await collect_turn(c, ref.task_id, head)
            snapshot = await c.get_task(ref.task_id)
            # The server did get the key, and quoted it back.
            received = fake.received[0].headers["authorization"]
            assert received == f"Bearer {key}"

            errors = texts(events, Say.ERROR)
            assert len(errors) == 1
            assert "HTTP 401" in errors[0] and "API key was rejected" in errors[0]
            assert "[secret:leaky]" in errors[0]  # which key, not what it is
            assert snapshot.pending_ask is not None
            assert snapshot.pending_ask.ask == Ask.API_REQ_FAILED
            assert "HTTP 401" in (snapshot.pending_ask.text or "")

            needle = key.encode()
            for event in events:
                assert needle not in encode(event), event
            assert any(isinstance(e.data, MessageEvent) for e in events)
            assert needle not in encode(snapshot)
            assert needle not in _database_bytes(daemon.data_dir)

        shown = await anyio.to_thread.run_sync(_hdsp, daemon, "show", ref.task_id)
        assert shown.returncode == 0, shown.stderr
        assert "HTTP 401" in shown.stdout + shown.stderr
        assert key not in shown.stdout + shown.stderr
        assert key not in daemon.stderr()

    daemon.stop()
    # After the last checkpoint too.
    assert needle not in _database_bytes(daemon.data_dir)
    assert key not in daemon.stderr()


@pytest.mark.timeout(90)
async def test_credentials_in_a_base_url_are_not_exported_nor_listed(
    daemon: DaemonProcess,
) -> None:
    url = "https://ana:pa55-w0rd-123@llm.example.invalid/v1?api_key=Qx9Kf2Lw7Zp4&region=eu"
    async with connect(daemon.runtime_dir) as c:
        await c.save_profile("proxied", provider="openai-compatible", model="m", base_url=url)

    def run(*args: str) -> str:
        done = _hdsp(daemon, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    outputs = {
        "export": await anyio.to_thread.run_sync(run, "config", "export"),
        "profile list": await anyio.to_thread.run_sync(run, "profile", "list"),
        "config get": await anyio.to_thread.run_sync(run, "config", "get"),
    }
    for what, out in outputs.items():
        for secret in ("ana", "pa55-w0rd-123", "Qx9Kf2Lw7Zp4"):
            assert secret not in out, (what, out)
        assert "llm.example.invalid/v1" in out and "region=eu" in out, (what, out)
    assert (
        "https://[REDACTED]@llm.example.invalid/v1?api_key=[REDACTED]&region=eu"
        in (outputs["profile list"])
    )

    # The export imported again keeps the URL (the redacted one matches it) ...
    document = json.loads(_hdsp(daemon, "config", "export").stdout)
    async with connect(daemon.runtime_dir) as c:
        result = await c.import_settings(document)
        assert result.rejected == []
        # ... the daemon still has the real URL (it is in its settings file) ...
        settings_file = json.loads((daemon.data_dir / "settings.json").read_text())
        assert settings_file["profiles"]["proxied"]["base_url"] == url
        # ... and a redacted URL for a profile that has no such URL is refused.
        stranger = json.loads(json.dumps(document))
        stranger["profiles"]["other"] = dict(stranger["profiles"]["proxied"], name="other")
        result = await c.import_settings(stranger)
        assert [r.path for r in result.rejected] == ["profiles.other.base_url"]
        assert "hidden as [REDACTED]" in result.rejected[0].reason
        assert "other" not in [p.name for p in (await c.list_profiles()).profiles]


@pytest.mark.timeout(60)
async def test_a_plaintext_keyring_is_reported_as_plain_text(daemon: DaemonProcess) -> None:
    set_out = await anyio.to_thread.run_sync(
        lambda: _hdsp(daemon, "secret", "set", "openai", stdin="sk-test-0123456789abcdefghij\n")
    )
    assert set_out.returncode == 0, set_out.stderr
    assert "stored in plain text at" in set_out.stdout
    assert "keyring_pass.cfg" in set_out.stdout
    for args in (("profile", "list"), ("daemon", "status")):
        out = await anyio.to_thread.run_sync(lambda a=args: _hdsp(daemon, *a))
        assert out.returncode == 0, out.stderr
        assert "stored in plain text at" in out.stdout and "keyring_pass.cfg" in out.stdout
