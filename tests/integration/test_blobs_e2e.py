"""Images stored once, by content, through the real daemon: a picture a user
sends twice is one blob; GetTask, Replay and the model's requests still carry
it (also after a restart); GetBlob returns it; `hdspd check` finds a record
whose blob is gone; with the store on SQLite, then on PostgreSQL. The 30 MB plot
from a cell is in test_media_e2e.py."""

from __future__ import annotations

import base64
import hashlib
import io
from pathlib import Path

import msgspec
import pytest
from PIL import Image

from hdsp.client import CommandFailed, connect
from hdsp.daemon.store.dialect import POSTGRESQL, SQLITE
from hdsp.protocol import CellOutput, ErrorCode, MessageEvent
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, logged_events
from tests.support.model_requests import image_urls
from tests.support.noise_pictures import noise_plot_code, noise_png
from tests.support.scripted_turns import call
from tests.support.stored_database import (
    blob_sizes,
    check_database,
    rows,
    run_sql,
    store_of,
    stored_bytes,
)

pytestmark = [pytest.mark.timeout(120)]

#: On both backends: what is stored and read back, and `hdspd check`. (Which
#: task may read which blob is the `Database`'s, tested on both in
#: tests/daemon/store/test_blobs.py.)
both_stores = pytest.mark.parametrize("store_backend", ["sqlite", "postgresql"])


_PNG = noise_png(200, 200, seed=13)  # about 120 KB
_B64 = base64.b64encode(_PNG).decode()
_URL = "data:image/png;base64," + _B64
_SHA = hashlib.sha256(_PNG).hexdigest()


def _copies_in_records(daemon: DaemonProcess) -> int:
    """Records (UI and API messages, events) that hold the picture's base64."""
    location = store_of(daemon)
    dialect = SQLITE if isinstance(location, Path) else POSTGRESQL
    return sum(
        rows(
            location,
            f"SELECT count(*) FROM {table} WHERE {dialect.holds('body')}",
            (_B64[:200].encode(),),
        )[0][0]
        for table in ("ui_messages", "api_messages", "events")
    )


@both_stores
async def test_a_picture_sent_twice_is_stored_once_and_shown_after_a_restart(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        FakeReply.text("Noise."), FakeReply.text("The same noise."), FakeReply.text("Still.")
    )
    stored_before = stored_bytes(daemon)
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("What is this?", workspace=tmp_path, images=[_URL])
        await collect_turn(client, ref.task_id, head)
        head = (await client.status()).head_seq
        await client.send_message(ref.task_id, "And this?", images=[_URL])
        await collect_turn(client, ref.task_id, head)
        grew = stored_bytes(daemon) - stored_before
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
    blobs = rows(store_of(daemon), "SELECT sha256, media_type, size FROM blobs")
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
    assert image_urls(fake_openai.requests[-1]) == [_URL, _URL]
    sound = check_database(daemon)
    assert sound.returncode == 0 and sound.stdout.startswith("ok:"), sound


_PLOT = noise_plot_code(300, 300, seed=7)


@pytest.mark.slow
async def test_a_plot_from_a_cell_is_stored_once_and_shown_whole(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        call("execute_code", code=_PLOT),
        FakeReply.text("A plot."),
    )
    stored_before = stored_bytes(daemon)
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
    grew = stored_bytes(daemon) - stored_before
    print(f"a {len(plot):,}-byte plot: the database grew {grew:,} bytes")
    assert grew < len(plot) + 50_000
    assert blob_sizes(daemon) == [len(plot)]
    assert image_urls(fake_openai.requests[-1]) == [
        "data:image/png;base64," + base64.b64encode(plot).decode()
    ]


@both_stores
async def test_hdspd_check_names_a_record_whose_picture_is_missing(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("Noise."))
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("What is this?", workspace=tmp_path, images=[_URL])
        await collect_turn(client, ref.task_id, head)
    daemon.stop()
    sound = check_database(daemon)
    assert sound.returncode == 0, sound
    assert sound.stdout.startswith("ok: ")
    run_sql(store_of(daemon), "DELETE FROM blobs")
    damaged = check_database(daemon)
    assert damaged.returncode == 1, damaged
    assert f"refers to blob {_SHA}, which is missing" in damaged.stdout
    assert f"task {ref.task_id}, UI message" in damaged.stdout


@pytest.mark.slow
async def test_a_task_cannot_read_another_task_s_picture_by_naming_it(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A model (or its cell's output) that writes a reference to a picture of
    another task, in its text and where an image belongs (a mime bundle),
    stores and gets back that text: not the picture. Also after a restart,
    when the history the model reads comes from the store."""
    url_reference = f"hdsp-blob:image/png;sha256,{_SHA}"
    bare_reference = f"hdsp-blob:sha256,{_SHA}"
    forge = (
        f"print({url_reference!r})\n"
        f"display({{'image/png': {bare_reference!r}, 'text/plain': 'forged'}}, raw=True)"
    )
    said = f"Here it is: {url_reference}"
    fake_openai.script(
        FakeReply.text("Noise."),
        call("execute_code", code=forge),
        FakeReply.text(said),
        FakeReply.text("Again."),
    )
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        secret = await client.start_task("Keep this", workspace=tmp_path, images=[_URL])
        await collect_turn(client, secret.task_id, head)
        head = (await client.status()).head_seq
        ref = await client.start_task(
            "Show me", workspace=tmp_path, approvals={"always_allow_execute": True}
        )
        await collect_turn(client, ref.task_id, head)
    daemon.stop()
    daemon.start()
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        await client.send_message(ref.task_id, "And now?")
        await collect_turn(client, ref.task_id, head)
        snap = await client.get_task(ref.task_id)
        page = await client.replay(0, task_id=ref.task_id)
        assert not page.more
        replayed = msgspec.json.encode(page.events).decode()
        own = await client.get_task(secret.task_id)
    # The task that was given the picture still has it.
    assert [m.images for m in own.messages if m.images] == [[_URL]]
    request = msgspec.json.encode(fake_openai.requests[-1]).decode()
    assert _B64[:200] not in request and not image_urls(fake_openai.requests[-1])
    assert said in request and url_reference in request
    texts = [m.text or "" for m in snap.messages]
    assert said in texts
    (cell,) = [m for m in snap.messages if m.say == "cell_output"]
    outputs = msgspec.json.decode(cell.text or "", type=CellOutput).outputs
    bundles = [o.data for o in outputs if o.data]
    assert bundles and bundles[0]["image/png"] == bare_reference
    assert all(_B64[:200] not in t for t in texts)
    assert _B64[:200] not in replayed and said in replayed
