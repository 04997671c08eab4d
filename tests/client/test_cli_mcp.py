"""`hdsp mcp list|tools|restart|trust` against a real daemon and real MCP
servers (issue 23): what a server said reaches the terminal escaped, and a
workspace's servers run only once trusted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hdsp.client import Client
from tests.support.cli_process import run_hdsp
from tests.support.daemon_process import DaemonProcess
from tests.support.mcp_servers import BAD_SERVER, venv_script

pytestmark = pytest.mark.slow


async def test_list_tools_restart_and_escaped_errors(
    client: Client, daemon: DaemonProcess, tmp_path: Path
) -> None:
    await client.update_settings(
        {
            "mcp": {
                "servers": {
                    "time": {"command": venv_script("mcp-server-time")},
                    # Its error names the command, which holds a terminal escape.
                    "evil": {"command": str(tmp_path / "no\x1b[31mserver")},
                }
            }
        }
    )
    run_dir = daemon.runtime_dir
    r = await run_hdsp(run_dir, "mcp", "list", "--workspace", str(tmp_path), "--start")
    assert r.returncode == 0, r.stderr
    assert "time  connected  (settings, stdio)  2 tools" in r.stdout
    assert "evil  failed" in r.stdout and "the command was not found" in r.stdout
    assert "\x1b" not in r.stdout and "no\\x1b[31mserver" in r.stdout

    r = await run_hdsp(run_dir, "mcp", "tools", "time", "--workspace", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "  mcp__time__get_current_time" in r.stdout
    assert "  mcp__time__convert_time" in r.stdout

    r = await run_hdsp(run_dir, "mcp", "restart", "time", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["state"] == "connected"

    r = await run_hdsp(run_dir, "mcp", "restart", "nothing")
    assert r.returncode == 2 and "no MCP server named 'nothing'" in r.stderr


async def test_trust_a_workspace_server_after_seeing_what_it_runs(
    client: Client, daemon: DaemonProcess, tmp_path: Path
) -> None:
    (tmp_path / ".hdsp").mkdir()
    entry = {
        "command": sys.executable,
        "args": [str(BAD_SERVER)],
        "env": {"BAD_MODE": "calm", "LD_PRELOAD": ""},
        "alwaysAllow": ["ping"],
    }
    (tmp_path / ".hdsp" / "mcp.json").write_text(json.dumps({"mcpServers": {"bad": entry}}))
    run_dir = daemon.runtime_dir
    r = await run_hdsp(run_dir, "mcp", "list", "--workspace", str(tmp_path), "--start")
    assert "bad  untrusted  (workspace, stdio)" in r.stdout
    assert "hdsp mcp trust bad" in r.stdout
    # Everything that decides what runs is shown, not only the command.
    assert "    environment: BAD_MODE, LD_PRELOAD" in r.stdout
    assert "    runs without asking: ping" in r.stdout
    # `trust` shows the entry and asks; anything but yes trusts nothing.
    for answer in ("", "n\n"):
        r = await run_hdsp(
            run_dir, "mcp", "trust", "bad", "--workspace", str(tmp_path), stdin=answer
        )
        assert r.returncode == 1, r.stderr
        assert f"The server bad of {tmp_path}/.hdsp/mcp.json:" in r.stdout
        assert "environment: BAD_MODE, LD_PRELOAD" in r.stdout
        assert r.stdout.rstrip().endswith("Not trusted.")
    (status,) = (await client.list_mcp_servers(str(tmp_path))).servers
    assert status.state == "untrusted"
    r = await run_hdsp(run_dir, "mcp", "trust", "bad", "--workspace", str(tmp_path), stdin="y\n")
    assert r.returncode == 0, r.stderr
    assert "Trusted: bad of " in r.stdout
    assert "bad  connected" in r.stdout
    r = await run_hdsp(run_dir, "mcp", "trust", "bad", "--revoke", "--workspace", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "bad  untrusted" in r.stdout
    # --yes: for scripts; it still prints what it trusted.
    r = await run_hdsp(run_dir, "mcp", "trust", "bad", "--yes", "--workspace", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Trusted: bad of ") and "runs without asking: ping" in r.stdout
