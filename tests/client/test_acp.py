"""`hdsp acp` driven by the `agent-client-protocol` package's own client side as
the ACP host: a real adapter subprocess over stdio, a real hdspd, the scripted
model (tests/fakes)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentPlanUpdate,
    ContentToolCallContent,
    CurrentModeUpdate,
    EnvVariable,
    FileEditToolCallContent,
    McpServerStdio,
    NewSessionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from hdsp.client import Client
from hdsp.protocol import CellOutput, ExecuteCode, ExecutionResult, ListKernels, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.acp_host import AcpHost, agent_text, run_hdsp_acp, thought_text, tool_updates
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.host_processes import processes_mentioning
from tests.support.mcp_servers import BAD_SERVER
from tests.support.model_requests import tool_results
from tests.support.scripted_turns import call, done

pytestmark = pytest.mark.slow


@pytest.fixture
def workspace(workspace: Path) -> Path:
    (workspace / "data.csv").write_text("x,y\n1,2\n")
    return workspace


class Adapter:
    """A running `hdsp acp` and the host it talks to."""

    def __init__(self, host: AcpHost, conn: ClientSideConnection, process: Any) -> None:
        self.host = host
        self.conn = conn
        self.process = process

    async def new_session(self, cwd: Path, *servers: McpServerStdio) -> NewSessionResponse:
        """A session whose cwd is `cwd`, with the host's MCP `servers`."""
        return await self.conn.new_session(cwd=str(cwd), mcp_servers=list(servers))


@asynccontextmanager
async def adapter(daemon: DaemonProcess, tmp_path: Path) -> AsyncIterator[Adapter]:
    host = AcpHost()
    async with run_hdsp_acp(
        host, daemon.runtime_dir, tmp_path / "state", tmp_path / "acp.stderr"
    ) as (conn, process):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        caps = init.agent_capabilities
        assert caps is not None and caps.load_session
        assert caps.prompt_capabilities is not None and caps.prompt_capabilities.image
        assert caps.prompt_capabilities.embedded_context
        # The host's MCP servers: stdio (ACP's baseline) and Streamable HTTP, not SSE.
        assert caps.mcp_capabilities is not None
        assert caps.mcp_capabilities.http and not caps.mcp_capabilities.sse
        assert init.auth_methods == []
        yield Adapter(host, conn, process)


@pytest.fixture(autouse=True)
def _adapter_log_on_failure(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    yield
    report = getattr(request.node, "rep_call", None)
    log = tmp_path / "acp.stderr"
    if report is not None and report.failed and log.exists():
        print("---- hdsp acp stderr ----\n" + log.read_text(errors="replace"))


async def _only_task(client: Client) -> str:
    (item,) = (await client.list_tasks()).tasks
    return item.id


def _texts(content: Iterable[object] | None) -> list[str]:
    """The text of each text block among a tool call's `content`."""
    return [
        c.content.text
        for c in content or []
        if isinstance(c, ContentToolCallContent) and isinstance(c.content, TextContentBlock)
    ]


def _session_record(tmp_path: Path, session_id: str) -> dict[str, Any]:
    """What the adapter keeps of a session (under its state dir)."""
    path = tmp_path / "state" / "hdsp" / "acp-sessions" / f"{session_id}.json"
    record: dict[str, Any] = json.loads(path.read_text())
    return record


async def _in_the_kernel(client: Client, code: str) -> dict[str, Any]:
    """What `code` evaluates to in the daemon's one kernel (the task's)."""
    (kernel,) = (await client.request(ListKernels())).kernels
    ran: ExecutionResult = await client.request(
        ExecuteCode(kernel_id=kernel.kernel_id, code=code), timeout=30
    )
    return ran.outputs[0].data


async def test_a_prompt_streams_thoughts_and_text_and_ends_the_turn(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    reply = "Hello from hdsp: the table has two columns and one row."
    fake_openai.script(
        (FakeReply.reasoning("Reading the question.") + FakeReply.text(reply)).paced(0.02),
        FakeReply.text("Second answer."),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        assert session.modes is not None and session.modes.current_mode_id == "code"
        assert {"ask", "code", "analyst"} <= {m.id for m in session.modes.available_modes}
        (model,) = session.config_options or []
        assert model.root.id == "model" if hasattr(model, "root") else model.id == "model"

        response = await a.conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
        assert response.stop_reason == "end_turn"
        assert agent_text(a.host.updates) == reply
        chunks = [u for u in a.host.updates if type(u).__name__ == "AgentMessageChunk"]
        assert len(chunks) > 1, "the reply came in one piece: it did not stream"
        assert thought_text(a.host.updates) == "Reading the question."
        # The host shows its own prompt: it is not echoed back.
        assert not [u for u in a.host.updates if isinstance(u, UserMessageChunk)]

        # The next prompt continues the same task.
        seen = len(a.host.updates)
        response = await a.conn.prompt(session_id=session.session_id, prompt=[text_block("more")])
        assert response.stop_reason == "end_turn"
        assert agent_text(a.host.updates[seen:]) == "Second answer."
    task_id = await _only_task(client)
    snapshot = await client.get_task(task_id)
    assert snapshot.item.workspace == str(workspace)
    assert [m.text for m in snapshot.messages if m.say == "user_feedback"] == ["more"]


async def test_a_write_asks_the_host_and_allow_and_reject_each_do_their_part(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "b.txt").write_text("old\n")
    fake_openai.script(
        call("write_to_file", path="a.txt", content="allowed\n"),
        call("write_to_file", path="b.txt", content="rejected\n"),
        done("wrote one file"),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        async with _prompting(a, session.session_id, "write two files") as result:
            first = await a.host.next_permission()
            assert first.tool_call.kind == "edit" and first.tool_call.title == "Write `a.txt`"
            (diff,) = first.tool_call.content or []
            assert isinstance(diff, FileEditToolCallContent)
            assert diff.path == str(workspace / "a.txt") and diff.new_text == "allowed\n"
            assert diff.old_text is None  # a new file
            kinds = {o.option_id: o.kind for o in first.options}
            assert kinds == {
                "allow_once": "allow_once",
                "allow_always": "allow_always",
                "reject_once": "reject_once",
            }
            first.choose("allow_once")

            second = await a.host.next_permission()
            (diff,) = second.tool_call.content or []
            assert isinstance(diff, FileEditToolCallContent)
            assert (diff.old_text, diff.new_text) == ("old\n", "rejected\n")
            second.choose("reject_once")
        assert result["stop"] == "end_turn"
        statuses = {
            call_id: [u.status for u in tool_updates(a.host.updates, call_id) if u.status]
            for call_id in ("call_0_fake",)
        }
        assert statuses["call_0_fake"][0] == "pending"
        first_calls = [u for u in tool_updates(a.host.updates) if isinstance(u, ToolCallStart)]
        assert [u.title for u in first_calls] == ["Write `a.txt`", "Write `b.txt`"]
        ends = [
            u.status
            for u in tool_updates(a.host.updates)
            if isinstance(u, ToolCallProgress) and u.status in ("completed", "failed")
        ]
        assert ends == ["completed", "failed"]
        assert "wrote one file" in agent_text(a.host.updates)
    assert (workspace / "a.txt").read_text() == "allowed\n"
    assert (workspace / "b.txt").read_text() == "old\n"
    snapshot = await client.get_task(await _only_task(client))
    answered = [m for m in snapshot.messages if m.type == "ask" and m.ask == "tool"]
    assert [(m.answer, m.answered_by) for m in answered] == [
        ("yesButtonClicked", "hdsp acp"),
        ("noButtonClicked", "hdsp acp"),
    ]


@asynccontextmanager
async def _prompting(a: Adapter, session_id: str, text: str) -> AsyncIterator[dict[str, Any]]:
    """A prompt running in the background; `result["stop"]` once it returned."""
    import anyio

    result: dict[str, Any] = {}

    async def run() -> None:
        try:
            response = await a.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        except ConnectionError as exc:  # (the adapter was killed)
            result["error"] = exc
            return
        result["stop"] = response.stop_reason

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        yield result


async def test_cancel_mid_cell_interrupts_the_kernel_and_ends_cancelled(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    code = (
        "x = 41\nprint('run' + 'ning', flush=True)\nimport time\nwhile True:\n    time.sleep(0.05)"
    )
    fake_openai.script(call("execute_code", code=code), FakeReply.text("unreachable"))
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        async with _prompting(a, session.session_id, "loop") as result:
            ask = await a.host.next_permission()
            assert ask.tool_call.kind == "execute"
            ask.choose("allow_once")

            def running() -> bool:
                return any(
                    "running" in text  # (the output, not the code)
                    for u in tool_updates(a.host.updates)
                    for text in _texts(u.content)
                )

            await a.host.wait_for(running)
            await a.conn.cancel(session_id=session.session_id)
        assert result["stop"] == "cancelled"
    snapshot = await client.get_task(await _only_task(client))
    cells = [
        msgspec.json.decode(m.text or "", type=CellOutput)
        for m in snapshot.messages
        if m.say == "cell_output"
    ]
    assert [c.status for c in cells] == ["cancelled"]
    # Interrupted, not restarted: what the cell defined is still there.
    assert await _in_the_kernel(client, "x + 1") == {"text/plain": "42"}


async def test_a_new_adapter_loads_the_session_replays_it_and_the_turn_ends(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(
        FakeReply.text("I will write it."),
        call("write_to_file", path="out.txt", content="42\n"),
        done("wrote out.txt"),
    )
    # The first reply is text only: the turn ends; the second prompt's turn writes.
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        session_id = session.session_id
        first = await a.conn.prompt(session_id=session_id, prompt=[text_block("plan it")])
        assert first.stop_reason == "end_turn"
        async with _prompting(a, session_id, "now write it") as result:
            await a.host.next_permission()
            # The editor goes away mid-turn, its adapter with it.
            a.process.kill()
            await a.process.wait()
        assert "stop" not in result
    assert not (workspace / "out.txt").exists()

    async with adapter(daemon, tmp_path) as b:
        loaded = await b.conn.load_session(
            cwd=str(workspace), session_id=session_id, mcp_servers=[]
        )
        assert loaded.modes is not None and loaded.modes.current_mode_id == "code"
        users = [
            u.content.text
            for u in b.host.updates
            if isinstance(u, UserMessageChunk) and isinstance(u.content, TextContentBlock)
        ]
        assert users == ["plan it", "now write it"]
        assert agent_text(b.host.updates).startswith("I will write it.")
        # The ask still waits: the new adapter asks the host again.
        ask = await b.host.next_permission()
        assert ask.tool_call.title == "Write `out.txt`"
        ask.choose("allow_once")
        await b.host.wait_for(lambda: "wrote out.txt" in agent_text(b.host.updates))
    assert (workspace / "out.txt").read_text() == "42\n"


async def test_an_answer_from_hdsp_answer_resolves_the_hosts_pending_permission(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(call("write_to_file", path="c.txt", content="c\n"), done("wrote c"))
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        async with _prompting(a, session.session_id, "write c") as result:
            pending = await a.host.next_permission()
            task_id = await _only_task(client)
            answered = await run_hdsp(daemon.runtime_dir, "answer", task_id, "--yes")
            assert answered.returncode == 0, answered.stderr
            # The host's request goes without anyone choosing there.
            await a.host.wait_for(lambda: pending.answered.is_set())
            assert pending.withdrawn and pending.chosen is None
        assert result["stop"] == "end_turn"
    assert (workspace / "c.txt").read_text() == "c\n"
    snapshot = await client.get_task(task_id)
    (ask,) = [m for m in snapshot.messages if m.type == "ask" and m.ask == "tool"]
    assert ask.answered_by == "hdsp"


async def test_modes_profiles_and_a_followup_question_as_a_message_turn(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(
        call("ask_followup_question", question="Which column?", suggestions=["x", "y"]),
        done("used column x"),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        await a.conn.set_session_mode(session_id=session.session_id, mode_id="ask")
        options = await a.conn.set_config_option(
            config_id="model", session_id=session.session_id, value="default"
        )
        assert [
            o.root.current_value if hasattr(o, "root") else o.current_value
            for o in options.config_options
        ] == ["default"]
        response = await a.conn.prompt(session_id=session.session_id, prompt=[text_block("sum")])
        # The question ends the turn; the next prompt answers it.
        assert response.stop_reason == "end_turn"
        assert "Which column?" in agent_text(a.host.updates)
        response = await a.conn.prompt(session_id=session.session_id, prompt=[text_block("x")])
        assert response.stop_reason == "end_turn"
        assert "used column x" in agent_text(a.host.updates)
        await a.conn.set_session_mode(session_id=session.session_id, mode_id="code")
        await a.host.wait_for(
            lambda: any(
                isinstance(u, CurrentModeUpdate) and u.current_mode_id == "code"
                for u in a.host.updates
            )
        )
    snapshot = await client.get_task(await _only_task(client))
    assert snapshot.item.api_config_name == "default"
    assert tool_results(fake_openai, 1) == ["The user answered:\nx"]
    # The task started in the mode the host chose before its first prompt (ask:
    # no write tools), and is in the one it chose later.
    offered = {t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
    assert "read_file" in offered and "write_to_file" not in offered
    assert snapshot.item.mode == "code"


async def test_allow_always_on_a_write_covers_that_path_in_this_session_only(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(
        call("write_to_file", path="a.txt", content="a\n"),
        call("write_to_file", path="a.txt", content="a again\n"),
        call("write_to_file", path="b.txt", content="b\n"),
        call("execute_command", command="echo hi"),
        done("all done"),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        async with _prompting(a, session.session_id, "write and run") as result:
            first = await a.host.next_permission()
            labels = {o.option_id: o.name for o in first.options}
            assert labels["allow_always"] == "Allow always (write_to_file on `a.txt`, this session)"
            first.choose("allow_always")
            # The second write of a.txt is approved without asking; a write of
            # another path asks (before: "always" covered every path), and so
            # does the command.
            other = await a.host.next_permission()
            assert other.tool_call.title == "Write `b.txt`"
            other.choose("reject_once")
            command = await a.host.next_permission()
            assert command.tool_call.kind == "execute"
            assert command.tool_call.title == "Run `echo hi`"
            command.choose("reject_once")
        assert result["stop"] == "end_turn"
        assert len(a.host.permissions) == 3
    assert (workspace / "a.txt").read_text() == "a again\n"
    assert not (workspace / "b.txt").exists()
    snapshot = await client.get_task(await _only_task(client))
    answers = [(m.ask, m.answer, m.answered_by) for m in snapshot.messages if m.type == "ask"]
    assert answers == [
        ("tool", "yesButtonClicked", "hdsp acp"),
        ("tool", "yesButtonClicked", "hdsp acp"),
        ("tool", "noButtonClicked", "hdsp acp"),
        ("command", "noButtonClicked", "hdsp acp"),
    ]
    # hdsp's own settings are untouched: another session (or client) is asked.
    settings = await client.get_settings()
    assert settings.settings["approvals"].get("always_allow_write") in (False, None)
    record = _session_record(tmp_path, session.session_id)
    assert record["alwaysAllowed"] == ["path:write_to_file:a.txt"]
    assert record["taskId"] == snapshot.item.id


async def test_allow_always_on_code_covers_that_very_code_only(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(
        call("execute_code", code="n = 1"),
        call("execute_code", code="n = 1"),
        call("execute_code", code="n = 2"),
        done("ran"),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        async with _prompting(a, session.session_id, "run code") as result:
            first = await a.host.next_permission()
            labels = {o.option_id: o.name for o in first.options}
            assert labels["allow_always"] == "Allow always (this very code, this session)"
            first.choose("allow_always")
            # The same code again runs without asking; other code asks (before:
            # one "always" approved every later execution of the session).
            other = await a.host.next_permission()
            shown = _texts(other.tool_call.content)
            assert any("n = 2" in text for text in shown), shown
            other.choose("reject_once")
        assert result["stop"] == "end_turn"
        assert len(a.host.permissions) == 2
    snapshot = await client.get_task(await _only_task(client))
    answers = [(m.answer, m.answered_by) for m in snapshot.messages if m.type == "ask"]
    assert answers == [
        ("yesButtonClicked", "hdsp acp"),
        ("yesButtonClicked", "hdsp acp"),
        ("noButtonClicked", "hdsp acp"),
    ]
    assert await _in_the_kernel(client, "n") == {"text/plain": "1"}


async def test_a_reply_cut_short_or_filtered_ends_the_turn_with_max_tokens_or_refusal(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(
        FakeReply.text("The answer is long and gets cut").with_finish_reason("length"),
        FakeReply.text("Short this time."),
        FakeReply.text("I can't").with_finish_reason("content_filter"),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        response = await a.conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
        assert response.stop_reason == "max_tokens"
        response = await a.conn.prompt(session_id=session.session_id, prompt=[text_block("again")])
        assert response.stop_reason == "end_turn"
        response = await a.conn.prompt(session_id=session.session_id, prompt=[text_block("bad")])
        assert response.stop_reason == "refusal"
    snapshot = await client.get_task(await _only_task(client))
    texts = [(m.text, m.stop_reason) for m in snapshot.messages if m.say == "text"][1:]
    assert texts == [
        ("The answer is long and gets cut", "max_tokens"),
        ("Short this time.", None),
        ("I can't", "content_filter"),
    ]


async def test_the_todo_list_is_the_plan_and_a_command_shows_its_output_like_a_terminal(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(
        call("update_todo_list", todos="- [x] load data\n- [-] clean it\n- [ ] plot"),
        call("execute_command", command="printf 'hello from the shell\\n'"),
        done("ran it"),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        async with _prompting(a, session.session_id, "plan and run") as result:
            ask = await a.host.next_permission()
            assert ask.tool_call.kind == "execute"
            ask.choose("allow_once")
        assert result["stop"] == "end_turn"
        (plan,) = [u for u in a.host.updates if isinstance(u, AgentPlanUpdate)]
        assert [(e.content, e.status) for e in plan.entries] == [
            ("load data", "completed"),
            ("clean it", "in_progress"),
            ("plot", "pending"),
        ]
        call_id = ask.tool_call.tool_call_id
        updates = tool_updates(a.host.updates, call_id)
        assert [u.status for u in updates if u.status][-1] == "completed"
        shown = [text for u in updates for text in _texts(u.content)]
        assert any(
            text.startswith("```console\n") and "hello from the shell" in text for text in shown
        ), shown


async def test_a_task_started_elsewhere_loads_by_its_id_and_goes_on_here(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("Started from the CLI."), FakeReply.text("Continued here."))
    ref = await client.start_task("from elsewhere", workspace=workspace)
    async with client.events(ref.task_id, since_seq=0) as events:
        async for event in events:
            if isinstance(event.data, TaskCompleted):
                break
    async with adapter(daemon, tmp_path) as a:
        with pytest.raises(RequestError) as refused:
            await a.conn.load_session(cwd=str(workspace), session_id="no-such-task", mcp_servers=[])
        assert "no-such-task" in str(refused.value)
        await a.conn.load_session(cwd=str(workspace), session_id=ref.task_id, mcp_servers=[])
        users = [u.content.text for u in a.host.updates if isinstance(u, UserMessageChunk)]
        assert users == ["from elsewhere"]
        assert agent_text(a.host.updates) == "Started from the CLI."
        seen = len(a.host.updates)
        response = await a.conn.prompt(session_id=ref.task_id, prompt=[text_block("go on")])
        assert response.stop_reason == "end_turn"
        assert agent_text(a.host.updates[seen:]) == "Continued here."
    assert len((await client.list_tasks()).tasks) == 1


async def test_the_hosts_cwd_must_be_absolute_and_gets_hdspds_broad_workspace_refusal(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("never sent"))
    async with adapter(daemon, tmp_path) as a:
        # ACP's cwd is absolute: a relative one is not taken from wherever the
        # adapter happens to run.
        for relative in ("ws", "."):
            with pytest.raises(RequestError) as refused:
                await a.conn.new_session(cwd=relative, mcp_servers=[])
            assert "absolute" in str(refused.value)
        # The root and hdspd's own directories are refused as every client's are,
        # and nothing runs there.
        (daemon.data_dir / "inside").mkdir()
        for broad, why in (
            ("/", "the root directory"),
            (str(daemon.data_dir / "inside"), "hdspd's own directory"),
        ):
            session = await a.conn.new_session(cwd=broad, mcp_servers=[])
            with pytest.raises(RequestError) as refused:
                await a.conn.prompt(session_id=session.session_id, prompt=[text_block("ls")])
            assert f"Refusing {broad} as the workspace" in str(refused.value.data)
            assert why in str(refused.value.data)
    assert (await client.list_tasks()).tasks == []
    assert fake_openai.requests == []


async def test_allow_always_stops_at_hdsps_cap_on_automatic_approvals(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    await client.update_settings({"approvals": {"max_auto_approved_requests": 2}})
    fake_openai.script(
        *[call("write_to_file", path="log.txt", content=f"{n}\n") for n in range(5)],
        done("five versions"),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace)
        async with _prompting(a, session.session_id, "write five versions") as result:
            (await a.host.next_permission()).choose("allow_always")
            # Writes 1 and 2 go without asking; at the cap a person is asked again.
            again = await a.host.next_permission()
            (diff,) = again.tool_call.content or []
            assert isinstance(diff, FileEditToolCallContent) and diff.new_text == "3\n"
            again.choose("allow_always")
        assert result["stop"] == "end_turn"
        assert len(a.host.permissions) == 2
    assert (workspace / "log.txt").read_text() == "4\n"


async def test_the_hosts_mcp_servers_are_the_tasks_in_hdspds_memory_only(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path, tmp_path: Path
) -> None:
    await client.set_secret("probe", "from-hdsps-keyring")
    marker = f"acp-offered-{uuid.uuid4().hex}"
    server = McpServerStdio(
        name="probe server",  # (ACP allows spaces; hdsp's tool names do not)
        command=sys.executable,
        args=[str(BAD_SERVER), marker],
        env=[
            EnvVariable(name="PROBE_TOKEN", value="host-credential-123"),
            EnvVariable(name="PROBE_REF", value="${secret:probe}"),
        ],
    )
    fake_openai.script(
        call("mcp__probe_server__where", variable="PROBE_TOKEN"),
        call("mcp__probe_server__where", variable="PROBE_REF"),
        done("probed"),
    )
    async with adapter(daemon, tmp_path) as a:
        session = await a.new_session(workspace, server)
        async with _prompting(a, session.session_id, "probe") as result:
            for _ in range(2):
                ask = await a.host.next_permission()
                # A tool of the host's server asks as any MCP tool does.
                assert ask.tool_call.title == "`mcp__probe_server__where`"
                ask.choose("allow_once")
        assert result["stop"] == "end_turn"
        task_id = await _only_task(client)
        (pid,) = processes_mentioning(marker)  # (the offered server runs)
        # Closing the task stops its server.
        exited = os.pidfd_open(pid)
        try:
            await client.close_task(task_id)
            with anyio.fail_after(30):
                await anyio.wait_readable(exited)  # (a pidfd reads when the process ends)
        finally:
            os.close(exited)
    offered = {t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
    assert "mcp__probe_server__where" in offered

    # It ran in the task's workspace, with the host's values as they are: a
    # host's `${secret:NAME}` never reads hdsp's keyring.
    def sha256(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    assert tool_results(fake_openai, 1) == [
        f"cwd={workspace} PROBE_TOKEN:sha256={sha256('host-credential-123')}"
    ]
    assert tool_results(fake_openai, 2)[-1] == (
        f"cwd={workspace} PROBE_REF:sha256={sha256('${secret:probe}')}"
    )
    # Nothing of the host's credential is written down: not in hdsp's settings,
    # database or log, not in the adapter's session record.
    settings = await client.get_settings()
    assert settings.settings.get("mcp", {}).get("servers", {}) == {}
    record = _session_record(tmp_path, session.session_id)
    assert record["mcpServers"][0]["env"] == ["PROBE_TOKEN", "PROBE_REF"]
    written = [tmp_path / "acp.stderr", daemon.stderr_path, *daemon.data_dir.rglob("*")]
    for path in written:
        if path.is_file():
            assert b"host-credential-123" not in path.read_bytes(), path
