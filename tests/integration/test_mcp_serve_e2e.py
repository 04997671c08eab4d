"""`hdsp mcp serve` end to end: the official MCP SDK's client over stdio against a
real `hdsp mcp serve` subprocess and a real hdspd with real kernels. Every change
waits for hdsp's approval, answered from another hdsp client (the `hdsp answer`
CLI, or a client of the library) or, when the MCP client offers elicitation,
by the host's user."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import nbformat
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hdsp.client import Client
from hdsp.protocol import Say, TaskAborted
from tests.fakes.openai_server import FakeOpenAI
from tests.support.cli_process import cli_env, run_hdsp
from tests.support.daemon_process import DaemonProcess, short_tmp_dir
from tests.support.events import collect_turn, next_unanswered_ask, wait_for_ask_ts
from tests.support.scripted_turns import call, done

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]]


@asynccontextmanager
async def mcp_session(
    daemon: DaemonProcess, workspace: Path, elicit: Elicit | None = None, *options: str
) -> AsyncIterator[ClientSession]:
    """An MCP client session with `hdsp mcp serve`, started as a host starts it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hdsp.client", "mcp", "serve", *options],
        env=cli_env(daemon.runtime_dir),
        cwd=workspace,
    )
    errors = (daemon.root / "mcp-serve.stderr").open("w")
    try:
        async with stdio_client(params, errlog=errors) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicit) as session:
                await session.initialize()
                yield session
    finally:
        errors.close()


async def approve_next(client: Client, since_seq: int, *, by_cli: Path | None = None) -> str:
    """Wait for the next ask and approve it: through `hdsp answer` when `by_cli`
    names the runtime dir, else through `client`. Returns the ask's task id."""
    task_id, ask = await next_unanswered_ask(client, since_seq)
    if by_cli is not None:
        done = await run_hdsp(by_cli, "answer", task_id, "--yes")
        assert done.returncode == 0, done.stderr
    else:
        await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
    return task_id


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def approved_call(
    client: Client,
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    *,
    by_cli: Path | None = None,
) -> tuple[types.CallToolResult, str]:
    """Call an MCP tool while another hdsp client approves the ask it waits on."""
    head = (await client.status()).head_seq
    task: list[str] = []
    result: list[types.CallToolResult] = []
    async with anyio.create_task_group() as tg:

        async def approve() -> None:
            task.append(await approve_next(client, head, by_cli=by_cli))

        async def call() -> None:
            result.append(await session.call_tool(tool, arguments))

        tg.start_soon(approve)
        tg.start_soon(call)
    return result[0], task[0]


async def test_code_notebooks_and_variables_through_mcp_with_approvals(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    notebook = workspace / "analysis.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('old')"), nbformat.v4.new_markdown_cell("# t")]
    nbformat.write(nb, notebook)
    async with mcp_session(daemon, workspace) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {
            "list_kernels",
            "start_kernel",
            "execute_code",
            "list_variables",
            "read_notebook",
            "edit_cell",
            "insert_cell",
            "delete_cell",
            "start_task",
            "follow_task",
        } <= names

        # 1+1, approved from the command line by another client: `hdsp answer`.
        result, task_id = await approved_call(
            client,
            session,
            "execute_code",
            {"code": "answer_from_mcp = 41 + 1\n1+1"},
            by_cli=daemon.runtime_dir,
        )
        assert not result.is_error, text_of(result)
        assert "2" in text_of(result).splitlines()[-1]

        # The same kernel through the CLI: the variable set through MCP is there.
        listed = await run_hdsp(daemon.runtime_dir, "vars", task_id)
        assert listed.returncode == 0, listed.stderr
        assert "answer_from_mcp  int" in listed.stdout
        # ... and through MCP's own list_variables (a read: no ask).
        variables = await session.call_tool("list_variables", {})
        assert "answer_from_mcp" in text_of(variables)
        # hdsp show has the call, who approved it and its output.
        shown = await run_hdsp(daemon.runtime_dir, "show", task_id)
        assert "answer_from_mcp = 41 + 1" in shown.stdout

        # A long loop streams as progress and stops when the host cancels.
        head = (await client.status()).head_seq
        progress: list[str] = []
        third_line = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")
            if "tick 3" in "".join(progress):
                third_line.set()

        loop = "import time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.1)"
        async with anyio.create_task_group() as tg:
            tg.start_soon(approve_next, client, head)

            async def run_loop() -> None:
                with anyio.CancelScope() as scope:
                    scopes.append(scope)
                    ended = await session.call_tool(
                        "execute_code", {"code": loop}, progress_callback=on_progress
                    )
                    raise AssertionError(f"the loop ended by itself: {text_of(ended)}")

            scopes: list[anyio.CancelScope] = []
            tg.start_soon(run_loop)
            await third_line.wait()
            scopes[0].cancel()
        assert sum("tick" in p for p in progress) >= 1
        # The host's cancellation reaches the daemon as a CancelTask: the call's
        # turn ends aborted.
        await collect_turn(client, task_id, head, until=(TaskAborted,))
        # The kernel was interrupted, not left running: the cell's final message
        # says cancelled, and `i` stopped far from the end.
        snapshot = await client.get_task(task_id)
        cells = [
            json.loads(m.text or "{}")
            for m in snapshot.messages
            if m.say == Say.CELL_OUTPUT and not m.partial
        ]
        assert cells[-1]["status"] == "cancelled"
        after, _ = await approved_call(client, session, "execute_code", {"code": "print(i)"})
        assert not after.is_error, text_of(after)
        assert int(text_of(after).splitlines()[-1]) < 100

        # Edit a notebook cell (read first, as hdsp requires): approved, and the
        # file on disk changed.
        read = await session.call_tool("read_notebook", {"path": "analysis.ipynb"})
        assert "print('old')" in text_of(read)
        edited, _ = await approved_call(
            client,
            session,
            "edit_cell",
            {"path": "analysis.ipynb", "index": 0, "source": "print('new')"},
        )
        assert not edited.is_error, text_of(edited)
        cells_now = nbformat.read(notebook, as_version=4).cells
        assert cells_now[0].source == "print('new')"
        assert cells_now[1].source == "# t"


async def test_a_denied_change_does_not_happen(daemon: DaemonProcess, client: Client) -> None:
    workspace = short_tmp_dir()
    marker = workspace / "ran.txt"
    async with mcp_session(daemon, workspace) as session:
        head = (await client.status()).head_seq
        async with anyio.create_task_group() as tg:

            async def deny() -> None:
                task_id, ask = await next_unanswered_ask(client, head)
                await client.respond_to_ask(task_id, ask.ts, "noButtonClicked")

            tg.start_soon(deny)
            code = f"open({str(marker)!r}, 'w').write('x')"
            result = await session.call_tool("execute_code", {"code": code})
        assert result.is_error
        assert "denied" in text_of(result)
        assert not marker.exists()


async def test_the_hosts_user_approves_through_elicitation(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        approve = "allowed_by_host" in params.message
        return types.ElicitResult(action="accept", content={"approve": approve})

    async with mcp_session(daemon, workspace, elicit) as session:
        result = await session.call_tool("execute_code", {"code": "allowed_by_host = 2\n1+1"})
        assert not result.is_error, text_of(result)
        assert text_of(result).splitlines()[-1] == "Out[1]: 2"
        refused = await session.call_tool("execute_code", {"code": "refused_here = 1"})
        assert refused.is_error
        assert "denied" in text_of(refused)
    assert len(asked) == 2
    assert "allowed_by_host = 2" in asked[0]
    # Approved by the host, as every hdsp client sees it.
    tasks = await client.list_tasks()
    mcp_task = next(t for t in tasks.tasks if t.task.startswith("MCP host"))
    snapshot = await client.get_task(mcp_task.id)
    answered = [m for m in snapshot.messages if m.type == "ask" and m.is_answered]
    assert [m.answer for m in answered] == ["yesButtonClicked", "noButtonClicked"]
    assert all(m.answered_by == "hdsp mcp serve" for m in answered)


async def test_what_a_quick_run_prints_reaches_the_host_as_progress_before_its_result(
    daemon: DaemonProcess, client: Client
) -> None:
    """The call's reply can overtake its last output (another socket): the
    server catches up first, so the host never misses a line of progress."""
    workspace = short_tmp_dir()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(daemon, workspace, elicit) as session:
        for n in range(5):
            progress: list[str] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")  # noqa: B023  (this call's list)

            result = await session.call_tool(
                "execute_code", {"code": f"print('quick {n}')"}, progress_callback=on_progress
            )
            assert not result.is_error, text_of(result)
            assert f"quick {n}" in text_of(result)
            assert any(f"quick {n}" in p for p in progress), progress


async def test_a_task_started_through_mcp_is_followed_and_its_asks_go_to_the_host(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        call("execute_code", code="made_by_agent = 7\nprint('agent ran')"), done("7")
    )
    workspace = short_tmp_dir()
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(daemon, workspace, elicit) as session:
        started = await session.call_tool("start_task", {"prompt": "make a variable"})
        assert not started.is_error, text_of(started)
        task_id = json.loads(text_of(started))["taskId"]
        progress: list[str] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        followed = await session.call_tool(
            "follow_task", {"task_id": task_id}, progress_callback=on_progress
        )
        assert not followed.is_error, text_of(followed)
        assert json.loads(text_of(followed))["state"] == "completed"
        assert any("agent ran" in p for p in progress)
        # The agent's run was approved by the host's user, and it ran in the
        # task's kernel, as the CLI reads it.
        assert len(asked) == 1 and "made_by_agent = 7" in asked[0]
        listed = await run_hdsp(daemon.runtime_dir, "vars", task_id)
        assert "made_by_agent  int" in listed.stdout

        # A task the session did not start is not the host's to read.
        other = await client.start_task("someone else's", workspace=workspace)
        refused = await session.call_tool("follow_task", {"task_id": other.task_id})
        assert refused.is_error
        assert "not a task this session started" in text_of(refused)


async def test_code_runs_in_the_kernel_the_host_names(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(daemon, workspace, elicit) as session:
        own = await session.call_tool("execute_code", {"code": "where = 'own'"})
        assert not own.is_error, text_of(own)
        started = await session.call_tool("start_kernel", {})
        assert not started.is_error, text_of(started)
        kernel_id = json.loads(text_of(started))["kernelId"]
        there = await session.call_tool(
            "execute_code", {"code": "where = 'named'", "kernel_id": kernel_id}
        )
        assert not there.is_error, text_of(there)
        # Each kernel keeps its own state: the named one did not move the
        # session's own kernel.
        back = await session.call_tool("execute_code", {"code": "print(where)"})
        assert text_of(back).splitlines()[-1] == "own"
        named = await session.call_tool("list_variables", {"kernel_id": kernel_id})
        assert "'named'" in text_of(named)
        listing = await session.call_tool("list_kernels", {})
        assert kernel_id in text_of(listing)
        assert "connectionFile" not in text_of(listing)
    # The approval of the named kernel's code was asked in a task that says which kernel.
    titles = [t.task for t in (await client.list_tasks()).tasks]
    assert any(title.endswith(f"in kernel {kernel_id}") for title in titles)


async def test_start_kernel_follows_the_workspace_rules(
    daemon: DaemonProcess, client: Client
) -> None:
    """Issue 32, hole 3: start_kernel ran its kernel in whatever directory the
    host started `hdsp mcp serve` in, `/` and $HOME included. The daemon refuses
    those as it refuses them as a workspace (tests/security/test_workspace.py has
    every case)."""
    home = await anyio.Path(os.environ["HOME"]).resolve()  # the daemon's too
    for where, why in (
        (Path("/"), "the root directory"),
        (Path(home), "your home directory"),
    ):
        async with mcp_session(daemon, where) as session:
            refused = await session.call_tool("start_kernel", {})
        assert refused.is_error, text_of(refused)
        said = text_of(refused)
        assert f"Refusing {where} as the kernel's directory" in said and why in said, said
    assert (await client.list_kernels()).kernels == []
    workspace = short_tmp_dir()
    async with mcp_session(daemon, workspace) as session:
        started = await session.call_tool("start_kernel", {})
    assert not started.is_error, text_of(started)
    info = json.loads(text_of(started))
    assert info["cwd"] == str(workspace) and "connectionFile" not in info


async def test_serve_without_a_daemon_says_so_on_stderr(tmp_path: Path) -> None:
    done = await run_hdsp(tmp_path / "no-daemon", "mcp", "serve")
    assert done.returncode == 3
    assert done.stdout == ""  # stdout is the MCP stream's: nothing else goes there
    assert "hdsp mcp serve:" in done.stderr


async def test_with_no_elicitation_asks_stay_with_hdsps_clients(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_session(daemon, workspace, elicit, "--no-elicitation") as session:
        head = (await client.status()).head_seq
        waiting = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            if "Waiting for approval" in (message or ""):
                waiting.set()

        result: list[types.CallToolResult] = []
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                code = {"code": "3*3"}
                result.append(
                    await session.call_tool("execute_code", code, progress_callback=on_progress)
                )

            tg.start_soon(run)
            await waiting.wait()
            # The server has seen the ask; a round trip later, an elicitation it
            # had sent would have reached us.
            await session.send_ping()
            assert asked == []
            await approve_next(client, head)
        assert text_of(result[0]).splitlines()[-1] == "Out[1]: 9"
    assert asked == []


async def test_a_host_that_fails_to_ask_leaves_the_ask_to_hdsp_and_output_is_escaped(
    daemon: DaemonProcess, client: Client
) -> None:
    workspace = short_tmp_dir()
    tried = anyio.Event()

    async def broken(context: Any, params: types.ElicitRequestParams) -> types.ErrorData:
        tried.set()
        return types.ErrorData(code=types.INTERNAL_ERROR, message="the host's dialog broke")

    async with mcp_session(daemon, workspace, broken) as session:
        head = (await client.status()).head_seq
        progress: list[str] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        result: list[types.CallToolResult] = []
        # Output that would drive a terminal: set the clipboard (OSC 52), erase
        # the line, reverse the text.
        code = "print('\\x1b]52;c;aGk=\\x07 \\x1b[2Kfake \\u202egnp.exe', flush=True)"
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                result.append(
                    await session.call_tool(
                        "execute_code", {"code": code}, progress_callback=on_progress
                    )
                )

            tg.start_soon(run)
            await tried.wait()  # the host was asked and failed: the ask still waits
            await approve_next(client, head)
    text = text_of(result[0])
    assert not result[0].is_error, text
    for shown in [text, *progress]:
        assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert "\\x1b]52;c;aGk=\\x07" in text
    assert any("\\x1b[2Kfake \\u202egnp.exe" in p for p in progress)


async def test_a_call_while_a_person_works_in_the_task_is_refused_clearly(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI
) -> None:
    workspace = short_tmp_dir()
    async with mcp_session(daemon, workspace) as session:
        variables = await session.call_tool("list_variables", {})  # makes the session's task
        assert not variables.is_error, text_of(variables)
        mcp_task = next(t for t in (await client.list_tasks()).tasks if t.task.startswith("MCP"))
        # A person sends the task a message: its model's turn waits on an ask.
        fake_openai.script(call("execute_code", code="1"), done())
        head = (await client.status()).head_seq
        await client.send_message(mcp_task.id, "run something")
        ask = await wait_for_ask_ts(client, mcp_task.id, head)
        busy = await session.call_tool("execute_code", {"code": "2"})
        assert busy.is_error
        assert "hdsp refused" in text_of(busy) and "working" in text_of(busy)
        await client.respond_to_ask(mcp_task.id, ask, "noButtonClicked")
