"""The scrubber: every credential shape, known values (overlapping, inside longer
text, in JSON-escaped form), no false positives on prose and hashes; and the
places that use it: provider errors, the journal's stored and published bytes,
and the settings' base URLs."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import msgspec
import pytest

from hdsp.daemon.config import ConfigService, Profiles, SecretStore, SettingsStore
from hdsp.daemon.llm.errors import status_error
from hdsp.daemon.llm.models import model_table
from hdsp.daemon.scrubber import REDACTED, SECRET_SHAPES, SecretScrubber, scrubber, url_credentials
from hdsp.daemon.store import Journal, Store
from hdsp.protocol import (
    ClineMessage,
    HistoryItem,
    MessageEvent,
    MessagePayload,
    TaskState,
    decode_event,
)
from tests.daemon.store.journals import create_task

# ---- shapes -------------------------------------------------------------------------

SHAPED = {
    "private key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n"
        "-----END OPENSSH PRIVATE KEY-----",
        REDACTED,
    ),
    "provider key": ("sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t", REDACTED),
    "anthropic key": ("sk-ant-api03-Xy7Zw4Vu1Ts8Rq5Po2Nm", REDACTED),
    "bearer token": ("Bearer abc123def456ghi789", f"Bearer {REDACTED}"),
    "authorization header": ("x-api-key: 9f8e7d6c5b4a39281706", f"x-api-key: {REDACTED}"),
    "AWS access key id": ("AKIAIOSFODNN7EXAMPLE", REDACTED),
    "GitHub token": ("ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2, REDACTED),
    "fine-grained GitHub token": ("github_pat_11ABCDEFG0123456789_abcdefXYZ", REDACTED),
    "Slack token": ("xoxb-1234567890-0987654321-AbCdEf", REDACTED),
    "Google API key": ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", REDACTED),
    "JSON web token": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
        REDACTED,
    ),
    "URL credentials": (
        "https://ana:s3cret-pw@db.example.invalid/x",
        f"https://{REDACTED}@db.example.invalid/x",
    ),
    "URL query credential": (
        "https://h.invalid/v1?model=m&api_key=Zx9Yw8&sig=ab12",
        f"https://h.invalid/v1?model=m&api_key={REDACTED}&sig={REDACTED}",
    ),
}


@pytest.mark.parametrize("name", sorted(SHAPED))
def test_each_credential_shape_is_hidden_inside_longer_text(name: str) -> None:
    secret, shown = SHAPED[name]
    s = SecretScrubber()
    assert s.scrub(f"before ({secret}) after") == f"before ({shown}) after"
    # The same in the journal's encoded JSON, which stays valid JSON.
    encoded = msgspec.json.encode({"text": f"x {secret} y"})
    scrubbed = s.scrub_json(encoded)
    assert json.loads(scrubbed) == {"text": f"x {shown} y"}


def test_every_shape_has_a_test() -> None:
    covered = {name.removeprefix("fine-grained ").removeprefix("anthropic ") for name in SHAPED}
    assert {shape.name for shape in SECRET_SHAPES} <= covered | {"key"}


PROSE = [
    "The mean of column x is 4.2; here is how it was computed.",
    "Bearer authentication is described in RFC 6750, with bearer tokens.",
    "Authorization: required for the admin page. The API-Key header is optional.",
    "task-0123456789abcdefghijklmnop and risk-assessment-for-the-quarter-2024",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b, sha256 "
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "uuid 931f5046-0255-4b10-8fa3-7d14a0f0fb97 at https://example.com/a?page=2&q=tokens",
    "Visit https://docs.python.org/3/library/re.html#re.Pattern for details.",
    "ASIA and AKIA are words; so are xoxo and AIza-less strings; eyJ alone is fine.",
    "max_tokens=512&key_count=3 in a query string without a '?'",
]


@pytest.mark.parametrize("text", PROSE)
def test_ordinary_prose_and_hashes_are_left_alone(text: str) -> None:
    s = SecretScrubber()
    s.add("a-registered-key-1234")
    assert s.scrub(text) is text
    assert s.scrub_json(text.encode()) == text.encode()


# ---- known values ------------------------------------------------------------------


def test_known_values_are_named_and_hidden_wherever_they_appear() -> None:
    s = SecretScrubber()
    key = "Zt8Wq3Lm7Xp2Vn6Rk9Yb"  # no known shape: only the list finds it
    s.add(key, name="work")
    s.add("  padded-value-42  ", name="pad")
    assert s.scrub(f"key={key};{key}") == "key=[secret:work];[secret:work]"
    assert s.scrub("xx padded-value-42 yy") == "xx [secret:pad] yy"
    assert key in s.known_values() and "padded-value-42" in s.known_values()


def test_short_values_are_not_registered() -> None:
    s = SecretScrubber()
    s.add("abc")
    s.add("        ")
    assert s.known_values() == frozenset()
    assert s.scrub("abc def abc") == "abc def abc"


def test_overlapping_and_nested_values_are_hidden_whole() -> None:
    s = SecretScrubber()
    s.add("abcdefgh12", name="a")
    s.add("gh12345678", name="b")  # overlaps the end of the first
    s.add("cdefgh1234", name="c")  # inside their union
    s.add("abcdefgh12-longer", name="d")  # contains the first
    out = s.scrub("<abcdefgh12345678> <abcdefgh12-longer>")
    assert out == "<[secret:a]> <[secret:d]>"
    for value in s.known_values():
        for piece in (value[:6], value[-6:]):
            assert piece not in out


def test_values_in_json_escaped_form_are_hidden_in_encoded_bytes() -> None:
    s = SecretScrubber()
    key = 'quo"te\\back-slash-42'
    s.add(key, name="odd")
    encoded = msgspec.json.encode({"text": f"the key {key}!"})
    assert json.loads(s.scrub_json(encoded)) == {"text": "the key [secret:odd]!"}


def test_a_string_without_secrets_is_returned_as_is() -> None:
    s = SecretScrubber()
    s.add("sk-known-0123456789abcdef")
    text = "nothing to see here " * 20
    data = text.encode()
    assert s.scrub(text) is text
    assert s.scrub_json(data) is data


def test_urls_are_shown_without_their_credentials() -> None:
    s = SecretScrubber()
    url = "https://user:pass@host.invalid:8443/v1?Api-Key=k1&access_token=t2&signature=x&x=1#f"
    assert s.scrub_url(url) == (
        f"https://{REDACTED}@host.invalid:8443/v1?Api-Key={REDACTED}"
        f"&access_token={REDACTED}&signature={REDACTED}&x=1#f"
    )
    assert s.scrub_url("https://tok3n@host/v1") == f"https://{REDACTED}@host/v1"
    assert s.scrub_url("http://localhost:11434/v1") == "http://localhost:11434/v1"
    assert url_credentials(url) == ["pass", "k1", "t2", "x"]


# ---- where it is used -------------------------------------------------------------------


def test_a_provider_error_that_echoes_the_key_does_not_carry_it() -> None:
    key = "Qm4Nb7Vc1Xz9Lk3Jh6Gf"
    scrubber.add(key, name="echo-test")
    error = status_error(
        401,
        f"Incorrect API key provided: {key}.",
        {},
        where="https://u:pw-123@proxy.invalid/v1",
        profile="p",
        model="m",
        has_key=True,
        key_hint="run `hdsp secret set p`",
        rate_limited=False,
        overloaded=False,
        out_of_credit=None,
        too_long=False,
        not_found_hint="",
        server_error_hint="",
    )
    assert key not in error.message and key not in str(error) and key not in repr(error)
    assert "pw-123" not in error.message
    assert "HTTP 401" in error.message and "[secret:echo-test]" in error.message


def _files_bytes(directory: Path) -> bytes:
    """The database, its WAL and whatever else SQLite wrote, raw."""
    return b"".join(p.read_bytes() for p in directory.iterdir() if p.is_file())


async def test_the_journal_stores_and_publishes_no_secret(tmp_path: Path) -> None:
    key = "Wd5Ry8Ui2Op6As9Df3Gh"
    scrubber.add(key, name="journal-test")
    published: list[bytes] = []

    async def publish(topic: bytes, body: bytes) -> None:
        published.append(body)

    db = tmp_path / "t.sqlite3"
    async with Store.open(db) as store:
        journal = Journal(store, publish)
        async with anyio.create_task_group() as tg:
            await tg.start(journal.run)
            item = HistoryItem(id="t", number=1, ts=1, task=f"use {key}", state=TaskState.IDLE)
            await create_task(journal, item)
            message = ClineMessage(ts=2, type="say", say="text", text=f"the key is {key}")
            await journal.emit(MessageEvent(payload=(MessagePayload("t", "created", message),)))
            partial = ClineMessage(ts=3, type="say", say="text", text=f"{key}", partial=True)
            await journal.emit(MessageEvent(payload=(MessagePayload("t", "updated", partial),)))
            await journal.flush()
            await journal.aclose()
            tg.cancel_scope.cancel()
    assert len(published) == 3
    for body in published:
        assert key.encode() not in body
        decode_event(body)  # still a valid event
    assert b"[secret:journal-test]" in published[1]
    raw = await anyio.to_thread.run_sync(_files_bytes, tmp_path)
    assert key.encode() not in raw


async def test_settings_views_hide_base_url_credentials(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "settings.json")
    await store.load()
    url = "https://ana:pw-0123456789@h.invalid/v1?key=Kq8Wz3Xc6Vb9"
    config = ConfigService(
        store, SecretStore(env={}), Profiles(store, env={}), model_table=model_table
    )
    await store.update(
        {
            "profiles": {
                "p": {"name": "p", "provider": "openai-compatible", "model": "m", "base_url": url}
            }
        }
    )
    shown = f"https://{REDACTED}@h.invalid/v1?key={REDACTED}"
    export = await config.export()
    view = await config.view()
    listing = await config.list_profiles()
    assert export.settings["profiles"]["p"]["base_url"] == shown
    assert view.settings["profiles"]["p"]["base_url"] == shown
    assert [p.base_url for p in listing.profiles if p.name == "p"] == [shown]
    # The daemon keeps the real URL, and its credentials are known values now.
    assert store.settings.profiles["p"].base_url == url
    await config.update({"current_profile": "p"})
    assert "pw-0123456789" in scrubber.known_values()
    # Saving the shown URL back keeps the real one; an unknown redacted URL is refused.
    await config.update({"profiles": {"p": {"base_url": shown}}})
    assert store.settings.profiles["p"].base_url == url
    with pytest.raises(Exception, match="hidden as"):
        await config.update(
            {
                "profiles": {
                    "q": {"name": "q", "provider": "openai", "model": "m", "base_url": shown}
                }
            }
        )
