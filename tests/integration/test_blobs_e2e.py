"""Images stored once, by content, through the real daemon: a picture a user
sends twice is one blob; GetTask, Replay and the model's requests still carry
it (also after a restart); GetBlob returns it; `hdspd check` finds a record
whose blob is gone. The 30 MB plot from a cell is in test_media_e2e.py."""

from __future__ import annotations

import base64
import hashlib
import io
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from hdsp.client import CommandFailed, connect
from hdsp.protocol import ErrorCode, MessageEvent
from tests.daemon_process import DaemonProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply

from .events_util import collect_turn, logged_events

pytestmark = [pytest.mark.timeout(120)]


def _noise_png() -> bytes:
    """A 200 x 200 picture of noise: about 120 KB of PNG."""
    out = io.BytesIO()
    Image.frombytes("RGB", (200, 200), random.Random(13).randbytes(200 * 200 * 3)).save(
        out, format="PNG"
    )
    return out.getvalue()


_PNG = _noise_png()
_B64 = base64.b64encode(_PNG).decode()
_URL = "data:image/png;base64," + _B64
_SHA = hashlib.sha256(_PNG).hexdigest()


def _database(daemon: DaemonProcess) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{daemon.data_dir / 'hdsp.sqlite3'}?mode=ro", uri=True)


def _copies_in_records(daemon: DaemonProcess) -> int:
    """Records (UI and API messages, events) that hold the picture's base64."""
    db = _database(daemon)
    try:
        return sum(
            db.execute(
                f"SELECT count(*) FROM {table} WHERE instr(body, ?) > 0", (_B64[:200].encode(),)
            ).fetchone()[0]
            for table in ("ui_messages", "api_messages", "events")
        )
    finally:
        db.close()


def _image_urls(request: dict[str, object]) -> list[str]:
    urls = []
    for message in request["messages"]:  # type: ignore[attr-defined]
        content = message.get("content")
        if isinstance(content, list):
            urls += [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
    return urls


def _check(daemon: DaemonProcess) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hdsp.daemon", "check"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_picture_sent_twice_is_stored_once_and_shown_after_a_restart(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        FakeReply.text("Noise."), FakeReply.text("The same noise."), FakeReply.text("Still.")
    )
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("What is this?", workspace=tmp_path, images=[_URL])
        await collect_turn(client, ref.task_id, head)
        head = (await client.status()).head_seq
        await client.send_message(ref.task_id, "And this?", images=[_URL])
        await collect_turn(client, ref.task_id, head)
        assert await client.blob(_SHA) == ("image/png", _PNG)
        part = await client.get_blob(_SHA, offset=100, length=50)
        assert (part.size, part.offset, base64.b64decode(part.data)) == (
            len(_PNG),
            100,
            _PNG[100:150],
        )
        with pytest.raises(CommandFailed) as missing:
            await client.get_blob("0" * 64)
        assert missing.value.code is ErrorCode.BLOB_NOT_FOUND
        with pytest.raises(CommandFailed) as bad:
            await client.get_blob("../etc/passwd")
        assert bad.value.code is ErrorCode.INVALID_REQUEST
    # Two messages, each in a UI message, an event and the API history: six
    # records, one copy of the picture's bytes.
    db = _database(daemon)
    try:
        blobs = db.execute("SELECT sha256, media_type, size FROM blobs").fetchall()
    finally:
        db.close()
    assert blobs == [(_SHA, "image/png", len(_PNG))]
    assert _copies_in_records(daemon) == 0

    daemon.stop()
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        snap = await client.get_task(ref.task_id)
        shown = [m.images for m in snap.messages if m.images]
        assert shown == [[_URL], [_URL]]
        replayed = [
            e.data.payload[0].message.images
            for e in (await logged_events(client)).values()
            if isinstance(e.data, MessageEvent) and e.data.payload[0].message.images
        ]
        assert replayed and all(images == [_URL] for images in replayed)
        head = (await client.status()).head_seq
        await client.send_message(ref.task_id, "Once more, from the stored history")
        await collect_turn(client, ref.task_id, head)
    assert _image_urls(fake_openai.requests[-1]) == [_URL, _URL]
    sound = _check(daemon)
    assert sound.returncode == 0 and sound.stdout.startswith("ok:"), sound


async def test_hdspd_check_names_a_record_whose_picture_is_missing(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("Noise."))
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("What is this?", workspace=tmp_path, images=[_URL])
        await collect_turn(client, ref.task_id, head)
    daemon.stop()
    db = sqlite3.connect(daemon.data_dir / "hdsp.sqlite3")
    db.execute("DELETE FROM blobs")
    db.commit()
    db.close()
    damaged = _check(daemon)
    assert damaged.returncode == 1, damaged
    assert f"refers to blob {_SHA}, which is missing" in damaged.stdout
    assert f"task {ref.task_id}, UI message" in damaged.stdout
