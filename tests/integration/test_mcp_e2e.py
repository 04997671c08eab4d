"""MCP servers as the agent's tools (issue 23, part 1), through the real daemon
and real servers: `mcp-server-time` and `mcp-server-git` (PyPI) and
`@modelcontextprotocol/server-everything` (npm) over stdio, the latter over
Streamable HTTP too, and a purpose-built server that crashes mid-call. A
scripted model (the fake OpenAI server) calls the tools."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hdsp.client import Client, CommandFailed
from hdsp.protocol import (
    Ask,
    ErrorCode,
    McpServerChanged,
    McpServerStatus,
    MessageEvent,
    OfferedMcpServer,
    TaskAborted,
    TaskCompleted,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn, wait_for_said
from tests.support.host_processes import processes_mentioning
from tests.support.mcp_servers import BAD_SERVER, everything_server, free_port, venv_script
from tests.support.model_requests import image_urls, tool_results
from tests.support.scripted_turns import ask_or_end, call, done, next_ask, run_task, start

pytestmark = pytest.mark.slow


async def configure(client: Client, servers: dict[str, Any]) -> None:
    await client.update_settings({"mcp": {"servers": servers}})


def offered(fake: FakeOpenAI, request: int) -> dict[str, dict[str, Any]]:
    """The tools the model was offered in request `request`, by name."""
    return {t["function"]["name"]: t["function"] for t in fake.requests[request].get("tools", [])}


async def wait_for_server(
    client: Client, since: int, name: str, state: str, *, restarts: int = 0
) -> McpServerStatus:
    """The first mcpServerChanged after `since` with `name` in `state` (and at least
    `restarts` restarts)."""
    async with client.events(None, since_seq=since) as events:
        async for event in events:
            if isinstance(event.data, McpServerChanged):
                status = event.data.payload[0]
                if status.name == name and status.state == state and status.restarts >= restarts:
                    return status
    raise AssertionError("the event stream ended early")


# ---- stdio: mcp-server-time, mcp-server-git ----------------------------------------------


async def test_time_server_tools_are_offered_and_a_call_asks_with_server_tool_and_arguments(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, daemon: DaemonProcess
) -> None:
    await configure(client, {"time": {"command": venv_script("mcp-server-time")}})
    fake_openai.script(
        call("mcp__time__get_current_time", timezone="Europe/Paris"),
        done("it is late"),
    )
    task_id, head = await start(client, "what time is it in Paris", workspace)
    ask = await next_ask(client, task_id, head)
    assert ask.ask == Ask.USE_MCP_SERVER
    shown = json.loads(ask.text or "{}")
    assert shown["type"] == "use_mcp_tool"
    assert shown["serverName"] == "time" and shown["toolName"] == "get_current_time"
    assert json.loads(shown["arguments"]) == {"timezone": "Europe/Paris"}
    # Its schema reached the model as the server wrote it.
    tool = offered(fake_openai, 0)["mcp__time__get_current_time"]
    assert tool["parameters"]["required"] == ["timezone"]
    assert "timezone" in tool["parameters"]["properties"]
    assert "[MCP server 'time'" in tool["description"]
    await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
    events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert isinstance(events[-1].data, TaskCompleted)
    result = tool_results(fake_openai, 1)[-1]
    assert '"timezone": "Europe/Paris"' in result and "datetime" in result
    listing = await client.list_mcp_servers(str(workspace))
    (time_server,) = listing.servers
    assert time_server.state == "connected" and time_server.scope == "global"
    assert {t.name for t in time_server.tools} >= {"get_current_time", "convert_time"}
    # The CLI says which server, tool and arguments the ask was for.
    shown = await run_hdsp(daemon.runtime_dir, "show", task_id)
    assert "ask: call get_current_time on the MCP server time?" in shown.stdout
    assert '"timezone": "Europe/Paris"' in shown.stdout


async def test_denied_mcp_call_does_not_run(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await configure(client, {"time": {"command": venv_script("mcp-server-time")}})
    fake_openai.script(call("mcp__time__get_current_time", timezone="Etc/UTC"), done())
    task_id, head = await start(client, "time", workspace)
    ask = await next_ask(client, task_id, head)
    await client.respond_to_ask(task_id, ask.ts, "noButtonClicked", "not now")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    result = tool_results(fake_openai, 1)[-1]
    assert "denied" in result and "not now" in result and "datetime" not in result


def git_repo(path: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "a.txt").write_text("one\n")
    subprocess.run(["git", "-C", str(path), "add", "a.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "first"], check=True, env=env)


async def test_per_tool_always_allow_and_the_mcp_switch_decide_what_asks(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    git_repo(workspace)
    (workspace / "a.txt").write_text("two\n")
    await configure(
        client,
        {
            "git": {
                "command": venv_script("mcp-server-git"),
                "args": ["--repository", str(workspace)],
                "alwaysAllow": ["git_status"],
            }
        },
    )
    # git_status is allowed by the user's configuration: no ask.
    fake_openai.script(call("mcp__git__git_status", repo_path=str(workspace)), done())
    task_id, head = await start(client, "status", workspace)
    assert await ask_or_end(client, task_id, head) is None
    result = tool_results(fake_openai, 1)[-1]
    assert "a.txt" in result and "modified" in result
    # git_log is not: it asks (whatever the server's annotations say).
    fake_openai.script(call("mcp__git__git_log", repo_path=str(workspace)), done())
    task_id, head = await start(client, "log", workspace)
    ask = await next_ask(client, task_id, head)
    assert ask.ask == Ask.USE_MCP_SERVER and json.loads(ask.text or "{}")["toolName"] == "git_log"
    await client.respond_to_ask(task_id, ask.ts, "noButtonClicked")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    # The MCP switch on: every MCP call runs without asking.
    fake_openai.script(call("mcp__git__git_log", repo_path=str(workspace)), done())
    task_id, head = await start(client, "log", workspace, always_allow_mcp=True)
    assert await ask_or_end(client, task_id, head) is None
    assert "first" in tool_results(fake_openai, 5)[-1]


# ---- server-everything over stdio and Streamable HTTP ----------------------------------


@pytest.fixture(scope="module")
def everything() -> str:
    return everything_server()


def allow_all(**server: Any) -> dict[str, Any]:
    return {
        **server,
        "alwaysAllow": [
            "echo",
            "get-tiny-image",
            "gzip-file-as-resource",
            "trigger-long-running-operation",
            "get-resource-reference",
        ],
    }


async def test_everything_over_stdio_error_image_resource_and_progress(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, everything: str
) -> None:
    await configure(client, {"every": allow_all(command=everything, args=["stdio"])})
    fake_openai.script(
        # An error result: the server refuses to fetch (nothing listens there).
        call("mcp__every__gzip-file-as-resource", data="http://127.0.0.1:9/x"),
        call("mcp__every__get-tiny-image"),
        call("mcp__every__get-resource-reference", resourceType="Text", resourceId=1),
        call(
            "access_mcp_resource",
            server_name="every",
            uri="demo://resource/static/document/architecture.md",
        ),
        call("mcp__every__trigger-long-running-operation", duration=1, steps=3),
        done(),
    )
    task_id, head = await start(client, "everything", workspace)
    # access_mcp_resource is not in alwaysAllow: it asks, showing server and URI.
    ask = await next_ask(client, task_id, head)
    shown = json.loads(ask.text or "{}")
    assert ask.ask == Ask.USE_MCP_SERVER and shown["type"] == "access_mcp_resource"
    assert shown["serverName"] == "every" and shown["uri"].startswith("demo://")
    await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
    events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
    error = tool_results(fake_openai, 1)[-1]
    assert error.startswith("Error: the MCP server 'every' reported an error")
    # The server's tiny PNG went the way of every image to a model: that file has
    # a bad checksum (its iCCP chunk), so the model is told it was not shown, with
    # the text around it (the test with a picture below shows one that reaches it).
    image_result = tool_results(fake_openai, 2)[-1]
    assert "[image not shown: it is not a readable image/png image]" in image_result
    assert "Here's the image you requested" in image_result and "MCP logo" in image_result
    embedded = tool_results(fake_openai, 3)[-1]
    assert "Resource demo://resource/dynamic/text/1 (text/plain)" in embedded
    assert "This is a plaintext resource" in embedded
    resource = tool_results(fake_openai, 4)[-1]
    assert "Architecture" in resource
    assert "Long running operation completed" in tool_results(fake_openai, 5)[-1]
    progress = [
        e.data.payload[0].message
        for e in events
        if isinstance(e.data, MessageEvent)
        and e.data.payload[0].message.say == "mcp_server_request_started"
        and not e.data.payload[0].message.partial
    ]
    assert progress and "progress 3/3" in (progress[-1].text or "")


async def test_everything_over_streamable_http(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, everything: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    await configure(client, {"web": allow_all(url=url, type="streamable-http")})
    async with http_everything(everything, port):
        await _echo_and_progress_over_http(client, fake_openai, workspace)


async def _echo_and_progress_over_http(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("mcp__web__echo", message="hello over http"),
        call("mcp__web__trigger-long-running-operation", duration=1, steps=2),
        done(),
    )
    _, events = await run_task(client, "echo", workspace)
    assert isinstance(events[-1].data, TaskCompleted)
    assert "hello over http" in tool_results(fake_openai, 1)[-1]
    assert "completed" in tool_results(fake_openai, 2)[-1]
    listing = await client.list_mcp_servers(str(workspace))
    assert listing.servers[0].transport == "http"
    assert listing.servers[0].state == "connected"
    assert {"echo", "get-tiny-image"} <= {t.name for t in listing.servers[0].tools}
    assert listing.servers[0].resources > 0


async def test_cancelling_the_task_cancels_the_call_and_keeps_the_server(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, everything: str
) -> None:
    await configure(client, {"every": allow_all(command=everything, args=["stdio"])})
    fake_openai.script(call("mcp__every__trigger-long-running-operation", duration=60, steps=60))
    task_id, head = await start(client, "long", workspace)
    await wait_for_said(client, task_id, head, "mcp_server_request_started", "progress")
    began = time.monotonic()
    await client.cancel_task(task_id)
    events = await collect_turn(client, task_id, head, until=(TaskAborted, TaskCompleted))
    assert time.monotonic() - began < 15
    assert not isinstance(events[-1].data, TaskCompleted)
    # The server is still connected, and answers the next call.
    listing = await client.list_mcp_servers(str(workspace))
    assert listing.servers[0].state == "connected" and listing.servers[0].restarts == 0
    fake_openai.script(call("mcp__every__echo", message="still here"), done())
    task_id, _ = await run_task(client, "echo", workspace)
    assert "still here" in tool_results(fake_openai, 2)[-1]


async def test_cancelling_the_task_cancels_the_call_on_the_server(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    """The server learns the call was cancelled (notifications/cancelled), and
    its process, still the same one, stops the work."""
    await configure(
        client,
        {
            "bad": {
                "command": sys.executable,
                "args": [str(BAD_SERVER)],
                "alwaysAllow": ["hang", "was_hang_cancelled"],
            }
        },
    )
    fake_openai.script(call("mcp__bad__hang"))
    task_id, head = await start(client, "hang", workspace)
    await wait_for_said(client, task_id, head, "mcp_server_request_started", "hanging")
    await client.cancel_task(task_id)
    await collect_turn(client, task_id, head, until=(TaskAborted, TaskCompleted))
    fake_openai.script(call("mcp__bad__was_hang_cancelled"), done())
    task_id, _ = await run_task(client, "was it cancelled", workspace)
    assert "hang was cancelled" in tool_results(fake_openai, 2)[-1]
    (status,) = (await client.list_mcp_servers(str(workspace))).servers
    assert status.state == "connected" and status.restarts == 0


async def test_what_a_server_says_reaches_the_terminal_escaped(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, daemon: DaemonProcess
) -> None:
    """An MCP result and its progress are untrusted text: `hdsp show` prints
    their escape sequences as visible escapes, never to the terminal."""
    await configure(
        client,
        {"bad": {"command": sys.executable, "args": [str(BAD_SERVER)], "alwaysAllow": ["shout"]}},
    )
    fake_openai.script(call("mcp__bad__shout"), done())
    task_id, _ = await run_task(client, "shout", workspace)
    assert "\x1b]52;c;aGk=\x07" in tool_results(fake_openai, 1)[-1]  # the model gets it as is
    shown = await run_hdsp(daemon.runtime_dir, "show", task_id, "--full")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\u202e" not in shown.stdout
    assert "\\x1b]52;c;aGk=\\x07 \\x1b[2J gone \\u202egnp.exe" in shown.stdout
    assert "MCP bad · shout: progress 1/1 \\x1b[2Jprogress" in shown.stdout


async def test_a_server_that_floods_list_changed_is_listed_again_a_few_times(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    """Each refresh of a server's lists is a durable mcpServerChanged event: a
    server that says its tools changed 50 times in half a second gets a
    refresh a second, not one each (the journal is not the server's to fill)."""
    await configure(
        client,
        {"bad": {"command": sys.executable, "args": [str(BAD_SERVER)], "alwaysAllow": ["flood"]}},
    )
    await client.list_mcp_servers(str(workspace), start=True)
    head = (await client.status()).head_seq
    fake_openai.script(call("mcp__bad__flood"), done())
    task_id, _ = await start(client, "flood", workspace)
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert "flooded" in tool_results(fake_openai, 1)[-1]
    changed = [
        e
        for e in (await client.replay(head, limit=1000)).events
        if isinstance(e.data, McpServerChanged) and e.data.payload[0].name == "bad"
    ]
    assert 1 <= len(changed) <= 4, len(changed)


# ---- servers that fail ------------------------------------------------------------------


async def test_a_server_that_crashes_mid_call_gives_a_clear_error_and_is_restarted(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, daemon: DaemonProcess
) -> None:
    await configure(
        client,
        {
            "bad": {
                "command": sys.executable,
                "args": [str(BAD_SERVER)],
                "alwaysAllow": ["crash", "ping", "picture"],
            }
        },
    )
    fake_openai.script(call("mcp__bad__crash"), done())
    task_id, head = await start(client, "crash it", workspace)
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    error = tool_results(fake_openai, 1)[-1]
    assert "The MCP server 'bad' stopped" in error and "restarting" in error
    restarted = await wait_for_server(client, head, "bad", "connected", restarts=1)
    assert restarted.restarts == 1
    fake_openai.script(call("mcp__bad__ping"), call("mcp__bad__picture"), done())
    task_id, _ = await run_task(client, "ping", workspace)
    assert "pong" in tool_results(fake_openai, 3)[-1]
    # An image result reaches the model as an image.
    (url,) = image_urls(fake_openai.requests[4])
    assert url.startswith("data:image/png;base64,")
    # Its stderr went to hdspd's log.
    daemon.wait_for_log("mcp server stderr")
    assert "bad server: crashing now" in daemon.stderr()


async def test_a_server_that_never_starts_has_a_clear_status_and_tasks_go_on(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    # One that starts but never answers `initialize` is failed at its startup
    # timeout (the SDK takes seconds more to stop its process: not waited for).
    silent = {
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(600)"],
        "startupTimeout": 1,
    }
    await configure(client, {"silent": silent})
    (status,) = (await client.list_mcp_servers(str(workspace), start=True)).servers
    assert status.state == "failed"
    assert "did not start and answer within its startup timeout" in (status.error or "")
    head = (await client.status()).head_seq
    await configure(
        client,
        {
            "silent": silent,
            "missing": {"command": str(workspace / "no-such-server")},
            "exits": {
                "command": sys.executable,
                "args": ["-c", "import sys; sys.stderr.write('no config\\n'); sys.exit(2)"],
            },
            # Nothing listens there.
            "down": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
            "off": {"command": venv_script("mcp-server-time"), "disabled": True},
            "time": {"command": venv_script("mcp-server-time")},
        },
    )
    listing = await client.list_mcp_servers(str(workspace), start=True)
    by_name = {s.name: s for s in listing.servers}
    assert by_name["off"].state == "disabled"
    assert by_name["time"].state == "connected"
    # Each failure says why (a failed server is tried again after a backoff, so
    # its status is read from its events, not from a listing at some moment).
    for name, why in (
        ("missing", "the command was not found"),
        ("exits", ""),
        ("down", "ConnectError"),
    ):
        failed = await wait_for_server(client, head, name, "failed")
        assert failed.error and why in failed.error
    # A task still runs, with the tools of the server that works.
    fake_openai.script(done())
    await run_task(client, "hello", workspace)
    names = set(offered(fake_openai, 0))
    assert "mcp__time__get_current_time" in names
    assert not any(
        n.startswith(("mcp__missing", "mcp__exits", "mcp__silent", "mcp__down", "mcp__off"))
        for n in names
    )


async def test_a_restart_command_restarts_a_running_server(client: Client, workspace: Path) -> None:
    await configure(client, {"bad": {"command": sys.executable, "args": [str(BAD_SERVER)]}})
    status = await client.restart_mcp_server("bad", str(workspace))
    assert status.state == "connected"
    with pytest.raises(CommandFailed) as refused:
        await client.restart_mcp_server("nothing-here", str(workspace))
    assert "no MCP server named 'nothing-here'" in str(refused.value)


# ---- a workspace's .hdsp/mcp.json ------------------------------------------------------


async def test_workspace_servers_run_only_once_trusted_as_written(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    config = workspace / ".hdsp" / "mcp.json"
    config.parent.mkdir()
    server = {"command": venv_script("mcp-server-time")}
    config.write_text(json.dumps({"mcpServers": {"wstime": server}}))
    listing = await client.list_mcp_servers(str(workspace), start=True)
    (status,) = listing.servers
    assert status.state == "untrusted" and status.scope == "workspace"
    assert "hdsp mcp trust wstime" in (status.error or "")
    fake_openai.script(done())
    await run_task(client, "hello", workspace)
    assert not any(n.startswith("mcp__") for n in offered(fake_openai, 0))
    # Trusted: it starts, and the next task is offered its tools.
    trusted = await client.trust_mcp_server("wstime", str(workspace))
    assert trusted.state == "connected"
    fake_openai.script(done())
    await run_task(client, "hello", workspace)
    assert "mcp__wstime__get_current_time" in offered(fake_openai, 1)
    # A change to its definition (here: one more argument) is not trusted.
    server["args"] = ["--local-timezone", "Etc/UTC"]
    config.write_text(json.dumps({"mcpServers": {"wstime": server}}))
    (status,) = (await client.list_mcp_servers(str(workspace))).servers
    assert status.state == "untrusted"
    fake_openai.script(done())
    await run_task(client, "hello", workspace)
    assert not any(n.startswith("mcp__") for n in offered(fake_openai, 2))


async def test_trust_is_refused_when_the_entry_changed_since_it_was_shown(
    client: Client, workspace: Path
) -> None:
    """What a person trusts is what they were shown: a repository (or an agent)
    that rewrites the entry in between gets nothing trusted and nothing run."""
    config = workspace / ".hdsp" / "mcp.json"
    config.parent.mkdir()
    shown_entry = {"command": venv_script("mcp-server-time"), "env": {"TZ": "UTC"}}
    config.write_text(json.dumps({"mcpServers": {"t": shown_entry}}))
    (shown,) = (await client.list_mcp_servers(str(workspace))).servers
    assert shown.state == "untrusted" and shown.env_names == ["TZ"] and shown.fingerprint
    # The status says what decides what runs, besides the command.
    marker = f"--hdsp-test-{uuid.uuid4().hex}"
    swapped = {
        "command": sys.executable,
        "args": [str(BAD_SERVER), marker],
        "env": {"TZ": "UTC", "PYTHONSTARTUP": "evil.py", "TOKEN": "${secret:api-token}"},
    }
    config.write_text(json.dumps({"mcpServers": {"t": swapped}}))
    with pytest.raises(CommandFailed) as refused:
        await client.trust_mcp_server("t", str(workspace), fingerprint=shown.fingerprint)
    assert refused.value.code == "invalid_state"
    assert "changed since it was shown" in refused.value.message
    (now,) = (await client.list_mcp_servers(str(workspace))).servers
    assert now.state == "untrusted" and processes_mentioning(marker) == []
    assert now.env_names == ["PYTHONSTARTUP", "TOKEN", "TZ"] and now.secrets == ["api-token"]
    # Trusting what is there now, as shown now, works.
    config.write_text(json.dumps({"mcpServers": {"t": shown_entry}}))
    trusted = await client.trust_mcp_server("t", str(workspace), fingerprint=shown.fingerprint)
    assert trusted.state == "connected"


async def test_a_broken_workspace_file_is_reported(client: Client, workspace: Path) -> None:
    (workspace / ".hdsp").mkdir()
    (workspace / ".hdsp" / "mcp.json").write_text('{"mcpServers": {"x": {"args": []}}}')
    listing = await client.list_mcp_servers(str(workspace))
    assert listing.servers == []
    assert listing.config_error is not None and "mcp.json was not used" in listing.config_error


async def test_a_workspace_file_that_is_a_link_out_a_fifo_or_huge_is_refused(
    client: Client, workspace: Path, tmp_path: Path
) -> None:
    """A cloned repository decides what .hdsp/mcp.json is: hdspd reads it only as
    a regular file inside the workspace, and never waits on it."""
    hdsp_dir = workspace / ".hdsp"
    hdsp_dir.mkdir()
    config = hdsp_dir / "mcp.json"
    # A link to a file of the user's outside the workspace (here a valid config).
    elsewhere = tmp_path / "outside.json"
    elsewhere.write_text(json.dumps({"mcpServers": {"t": {"command": "true"}}}))
    config.symlink_to(elsewhere)
    with anyio.fail_after(20):
        listing = await client.list_mcp_servers(str(workspace))
    assert listing.servers == []
    assert "leads out of the workspace" in (listing.config_error or "")
    # A FIFO: opening it to read would wait for a writer (the daemon with it).
    config.unlink()
    os.mkfifo(config)
    with anyio.fail_after(20):
        listing = await client.list_mcp_servers(str(workspace))
    assert "not a regular file" in (listing.config_error or "")
    # Far larger than any configuration.
    config.unlink()
    config.write_text('{"mcpServers": {}}' + " " * 400_000)
    with anyio.fail_after(20):
        listing = await client.list_mcp_servers(str(workspace))
    assert "larger than 256 KiB" in (listing.config_error or "")
    # The daemon is still answering, and a good file is read again.
    config.write_text(json.dumps({"mcpServers": {"t": {"command": "true"}}}))
    (status,) = (await client.list_mcp_servers(str(workspace))).servers
    assert status.name == "t" and status.state == "untrusted"


async def test_settings_refuse_a_credential_written_in(client: Client) -> None:
    with pytest.raises(CommandFailed) as refused:
        await configure(
            client,
            {"api": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer x1"}}},
        )
    assert "${secret:NAME}" in str(refused.value.details) + str(refused.value)
    await configure(
        client,
        {
            "api": {
                "url": "http://127.0.0.1:1/mcp",
                "headers": {"Authorization": "Bearer ${secret:api-token}"},
            }
        },
    )
    exported = await client.export_settings()
    assert "${secret:api-token}" in json.dumps(exported.settings)


async def test_autostart_servers_start_with_hdspd_and_stop_with_it(
    client: Client, daemon: DaemonProcess, workspace: Path
) -> None:
    marker = f"--hdsp-test-{uuid.uuid4().hex}"
    head = (await client.status()).head_seq
    await configure(
        client,
        {"bad": {"command": sys.executable, "args": [str(BAD_SERVER), marker], "autostart": True}},
    )
    # No task needed it: it started because of `autostart`.
    await wait_for_server(client, head, "bad", "connected")
    assert processes_mentioning(marker)
    assert daemon.stop() == 0
    assert processes_mentioning(marker) == []


async def test_a_call_past_its_timeout_is_cancelled_with_a_clear_error(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, everything: str
) -> None:
    await configure(client, {"every": allow_all(command=everything, args=["stdio"], timeout=1)})
    fake_openai.script(
        call("mcp__every__trigger-long-running-operation", duration=30, steps=30),
        call("mcp__every__echo", message="after the timeout"),
        done(),
    )
    await run_task(client, "slow", workspace)
    error = tool_results(fake_openai, 1)[-1]
    assert "did not finish trigger-long-running-operation within 1 s" in error
    assert "after the timeout" in tool_results(fake_openai, 2)[-1]


@contextlib.asynccontextmanager
async def http_everything(everything: str, port: int) -> AsyncIterator[None]:
    """server-everything over Streamable HTTP on `port`, until the block ends."""
    process = await anyio.open_process(
        [everything, "streamableHttp"], env={**os.environ, "PORT": str(port)}
    )
    try:
        assert process.stderr is not None
        seen = b""
        async for chunk in process.stderr:  # it says when it listens
            seen += chunk
            if b"listening on port" in seen:
                break
        yield
    finally:
        process.kill()
        await process.wait()
        await process.aclose()


async def test_an_http_server_that_restarts_gets_a_new_session(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, everything: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    await configure(client, {"web": allow_all(url=url)})
    async with http_everything(everything, port):
        fake_openai.script(call("mcp__web__echo", message="first"), done())
        await run_task(client, "echo", workspace)
        assert "first" in tool_results(fake_openai, 1)[-1]
    # The server went away and came back: it no longer knows hdsp's session.
    async with http_everything(everything, port):
        fake_openai.script(call("mcp__web__echo", message="second"), done())
        await run_task(client, "echo", workspace)
        assert "Echo: second" in tool_results(fake_openai, 3)[-1]


async def test_the_modes_tool_groups_apply_to_mcp_tools(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await configure(client, {"time": {"command": venv_script("mcp-server-time")}})
    fake_openai.script(call("mcp__time__get_current_time", timezone="Etc/UTC"), done())
    head = (await client.status()).head_seq
    ref = await client.start_task("time?", workspace=workspace, mode="ask")
    await collect_turn(client, ref.task_id, head, until=(TaskCompleted,))
    # Ask mode has no mcp group: not offered, and refused when called anyway.
    assert not any(name.startswith("mcp__") for name in offered(fake_openai, 0))
    result = tool_results(fake_openai, 1)[-1]
    assert "not available in Ask mode" in result and "datetime" not in result


async def test_a_stdio_server_gets_its_secret_and_no_key_of_hdspd(
    client: Client, fake_openai: FakeOpenAI, workspace: Path, everything: str
) -> None:
    await client.set_secret("mcp-token", "tok-4711-value")
    env = {"MY_SETTING": "on", "MY_TOKEN": "${secret:mcp-token}"}
    await configure(client, {"every": {"command": everything, "args": ["stdio"], "env": env}})
    fake_openai.script(call("mcp__every__get-env"), done())
    await run_task(client, "env", workspace, always_allow_mcp=True)
    env = tool_results(fake_openai, 1)[-1]
    assert '"MY_SETTING": "on"' in env and '"PATH"' in env
    assert "HDSP_API_KEY" not in env and "HDSP_BASE_URL" not in env
    # The server got the secret's value; what it says back reaches the model scrubbed.
    assert '"MY_TOKEN": "[secret:mcp-token]"' in env and "tok-4711-value" not in env


async def test_a_servers_new_tools_are_offered_after_it_says_they_changed(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    await configure(
        client,
        {"bad": {"command": sys.executable, "args": [str(BAD_SERVER)], "alwaysAllow": ["grow"]}},
    )
    fake_openai.script(call("mcp__bad__grow"), done())
    task_id, head = await start(client, "grow", workspace)
    async with client.events(None, since_seq=head) as events:
        async for event in events:
            if isinstance(event.data, McpServerChanged):
                status = event.data.payload[0]
                if "extra" in {t.name for t in status.tools}:
                    break
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert "mcp__bad__extra" not in offered(fake_openai, 0)
    fake_openai.script(done())
    task_id, _ = await run_task(client, "again", workspace)
    assert "mcp__bad__extra" in offered(fake_openai, 2)


async def test_a_task_takes_at_most_16_offered_servers_with_distinct_names(
    client: Client, workspace: Path
) -> None:
    too_many = [OfferedMcpServer(name=f"s{n}", command="python3") for n in range(17)]
    twice = [OfferedMcpServer(name="s", command="python3")] * 2
    for servers, why in ((too_many, "at most 16"), (twice, "share a name")):
        with pytest.raises(CommandFailed) as refused:
            await client.start_task("hi", workspace=workspace, mcp_servers=servers)
        assert refused.value.code == ErrorCode.INVALID_REQUEST and why in refused.value.message
    assert (await client.list_tasks()).tasks == []
