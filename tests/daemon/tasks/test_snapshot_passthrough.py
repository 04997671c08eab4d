"""GetTask and GetTaskPage put a task's stored messages in the reply as they are
stored (the journal encoded and scrubbed them once), not decoded to be encoded
again: the reply frame holds the stored bytes themselves."""

from __future__ import annotations

import sqlite3

import zmq

from hdsp.daemon.paths import resolve_paths
from hdsp.daemon.store import SqliteDatabase, insert_task
from hdsp.protocol import (
    PROTOCOL_VERSION,
    Ack,
    ClientInfo,
    Connect,
    GetTask,
    GetTaskData,
    GetTaskPage,
    GetTaskPageData,
    HistoryItem,
    Reply,
    TaskCommand,
    TaskState,
    decode_server_message,
    encode,
)
from tests.support.daemon_process import DaemonProcess

TASK = "passthrough"
#: Valid, but not as msgspec writes it: an escaped é and a space after a colon.
#: Decoding and encoding again would give "café" and no space.
STORED = [
    b'{"ts": 1,"type":"say","say":"text","text":"caf\\u00e9"}',
    b'{"ts":2,"type":"say","say":"text","text":"na\\u00efve"}',
]


def _ask(sock: zmq.Socket[bytes], client_id: str, command: GetTask | GetTaskPage) -> bytes:
    sock.send(encode(TaskCommand(client_id=client_id, request_id="r", data=command)))
    frame = sock.recv()
    reply = decode_server_message(frame)
    assert isinstance(reply, Reply) and reply.ok, reply
    return frame


def test_stored_messages_go_out_as_stored(daemon_process: DaemonProcess) -> None:
    database = resolve_paths(daemon_process.data_dir, daemon_process.runtime_dir).database
    database.parent.mkdir(parents=True, exist_ok=True)
    SqliteDatabase(database).close()
    conn = sqlite3.connect(database, isolation_level=None)
    item = HistoryItem(id=TASK, number=1, ts=1, task="t", state=TaskState.IDLE)
    conn.execute(*insert_task(item))
    conn.executemany(
        "INSERT INTO ui_messages (task_id, ts, body) VALUES (?, ?, ?)",
        [(TASK, i + 1, body) for i, body in enumerate(STORED)],
    )
    conn.close()
    daemon_process.start()

    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 20_000)
    try:
        sock.connect(f"ipc://{daemon_process.runtime_dir / 'control'}")
        info = ClientInfo(name="test", version="0", kind="script")
        sock.send(encode(Connect(protocol_version=PROTOCOL_VERSION, client=info)))
        ack = decode_server_message(sock.recv())
        assert isinstance(ack, Ack)
        whole = _ask(sock, ack.data.client_id, GetTask(data=GetTaskData(task_id=TASK)))
        page = _ask(
            sock, ack.data.client_id, GetTaskPage(data=GetTaskPageData(task_id=TASK, limit=10))
        )
    finally:
        sock.close(0)
        ctx.term()
    for frame in (whole, page):
        assert b"[" + b",".join(STORED) + b"]" in frame, frame
