"""The checks the TaskManager's parts share (no daemon process): a new task's
workspace (hdsp.daemon.tasks.workspaces), the MCP servers a client offers it
(hdsp.daemon.tasks.mcp_offers), and a task made to have calls relayed into it
(hdsp.daemon.tasks.relayed) over a real SQLite store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from anyio.abc import TaskGroup

from hdsp.daemon.errors import BadRequest, NotServed, ShuttingDown
from hdsp.daemon.tasks.loaded import LoadedTasks
from hdsp.daemon.tasks.mcp_offers import MAX_OFFERED_MCP_SERVERS, offer_mcp
from hdsp.daemon.tasks.relayed import RelayedCalls
from hdsp.daemon.tasks.workspaces import TaskWorkspaces
from hdsp.protocol import CallToolData, CreateTaskData, OfferedMcpServer, TaskCreated, TaskState
from tests.support.task_parts import open_parts

pytestmark = pytest.mark.timeout(30)


async def test_a_workspace_must_be_a_directory(tmp_path: Path) -> None:
    workspaces = TaskWorkspaces(str(tmp_path))
    assert await workspaces.directory(None) == str(tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(BadRequest, match="is not a directory"):
        await workspaces.directory(str(tmp_path / "file"))
    with pytest.raises(BadRequest, match="is not a directory"):
        await workspaces.checked(str(tmp_path / "missing"), allow_broad=True)


async def test_a_daemon_directory_is_no_workspace_unless_a_person_says_so(
    tmp_path: Path,
) -> None:
    private = tmp_path / "data"
    (private / "inside").mkdir(parents=True)
    workspaces = TaskWorkspaces(str(tmp_path), private_dirs=[private])
    assert await workspaces.breadth(str(tmp_path)) is None
    assert "hdspd's own directory" in (await workspaces.breadth(str(private / "inside")) or "")
    with pytest.raises(BadRequest, match=r"Refusing .* as the workspace"):
        await workspaces.checked(str(private / "inside"), allow_broad=False)
    allowed = await workspaces.checked(str(private / "inside"), allow_broad=True)
    assert allowed == str(private / "inside")


class Hub:
    def __init__(self) -> None:
        self.offered: list[tuple[str, str, list[str]]] = []

    def offer(self, task_id: str, workspace: str, servers: Sequence[OfferedMcpServer]) -> None:
        self.offered.append((task_id, workspace, [s.name for s in servers]))

    def forget_task(self, task_id: str) -> None:
        pass


def _server(name: str) -> OfferedMcpServer:
    return OfferedMcpServer(name=name, command="true")


def test_offered_mcp_servers_are_checked_before_the_hub_gets_them() -> None:
    hub = Hub()
    offer_mcp(hub, "t", "/ws", None)  # nothing said: nothing offered
    offer_mcp(hub, "t", "/ws", [_server("a"), _server("b")])
    assert hub.offered == [("t", "/ws", ["a", "b"])]
    with pytest.raises(BadRequest, match="share a name"):
        offer_mcp(hub, "t", "/ws", [_server("a"), _server("a")])
    too_many = [_server(f"s{i}") for i in range(MAX_OFFERED_MCP_SERVERS + 1)]
    with pytest.raises(BadRequest, match="a task takes at most"):
        offer_mcp(hub, "t", "/ws", too_many)
    offer_mcp(None, "t", "/ws", [])  # no hub, and nothing offered: fine
    with pytest.raises(NotServed):
        offer_mcp(None, "t", "/ws", [_server("a")])
    assert len(hub.offered) == 1


async def test_a_task_for_relayed_calls_is_created_idle_and_numbered(tmp_path: Path) -> None:
    async with open_parts(tmp_path) as parts:
        loaded = LoadedTasks(parts.deps)
        closing = [False]
        numbers = iter(range(7, 100))

        def check_open() -> None:
            if closing[0]:
                raise ShuttingDown("The daemon is shutting down.")

        def no_task_group() -> TaskGroup:
            raise AssertionError("a refused call starts nothing")

        relayed = RelayedCalls(
            parts.deps,
            loaded,
            TaskWorkspaces(str(parts.workspace)),
            check_open=check_open,
            next_number=lambda: next(numbers),
            task_group=no_task_group,
        )
        ref = await relayed.create_task(CreateTaskData(title="Relayed work"))
        assert ref.state is TaskState.IDLE
        created = [e.payload for e in await parts.of(TaskCreated) if isinstance(e, TaskCreated)]
        assert created == [(ref.task_id,)]
        task = loaded.get(ref.task_id)
        assert task is not None and task.item.number == 7
        assert [m.text for m in await parts.stored_messages(ref.task_id)] == ["Relayed work"]
        # The tools registry of these parts is empty: no tool may be relayed.
        with pytest.raises(BadRequest, match="There is no tool named"):
            await relayed.call_tool(ref.task_id, CallToolData(tool="read_file", arguments={}))
        closing[0] = True
        with pytest.raises(ShuttingDown):
            await relayed.create_task(CreateTaskData(title="Too late"))
