"""Images stored once, by content, through the real daemon: a picture a user
sends twice is one blob; GetTask, Replay and the model's requests still carry
it (also after a restart); GetBlob returns it; `hdspd check` finds a record
whose blob is gone. The 30 MB plot from a cell is in test_media_e2e.py."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from PIL import Image

from hdsp.client import CommandFailed, connect
from hdsp.protocol import CellOutput, ErrorCode, MessageEvent
from tests.fakes.openai_server import FakeOpenAI, ToolCall
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, logged_events

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


def _stored_bytes(daemon: DaemonProcess) -> int:
    """Bytes of every value in the database (see test_media_e2e)."""
    db = _database(daemon)
    try:
        total = 0
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            lengths = " + ".join(f"coalesce(length({c}), 0)" for c in columns)
            total += db.execute(f"SELECT coalesce(sum({lengths}), 0) FROM {table}").fetchone()[0]
        return int(total)
    finally:
        db.close()


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
    stored_before = _stored_bytes(daemon)
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("What is this?", workspace=tmp_path, images=[_URL])
        await collect_turn(client, ref.task_id, head)
        head = (await client.status()).head_seq
        await client.send_message(ref.task_id, "And this?", images=[_URL])
        await collect_turn(client, ref.task_id, head)
        grew = _stored_bytes(daemon) - stored_before
        print(f"a {len(_PNG):,}-byte picture sent twice: the database grew {grew:,} bytes")
        # Before: six copies of its base64 (about 6 x 1.33 x its size).
        assert grew < len(_PNG) + 50_000
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


_PLOT = """\
import io, random
from PIL import Image
from IPython.display import Image as Show, display
im = Image.frombytes("RGB", (300, 300), random.Random(7).randbytes(300 * 300 * 3))
buf = io.BytesIO()
im.save(buf, format="PNG")
display(Show(data=buf.getvalue()))
"""


@pytest.mark.slow
async def test_a_plot_from_a_cell_is_stored_once_and_shown_whole(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        FakeReply.tool_calls([ToolCall("execute_code", json.dumps({"code": _PLOT}))]),
        FakeReply.text("A plot."),
    )
    stored_before = _stored_bytes(daemon)
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task(
            "Plot", workspace=tmp_path, approvals={"always_allow_execute": True}
        )
        await collect_turn(client, ref.task_id, head)
        snap = await client.get_task(ref.task_id)
    (cell,) = [m for m in snap.messages if m.say == "cell_output"]
    (output,) = msgspec.json.decode(cell.text or "", type=CellOutput).outputs
    assert output.data is not None
    plot = base64.b64decode(output.data["image/png"])
    with Image.open(io.BytesIO(plot)) as shown:
        assert shown.size == (300, 300)
    # Before: in the cell's UI message, its event and the model's history.
    grew = _stored_bytes(daemon) - stored_before
    print(f"a {len(plot):,}-byte plot: the database grew {grew:,} bytes")
    assert grew < len(plot) + 50_000
    db = _database(daemon)
    try:
        assert db.execute("SELECT size FROM blobs").fetchall() == [(len(plot),)]
    finally:
        db.close()
    assert _image_urls(fake_openai.requests[-1]) == [
        "data:image/png;base64," + base64.b64encode(plot).decode()
    ]


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
