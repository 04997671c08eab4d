"""The real collaborators a task's parts need, without a daemon process: a SQLite
store with its journal (running), what the journal published, and a TaskDeps
over them, for the unit tests of hdsp.daemon.tasks' parts (tests/daemon/tasks/).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import msgspec

from hdsp.daemon.approvals import ApprovalPolicy
from hdsp.daemon.config import Profiles, Settings
from hdsp.daemon.llm.registry import Providers
from hdsp.daemon.store import Journal, Store, insert_task
from hdsp.daemon.tasks import TaskDeps
from hdsp.daemon.tasks.messages import TaskMessages
from hdsp.daemon.tools import Tool, ToolRegistry
from hdsp.protocol import ClineMessage, HistoryItem, MessageEvent, TaskEvent, decode_event

__all__ = ["TASK_ID", "Parts", "open_parts"]

TASK_ID = "task-1"


@dataclass
class Parts:
    store: Store
    journal: Journal
    deps: TaskDeps
    workspace: Path
    events: list[TaskEvent] = field(default_factory=list)

    def messages(self, task_id: str = TASK_ID) -> TaskMessages:
        return TaskMessages(task_id, self.store, self.journal, self.deps.clock)

    async def of(self, kind: type) -> list[object]:
        """The payloads of the published events of `kind` (once what is queued is)."""
        await self.journal.flush()
        return [e.data for e in self.events if isinstance(e.data, kind)]

    async def message_events(self) -> list[tuple[str, ClineMessage]]:
        """(created/updated, message) of every published message event, in order."""
        await self.journal.flush()
        out = []
        for e in self.events:
            if isinstance(e.data, MessageEvent):
                payload = e.data.payload[0]
                out.append((payload.action, payload.message))
        return out

    async def stored_messages(self, task_id: str = TASK_ID) -> list[ClineMessage]:
        await self.journal.flush()
        bodies = await self.store.read(self.store.db.ui_messages, task_id)
        return [msgspec.json.decode(b, type=ClineMessage) for b in bodies]


@asynccontextmanager
async def open_parts(
    tmp_path: Path,
    tools: list[Tool] | None = None,
    clock: Callable[[], int] | None = None,
) -> AsyncIterator[Parts]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    events: list[TaskEvent] = []

    async def publish(topic: bytes, body: bytes) -> None:
        events.append(decode_event(body))

    async with (
        Store.open(tmp_path / "hdsp.sqlite3") as store,
        Providers(Profiles(Settings(), env={})) as providers,
    ):
        journal = Journal(store, publish)
        deps = TaskDeps(
            store=store,
            journal=journal,
            providers=providers,
            tools=ToolRegistry(tools or []),
            approvals=ApprovalPolicy(),
        )
        if clock is not None:
            deps.clock = clock
        async with anyio.create_task_group() as tg:
            await tg.start(journal.run)
            item = HistoryItem(
                id=TASK_ID, number=1, ts=1, task="the task", workspace=str(workspace)
            )
            await journal.write(insert_task(item))
            yield Parts(store, journal, deps, workspace, events)
            await journal.aclose()
            tg.cancel_scope.cancel()
