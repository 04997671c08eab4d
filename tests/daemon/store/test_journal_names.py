"""The journal's writer never dies on one record (issue 32, hole 4): text that
JSON cannot carry (a file name that is not UTF-8) is stored and published with
the escapes of `hdsp.protocol.file_names`; a record that cannot be encoded at
all is logged and replaced, and the writer goes on. On real SQLite and
PostgreSQL (`store_location`)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from hdsp.daemon.store import Store
from hdsp.protocol import (
    ClineMessage,
    HistoryItem,
    MessageEvent,
    MessagePayload,
    Say,
    TaskState,
    TaskTodoListUpdated,
)
from tests.daemon.store.journals import Published, create_task, running_journal

_NAME = "r\udcff.csv"  # os.fsdecode(b"r\xff.csv")
_ITEM = HistoryItem(id="t", number=1, ts=1, task="t", state=TaskState.IDLE)


def _said(task_id: str, ts: int, text: str, **fields: object) -> MessageEvent:
    message = ClineMessage(ts=ts, type="say", say=Say.TEXT, text=text, **fields)  # type: ignore[arg-type]
    return MessageEvent(payload=(MessagePayload(task_id, "created", message),))


async def test_a_name_that_is_not_utf8_is_stored_and_published_escaped(
    store_location: Path | str,
) -> None:
    out = Published()
    item = HistoryItem(id="t", number=1, ts=1, task=f"look at {_NAME}", state=TaskState.IDLE)
    async with Store.open(store_location) as store:
        async with running_journal(store, out.publish) as journal:
            await create_task(journal, item)
            await journal.emit(_said("t", 10, f"saw {_NAME}", checkpoint={"changed": [_NAME]}))
            await journal.emit(_said("t", 11, "after"))
            await journal.flush()
        assert [e.seq for e in out.events] == [1, 2, 3]
        said = out.events[1].data
        assert isinstance(said, MessageEvent)
        assert said.payload[0].message.text == "saw r\\xff.csv"
        assert said.payload[0].message.checkpoint == {"changed": ["r\\xff.csv"]}
        snapshot = store.db.snapshot("t")
        assert snapshot is not None
        row, bodies, head = snapshot
        assert head == 3
        texts = [msgspec.json.decode(b, type=ClineMessage).text for b in bodies]
        assert texts == ["saw r\\xff.csv", "after"]
        assert msgspec.json.decode(row[4], type=HistoryItem).task == "look at r\\xff.csv"


async def test_a_record_that_cannot_be_encoded_is_replaced_and_the_writer_goes_on(
    store_location: Path | str,
) -> None:
    out = Published()
    async with Store.open(store_location) as store:
        async with running_journal(store, out.publish) as journal:
            await create_task(journal, _ITEM)
            await journal.emit(_said("t", 10, "before"))
            # (A value no JSON encoder takes: a bug of some tool, never the writer's end.)
            await journal.emit(_said("t", 11, "broken", checkpoint={"x": complex(1, 2)}))
            await journal.emit(TaskTodoListUpdated(payload=("t", [], complex(1, 2))))  # type: ignore[arg-type]
            await journal.emit(_said("t", 12, "after"))
            await journal.flush()
        messages = [
            e.data.payload[0].message for e in out.events if isinstance(e.data, MessageEvent)
        ]
        assert [(m.ts, m.say) for m in messages] == [(10, "text"), (11, "error"), (12, "text")]
        assert "could not be stored" in (messages[1].text or "")
        assert [e.seq for e in out.events] == [1, 2, 3, 4]  # the todo list was dropped
        snapshot = store.db.snapshot("t")
        assert snapshot is not None
        stored = [msgspec.json.decode(b, type=ClineMessage) for b in snapshot[1]]
        assert [(m.ts, m.say) for m in stored] == [(10, "text"), (11, "error"), (12, "text")]
