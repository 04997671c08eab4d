"""The journal: the one path by which the daemon changes durable state and
publishes events.

Everything goes through one bounded queue, in order. The writer takes what has
queued up (a batch), assigns each durable event the next global `seq`, commits the
batch's writes and event rows in one transaction, and only then publishes the
batch's events, durable and live-only alike, in queue order. So a client never
sees an event that a crash could take back, and a live-only partial update never
overtakes the durable event before it. Batching keeps the cost per event low
under load (group commit); an idle daemon commits each event as it comes.

Being the one path, it is also the last line of defence for secrets: every event
body and every text or bytes parameter of a write passes the daemon's scrubber
(:mod:`hdsp.daemon.scrubber`) on its encoded bytes, so that a key that slipped
past the scrubbing where foreign text enters is neither stored nor published.

A commit that fails never ends the daemon (see :mod:`.health`):

- a fault that may pass (disk full, I/O error, a lost connection to the
  PostgreSQL server) makes the storage *failing*: the writer keeps the batch,
  publishes none of it, and commits it again with backoff until it goes through
  (and so for the lookup of a new topic's last seq, which a batch may need
  first); meanwhile what is emitted queues behind it (the queue is bounded: a
  task that emits into a full queue waits there, so memory stays bounded) and
  the storage is *ok* again on the first commit that passes.
- damage makes the storage *read-only*: the batch and everything queued after it
  is dropped unpublished (clients never see what was not committed), and
  whoever waits on it gets :class:`StorageUnavailable`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import structlog
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hdsp.daemon.scrubber import scrubber
from hdsp.protocol import (
    ClineMessage,
    Event,
    MessageEvent,
    MessagePayload,
    Say,
    StorageState,
    TaskEvent,
    encodable_text,
    encode,
    event_task_id,
    is_durable,
)

from .database import Write
from .errors import StorageUnavailable
from .health import Fault
from .store import Store
from .writes import latest_writes, save_ui_message

__all__ = ["BatchPublisher", "Journal", "Publisher"]

log = structlog.get_logger("hdsp.store")

#: Sends one event: (topic, body). Topic is the task id, b"" for daemon-wide.
Publisher = Callable[[bytes, bytes], Awaitable[None]]
#: Sends a committed batch's events, in order (the server's is cheaper per event).
BatchPublisher = Callable[[Sequence[tuple[bytes, bytes]]], Awaitable[None]]

#: What every encoded body and write parameter passes through (see the module doc).
_scrub = scrubber.scrub_json


def _scrubbed(write: Write) -> Write:
    """`write` with its parameters scrubbed, and its text made encodable (a file
    name that is not UTF-8 spelled `\\xff`: `hdsp.protocol.file_names`)."""
    sql, params = write
    clean = tuple(
        _scrub(p)
        if isinstance(p, bytes)
        else scrubber.scrub(encodable_text(p))
        if isinstance(p, str)
        else p
        for p in params
    )
    return write if all(a is b for a, b in zip(clean, params, strict=True)) else (sql, clean)


_MAX_BATCH = 1024
#: Commits between WAL checkpoints (each commit adds a few pages to the WAL; this
#: keeps it at a few megabytes, like SQLite's own default of 1000 pages).
CHECKPOINT_EVERY = 250
#: Backoff between attempts to commit a batch while the storage fails (seconds).
RETRY_FIRST = 0.05
RETRY_MAX = 1.0


@dataclass(slots=True)
class _Item:
    event: Event | None = None
    writes: Sequence[Write] = ()
    relay_client_id: str | None = None
    done: anyio.Event | None = None
    error: list[BaseException] = field(default_factory=list)
    #: A flush for a read: released, not failed, when the storage fails.
    for_read: bool = False


def _encoded(
    event: Event, seq: int | None, prev_seq: int, item: _Item
) -> tuple[bytes, Write | None]:
    """The scrubbed body of `event` (durable: numbered `seq`), and for a message
    event the write that stores its message. Text that JSON cannot carry is
    spelled as `hdsp.protocol.file_names` says (the codec does it); anything else
    that cannot be encoded raises."""
    envelope = TaskEvent(
        data=event, seq=seq, prev_seq=prev_seq, relay_client_id=item.relay_client_id
    )
    raw = encode(envelope)
    body = _scrub(raw)
    if seq is None or not isinstance(event, MessageEvent):
        return body, None
    p = event.payload[0]
    message = encode(p.message)  # a part of `raw`: clean if it was
    if body is not raw:
        message = _scrub(message)
    return body, save_ui_message(p.task_id, p.message.ts, message)


def _unwritable(item: _Item, exc: Exception) -> Event | None:
    """`item` cannot be stored (its event or writes do not encode): logged, and
    whoever waits on it gets the error. A message event is replaced by an error
    message at its place (its ts), so that the task's history says so; any
    other is dropped with its writes."""
    event = item.event
    log.error(
        "an event could not be encoded: dropped, the daemon goes on",
        event_name=type(event).__name__,
        task_id=event_task_id(event) if event is not None else None,
        error=f"{type(exc).__name__}: {exc}"[:500],
    )
    item.error.append(exc)
    if not isinstance(event, MessageEvent):
        return None
    p = event.payload[0]
    text = (
        f"This message could not be stored ({type(exc).__name__}), and was dropped; "
        "the task goes on. The daemon's log has the details."
    )
    message = ClineMessage(ts=p.message.ts, type="say", say=Say.ERROR, text=text)
    return MessageEvent(payload=(MessagePayload(p.task_id, p.action, message),))


class Journal:
    def __init__(
        self,
        store: Store,
        publish: Publisher,
        capacity: int = 4096,
        *,
        publish_batch: BatchPublisher | None = None,
    ) -> None:
        self._store = store
        self._monitor = store.monitor
        #: Whether the backend keeps a log that wants checkpoints (SQLite's WAL).
        self._checkpoints_log = store.db.checkpoints_log
        self._publish = publish
        self._publish_batch = publish_batch or self._publish_each
        send, receive = anyio.create_memory_object_stream[_Item](capacity)
        self._send: MemoryObjectSendStream[_Item] = send
        self._receive: MemoryObjectReceiveStream[_Item] = receive
        self._head_seq = 0
        self._last_by_topic: dict[str, int] = {}
        self._stopped = anyio.Event()
        self._commits_since_checkpoint = 0
        #: Items queued and not yet published (handed to a waiting writer too).
        self._unpublished = 0
        self._closing = False
        self._checkpoint_due = anyio.Event()
        #: flush_for_read() calls waiting (released when the storage fails).
        self._read_waiters: set[anyio.Event] = set()

    @property
    def head_seq(self) -> int:
        """The newest seq committed (and so published or about to be)."""
        return self._head_seq

    def statistics(self) -> dict[str, Any]:
        s = self._send.statistics()
        return {"queued": s.current_buffer_used, "capacity": s.max_buffer_size}

    async def emit(self, event: Event, *writes: Write, relay_client_id: str | None = None) -> None:
        """Queue an event (and writes that must commit with it). Returns once queued;
        waits while the queue is full."""
        if not (writes or self._unpublished or self._closing or is_durable(event)):
            # A live-only event with nothing ahead of it to commit or publish goes
            # out at once: the writer's turn would only add a trip through the loop
            # (kernel status and output, streaming text), and order is kept.
            topic = (event_task_id(event) or "").encode()
            await self._publish(
                topic, _scrub(encode(TaskEvent(data=event, relay_client_id=relay_client_id)))
            )
            return
        await self._queue(_Item(event, writes, relay_client_id))

    async def write(self, *writes: Write) -> None:
        """Queue writes with no event; they commit in order with everything else."""
        await self._queue(_Item(None, writes))

    async def _queue(self, item: _Item) -> None:
        # Straight in while there is room: a trip through the event loop per event
        # would cost more than the commit.
        self._unpublished += 1
        try:
            try:
                self._send.send_nowait(item)
            except anyio.WouldBlock:
                await self._send.send(item)
        except BaseException:
            self._unpublished -= 1  # never queued
            raise

    async def flush(self) -> None:
        """Wait until everything queued before this call is committed and published
        (while the storage fails, until it is again). Raises StorageUnavailable when
        the storage is read-only."""
        if not (self._unpublished or self._closing):
            return  # nothing is queued: the store has it all (and no trip through the loop)
        item = _Item(done=anyio.Event())
        await self._queue(item)
        assert item.done is not None
        await item.done.wait()
        if item.error:
            raise item.error[0]

    async def flush_for_read(self) -> None:
        """Like `flush`, before a read that should see what was emitted; but while
        the storage cannot write, returns at once: the read then sees what is
        committed, which is what clients were shown."""
        if not (self._unpublished or self._closing) or not self._monitor.writable:
            return
        item = _Item(done=anyio.Event(), for_read=True)
        assert item.done is not None
        self._read_waiters.add(item.done)
        try:
            await self._queue(item)
            await item.done.wait()
        finally:
            self._read_waiters.discard(item.done)

    async def announce(self, event: Event) -> None:
        """Publish a live-only event now, ahead of anything queued (what the
        storage's failure is: it cannot wait for a commit)."""
        assert not is_durable(event)
        topic = (event_task_id(event) or "").encode()
        await self._publish(topic, encode(TaskEvent(data=event)))

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        # Each topic's last seq is looked up when the topic first emits (one index
        # lookup each), not for every task at start-up (a pass over the whole log).
        self._head_seq = await self._store.read(self._store.db.head_seq)
        task_status.started()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._checkpoints)
                await self._write_loop()
                tg.cancel_scope.cancel()
        finally:
            self._stopped.set()

    async def _write_loop(self) -> None:
        async with self._receive:
            while True:
                try:
                    first = await self._receive.receive()
                except anyio.EndOfStream:
                    return
                # Let what was woken with the first item run on before committing:
                # more of a burst joins the batch, and a task that queued events
                # and then sends a request gets it out first (the commit runs
                # while the answer is on its way).
                await anyio.lowlevel.checkpoint()
                batch = [first]
                while len(batch) < _MAX_BATCH:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                try:
                    if self._monitor.state is StorageState.READ_ONLY:
                        self._drop(batch)
                    else:
                        await self._commit_and_publish(batch)
                finally:
                    self._unpublished -= len(batch)

    async def _checkpoints(self) -> None:
        """Keep the WAL short, beside the writer rather than inside its commits."""
        while True:
            await self._checkpoint_due.wait()
            self._checkpoint_due = anyio.Event()
            self._commits_since_checkpoint = 0
            try:
                await self._store.checkpoint()
            except self._store.errors as exc:
                # Nothing is lost: the commits are in the WAL, which only grows
                # until a later checkpoint gets through.
                log.warning(
                    "WAL checkpoint failed; will retry after more commits (check the "
                    "data dir's disk space and permissions)",
                    error=str(exc),
                )

    async def aclose(self) -> None:
        """Stop taking items, let the writer finish what is queued, and wait for it."""
        self._closing = True
        await self._send.aclose()
        await self._stopped.wait()

    async def _commit_and_publish(self, batch: list[_Item]) -> None:
        now = int(time.time() * 1000)
        seq = self._head_seq
        # The batch's newest seq per topic, apart from those committed before it
        # (copying that map, an entry per task, would cost more than the batch
        # once the tasks run into thousands).
        known = self._last_by_topic
        last_by_topic: dict[str, int] = {}
        writes: list[Write] = []
        rows: list[tuple[int, str, int, bytes]] = []
        frames: list[tuple[bytes, bytes]] = []
        for item in batch:
            event = item.event
            if event is None:
                writes.extend(_scrubbed(w) for w in item.writes)
                continue
            topic = event_task_id(event) or ""
            if topic not in known:
                last = await self._last_seq_of(topic)
                if last is None:
                    self._drop(batch)  # read-only meanwhile: nothing of it is durable
                    return
                known[topic] = last
            prev_seq = last_by_topic.get(topic) or known[topic]
            durable = is_durable(event)
            try:
                item_writes = [_scrubbed(w) for w in item.writes]
                body, message = _encoded(event, seq + 1 if durable else None, prev_seq, item)
            except Exception as exc:  # one record the store cannot take: never the writer
                replacement = _unwritable(item, exc)
                if replacement is None:
                    continue
                body, message = _encoded(replacement, seq + 1, prev_seq, item)
                item_writes = []
            writes.extend(item_writes)
            if durable or message is not None:
                seq += 1
                last_by_topic[topic] = seq
                rows.append((seq, topic, now, body))
            if message is not None:
                writes.append(message)
            frames.append((topic.encode(), body))
        if writes or rows:
            if not await self._commit(latest_writes(writes), rows):
                self._drop(batch)  # damage: nothing of it is durable, none published
                return
            self._commits_since_checkpoint += 1
            if self._commits_since_checkpoint >= CHECKPOINT_EVERY and self._checkpoints_log:
                self._checkpoint_due.set()
        self._head_seq = seq
        known.update(last_by_topic)
        await self._publish_batch(frames)
        for item in batch:
            if item.done is not None:
                item.done.set()

    async def _publish_each(self, frames: Sequence[tuple[bytes, bytes]]) -> None:
        for topic, body in frames:
            await self._publish(topic, body)

    async def _last_seq_of(self, topic: str) -> int | None:
        """The newest committed seq of `topic`: an index lookup, on the loop's
        thread unless a worker thread has the reader (or the database is a
        server). While the storage fails (a lost connection), again and again
        with backoff, as a commit; None once it is read-only."""
        delay = RETRY_FIRST
        while True:
            try:
                try:
                    return self._store.read_now(self._store.db.last_seq_of, topic)
                except anyio.WouldBlock:
                    return await self._store.read(self._store.db.last_seq_of, topic)
            except StorageUnavailable as exc:
                if self._monitor.state is StorageState.READ_ONLY:
                    return None
                self._failing(exc, "a topic's last seq could not be read: holding the batch")
            await anyio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    def _failing(self, exc: BaseException, what: str, **facts: Any) -> None:
        """The storage fails (the first time: logged, and reported)."""
        if self._monitor.writable:
            log.error(what, error=str(exc), **facts)
            self._monitor.failing(exc)
            for done in self._read_waiters:
                done.set()  # reads go on with what is committed

    async def _commit(self, writes: list[Write], rows: list[tuple[int, str, int, bytes]]) -> bool:
        """Commit one batch; while the storage fails, again and again with backoff
        until it goes through (True) or damage is found (False)."""
        delay = RETRY_FIRST
        while True:
            try:
                with anyio.CancelScope(shield=True):
                    await self._store.commit(writes, rows)
            except self._store.errors as exc:
                fault = self._store.db.classify(exc)
                if fault is Fault.DAMAGE or fault is None:
                    # None: a statement the database refuses (a bug); no retry can help,
                    # and going on without the batch would lose it silently.
                    log.error(
                        "commit failed: the database is read-only from now on", error=str(exc)
                    )
                    self._monitor.damaged(exc)
                    return False
                self._failing(
                    exc,
                    "commit failed: holding the batch and retrying until the storage takes it",
                    events=len(rows),
                )
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            if not self._monitor.writable:
                log.info("commit went through: the storage takes writes again")
                self._monitor.recovered()
            return True

    def _drop(self, batch: list[_Item]) -> None:
        """The storage is read-only: nothing of `batch` is committed or published;
        whoever waits on it learns why."""
        error = StorageUnavailable(self._monitor.message(), details=self._monitor.details())
        for item in batch:
            if item.done is not None:
                if not item.for_read:
                    item.error.append(error)
                item.done.set()
