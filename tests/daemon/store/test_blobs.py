"""Images stored once, by content: on real SQLite files and a real PostgreSQL
server, through the database's own commit and reads (the daemon end to end is
tests/integration/test_blobs_e2e.py)."""

from __future__ import annotations

import base64
import hashlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from hdsp.daemon.store import (
    Database,
    SqliteDatabase,
    append_api_message,
    delete_ui_message,
    insert_task,
    open_database,
    save_ui_message,
)
from hdsp.daemon.store.blobs import MIN_BLOB_CHARS, extract_blobs, resolve_references
from hdsp.daemon.store.dialect import SQLITE
from hdsp.daemon.store.migrations import MIGRATIONS, SCHEMA_VERSION
from hdsp.daemon.store.sqlite import statements
from hdsp.protocol import ClineMessage, HistoryItem, encode, parse_blob_reference
from tests.support.stored_database import full_check, rows, run_sql

_RAW = os.urandom(30_000)
_B64 = base64.b64encode(_RAW).decode()
_SHA = hashlib.sha256(_RAW).hexdigest()
_URL = "data:image/png;base64," + _B64


def _ui(ts: int, **fields: object) -> bytes:
    return encode(ClineMessage(ts=ts, type="say", say="text", **fields))  # type: ignore[arg-type]


def _cell(ts: int) -> bytes:
    text = msgspec.json.encode(
        {
            "kernelId": "k",
            "code": "plot()",
            "status": "ok",
            "outputs": [
                {
                    "outputType": "display_data",
                    "data": {"image/png": _B64, "text/plain": "<Figure>"},
                }
            ],
        }
    ).decode()
    return encode(ClineMessage(ts=ts, type="say", say="cell_output", text=text))


def _api() -> bytes:
    return msgspec.json.encode(
        {
            "role": "user",
            "ts": 1,
            "content": [
                {
                    "type": "tool_result",
                    "toolUseId": "t",
                    "content": [
                        {"type": "text", "text": "[image 1: image/png]"},
                        {"type": "image", "media_type": "image/png", "data": _B64},
                    ],
                },
            ],
        }
    )


def _stored(location: Path | str, table: str) -> list[bytes]:
    return [bytes(r[0]) for r in rows(location, f"SELECT body FROM {table}")]


def test_every_record_form_round_trips_byte_for_byte() -> None:
    bodies = [_ui(1, images=[_URL, _B64]), _cell(2), _api()]
    stored = [extract_blobs(b) for b in bodies]
    for body, _ in stored:
        assert _B64.encode() not in body and b"hdsp-blob:" in body
    blobs = {b.sha256: (b.media_type, b.data) for _, found in stored for b in found}
    assert list(blobs) == [_SHA] and blobs[_SHA][1] == _RAW
    back = resolve_references([("t", body) for body, _ in stored], lambda t, h: blobs)
    assert back == bodies


def test_small_odd_and_absent_images_stay_inline() -> None:
    small = base64.b64encode(os.urandom(MIN_BLOB_CHARS // 2)).decode()
    wrapped = "\n".join(_B64[i : i + 76] for i in range(0, len(_B64), 76))  # not canonical
    for body in (
        _ui(1, images=["data:image/png;base64," + small]),
        _ui(2, images=[wrapped]),
        _ui(3, text="an image/png of nothing " * 100),
    ):
        assert extract_blobs(body) == (body, [])


def test_a_read_past_its_budget_keeps_references_a_client_can_read() -> None:
    body, found = extract_blobs(_ui(1, images=[_URL, _URL]))
    blobs = {b.sha256: (b.media_type, b.data) for b in found}
    (partly,) = resolve_references([("t", body)], lambda t, h: blobs, budget=len(_B64) + 10)
    images = msgspec.json.decode(partly, type=ClineMessage).images
    assert images is not None and images[0] == _URL
    assert parse_blob_reference(images[1]) == (_SHA, "image/png")
    # A missing blob leaves its reference too.
    assert resolve_references([("t", body)], lambda t, h: {}) == [body]


@pytest.fixture
def db(store_location: Path | str) -> Iterator[Database]:
    """A store with task t, on each backend (`store_location`)."""
    database = open_database(store_location)
    item = HistoryItem(id="t", number=1, ts=1, task="x")
    database.commit([insert_task(item)], [])
    yield database
    database.close()


def test_an_image_in_three_records_and_sent_twice_is_stored_once(
    db: Database, store_location: Path | str
) -> None:
    event = msgspec.json.encode({"type": "TaskEvent", "data": {"message": {"images": [_URL]}}})
    db.commit(
        [save_ui_message("t", 1, _ui(1, images=[_URL])), append_api_message("t", 0, _api())],
        [(1, "t", 1, event)],
    )
    db.commit(
        [save_ui_message("t", 2, _ui(2, images=[_URL])), save_ui_message("t", 3, _cell(3))], []
    )
    found = rows(store_location, "SELECT sha256, media_type, size FROM blobs")
    assert found == [(_SHA, "image/png", len(_RAW))]
    for table in ("ui_messages", "api_messages", "events"):
        assert all(_B64[:100].encode() not in b for b in _stored(store_location, table))
    # Every read puts the images back: the engine's, GetTask's and Replay's.
    assert db.ui_message("t", 1) == _ui(1, images=[_URL])
    assert db.ui_messages("t")[2] == _cell(3)
    assert db.api_messages("t") == [_api()]
    assert db.api_messages("t", 10_000_000) is None  # not on the event loop's thread
    snap = db.snapshot("t")
    assert snap is not None and snap[1][1] == _ui(2, images=[_URL])
    assert db.replay(0, None, 10) == [event]
    media_type, size, head = db.blob(_SHA, 0, 10) or ("", 0, b"")
    assert (media_type, size, head) == ("image/png", len(_RAW), _RAW[:10])
    assert db.blob(_SHA, 29_995, 100) == ("image/png", len(_RAW), _RAW[29_995:])
    assert db.blob("0" * 64, 0, 10) is None
    db.close()
    assert full_check(store_location).ok


def test_an_image_no_record_shows_any_more_goes_when_its_events_are_pruned(
    db: Database, store_location: Path | str
) -> None:
    other_raw = os.urandom(30_000)
    other_url = "data:image/png;base64," + base64.b64encode(other_raw).decode()
    other_sha = hashlib.sha256(other_raw).hexdigest()
    shown = msgspec.json.encode({"type": "TaskEvent", "data": {"message": {"images": [_URL]}}})
    db.commit(
        [save_ui_message("t", 1, _ui(1, images=[_URL])), save_ui_message("t", 2, _ui(2))],
        [(1, "t", 1, shown)],
    )
    db.commit([save_ui_message("t", 3, _ui(3, images=[other_url]))], [(2, "t", 2, b"{}")])

    def blobs() -> set[str]:
        return {sha for (sha,) in rows(store_location, "SELECT sha256 FROM blobs")}

    # DeleteMessage removed the message with the image: the event that showed it
    # still does (Replay), so the image stays.
    db.commit([delete_ui_message("t", 1)], [(3, "t", 3, b"{}")])
    assert db.prune_events(before_ts=0, keep_last=3) == 0
    assert blobs() == {_SHA, other_sha}
    # Once that event is pruned nothing refers to it: it goes; the other stays.
    assert db.prune_events(before_ts=10, keep_last=1) == 2
    assert blobs() == {other_sha}
    assert db.ui_message("t", 3) == _ui(3, images=[other_url])
    assert full_check(store_location).ok
    db.close()


def test_the_full_check_reports_a_record_whose_blob_is_missing(
    db: Database, store_location: Path | str
) -> None:
    db.commit([save_ui_message("t", 1, _ui(1, images=[_URL]))], [])
    db.close()
    run_sql(store_location, "DELETE FROM blobs")
    report = full_check(store_location)
    assert report.problems == [f"task t, UI message 1 refers to blob {_SHA}, which is missing"]


def _forged_records(reference: str, bare: str) -> list[bytes]:
    """What another task's model, kernel or files can make it store: a reference
    in its text, in a text block of its API history, and in a mime bundle's
    image (a cell that displays the string as a PNG)."""
    text = _ui(10, text=f"See {reference} and {bare}")
    api = msgspec.json.encode(
        {"role": "assistant", "ts": 11, "content": [{"type": "text", "text": reference}]}
    )
    output = {"outputType": "display_data", "data": {"image/png": bare, "text/plain": bare}}
    cell = msgspec.json.encode({"kernelId": "k", "code": "x", "status": "ok", "outputs": [output]})
    shown = encode(ClineMessage(ts=12, type="say", say="cell_output", text=cell.decode()))
    image = msgspec.json.encode(
        {
            "role": "user",
            "ts": 13,
            "content": [{"type": "image", "media_type": "image/png", "data": bare}],
        }
    )
    return [text, api, shown, image]


def test_a_task_never_resolves_a_reference_to_a_blob_it_did_not_store(
    db: Database, store_location: Path | str
) -> None:
    db.commit([insert_task(HistoryItem(id="other", number=2, ts=2, task="y"))], [])
    db.commit([save_ui_message("t", 1, _ui(1, images=[_URL]))], [])
    reference = f"hdsp-blob:image/png;sha256,{_SHA}"
    bare = f"hdsp-blob:sha256,{_SHA}"
    text, api, shown, image = _forged_records(reference, bare)
    event = msgspec.json.encode({"type": "TaskEvent", "data": {"message": {"text": reference}}})
    db.commit(
        [
            save_ui_message("other", 10, text),
            append_api_message("other", 0, api),
            save_ui_message("other", 12, shown),
            append_api_message("other", 1, image),
        ],
        [(1, "other", 1, event)],
    )
    # The task that stored the image gets it back; the other sees what was written.
    assert db.ui_messages("t") == [_ui(1, images=[_URL])]
    assert db.ui_messages("other") == [text, shown]
    assert db.api_messages("other") == [api, image]
    snap = db.snapshot("other")
    assert snap is not None and snap[1] == [text, shown]
    assert db.replay(0, None, 10) == [event]
    assert db.ui_message("other", 12) == shown
    page = db.message_page("other", 0, None, 10)
    assert page is not None and [body for _, body in page[2]] == [text, shown]
    own = db.message_page("t", 0, None, 10)
    assert own is not None and own[2] == [(1, _ui(1, images=[_URL]))]
    assert all(_B64[:100].encode() not in b for b in db.ui_messages("other"))
    db.close()
    assert full_check(store_location).ok


def test_a_task_that_stored_the_same_image_itself_gets_it_back(
    db: Database, store_location: Path | str
) -> None:
    """Ownership is per task, not per blob: the same bytes stored by two tasks
    are one blob, and each task reads its own record whole."""
    db.commit([insert_task(HistoryItem(id="other", number=2, ts=2, task="y"))], [])
    db.commit([save_ui_message("t", 1, _ui(1, images=[_URL]))], [])
    db.commit(
        [save_ui_message("other", 1, _ui(1, images=[_URL])), save_ui_message("other", 2, _cell(2))],
        [],
    )
    assert db.ui_messages("other") == [_ui(1, images=[_URL]), _cell(2)]
    assert rows(store_location, "SELECT count(*) FROM blobs") == [(1,)]
    db.close()


def test_records_from_before_ownership_keep_their_images(tmp_path: Path) -> None:
    """A database of schema 3 (blobs, no record of who stored them): migrating
    gives each task the blobs its records refer to where an image belongs, and
    no more (a reference in text stays text)."""
    path = tmp_path / "v3.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:3]:
        for statement in statements(migration.script(SQLITE)):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
    item = msgspec.json.encode(HistoryItem(id="t", number=1, ts=1, task="x"))
    conn.execute("INSERT INTO tasks VALUES ('t', 1, 1, 'idle', ?, NULL)", (item,))
    conn.execute("INSERT INTO tasks VALUES ('u', 2, 2, 'idle', ?, NULL)", (item,))
    stored, found = extract_blobs(_ui(1, images=[_URL]))
    conn.execute("INSERT INTO blobs VALUES (?, 'image/png', ?, ?)", (_SHA, len(_RAW), _RAW))
    text = _ui(2, text=f"hdsp-blob:image/png;sha256,{_SHA}")
    conn.executemany("INSERT INTO ui_messages VALUES (?, ?, ?)", [("t", 1, stored), ("u", 2, text)])
    conn.close()
    assert [b.sha256 for b in found] == [_SHA]
    db = SqliteDatabase(path)
    assert db.schema_version() == SCHEMA_VERSION
    assert db.ui_messages("t") == [_ui(1, images=[_URL])]
    assert db.ui_messages("u") == [text]
    db.close()
    owners = sqlite3.connect(path).execute("SELECT task_id, sha256 FROM task_blobs").fetchall()
    assert owners == [("t", _SHA)]


def test_a_reference_in_a_task_that_does_not_own_the_blob_does_not_keep_it(
    db: Database,
) -> None:
    """Text that names a blob another task stored reads nothing back (`task_blobs`),
    so it keeps nothing alive: once the owner's records are gone, the blob goes."""
    reference = f"hdsp-blob:image/png;sha256,{_SHA}"
    db.commit([insert_task(HistoryItem(id="u", number=2, ts=2, task="y"))], [])
    db.commit([save_ui_message("t", 1, _ui(1, images=[_URL]))], [(1, "t", 1, b"{}")])
    db.commit([save_ui_message("u", 1, _ui(1, images=[reference]))], [(2, "u", 2, b"{}")])
    db.commit([delete_ui_message("t", 1)], [(3, "t", 3, b"{}")])
    assert db.prune_events(before_ts=10, keep_last=1) == 2
    assert db.blob(_SHA, 0, 1) is None  # gone from the blobs table
    assert db.ui_message("u", 1) == _ui(1, images=[reference])  # text, as it was
