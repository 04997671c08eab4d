"""MCP client pieces that need no server: the configuration's shapes and checks,
the names tools are offered by, the trust digest, how results map, and the
servers a client offers one task."""

from __future__ import annotations

from pathlib import Path

import mcp.types as mcp_types
import pytest
from pydantic import ValidationError

from hdsp.daemon.config.mcp import McpServerDefinition, McpSettings, parse_servers
from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.mcp import McpHub, fingerprint, offered_name, result_from_mcp
from hdsp.daemon.mcp.hub import MAX_OFFERING_TASKS
from hdsp.protocol import OfferedMcpServer


def test_the_common_mcp_servers_shape_pastes_in() -> None:
    servers = parse_servers(
        {
            "mcpServers": {
                "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}},
                "web": {
                    "type": "streamable-http",
                    "url": "https://example.com/mcp",
                    "headers": {"Authorization": "Bearer ${secret:web}"},
                    "alwaysAllow": ["search"],
                    "disabled": True,
                    "startupTimeout": 5,
                },
            }
        }
    )
    assert servers["git"].transport == "stdio" and servers["git"].is_enabled
    web = servers["web"]
    assert web.transport == "http" and not web.is_enabled
    assert web.always_allow == ["search"] and web.startup_timeout == 5
    assert web.secrets() == ["web"]


@pytest.mark.parametrize(
    "entry",
    [
        {},
        {"command": "x", "url": "http://a/mcp"},
        {"url": "ftp://a/mcp"},
        {"type": "stdio", "url": "http://a/mcp"},
    ],
)
def test_a_server_is_either_a_command_or_a_url(entry: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        McpServerDefinition.model_validate(entry)


def test_settings_refuse_inline_credentials_and_bad_names() -> None:
    with pytest.raises(ValidationError, match=r"\$\{secret:NAME\}"):
        McpSettings.model_validate(
            {"servers": {"gh": {"command": "x", "env": {"GITHUB_TOKEN": "ghp_abc"}}}}
        )
    with pytest.raises(ValidationError, match="MCP server name"):
        McpSettings.model_validate({"servers": {"a b": {"command": "x"}}})
    ok = McpSettings.model_validate(
        {"servers": {"gh": {"command": "x", "env": {"GITHUB_TOKEN": "${secret:gh}", "DEBUG": "1"}}}}
    )
    assert ok.servers["gh"].secrets() == ["gh"]


def test_offered_names_fit_every_provider_and_never_collide() -> None:
    assert offered_name("time", "get_current_time") == "mcp__time__get_current_time"
    odd = offered_name("my.server", "do it/now")
    assert odd.startswith("mcp__my_server__do_it_now_") and len(odd) <= 64
    assert offered_name("my.server", "do it/now") != offered_name("my_server", "do_it_now")
    long = offered_name("s", "x" * 100)
    assert len(long) <= 64 and long != offered_name("s", "x" * 99)


def test_any_change_to_a_definition_changes_its_digest() -> None:
    base = McpServerDefinition(command="srv", args=["--a"])
    assert fingerprint(base) == fingerprint(McpServerDefinition(command="srv", args=["--a"]))
    for changed in (
        McpServerDefinition(command="srv", args=["--b"]),
        McpServerDefinition(command="srv", args=["--a"], env={"X": "1"}),
        McpServerDefinition(command="srv", args=["--a"], always_allow=["t"]),
        McpServerDefinition(command="srv2", args=["--a"]),
    ):
        assert fingerprint(changed) != fingerprint(base)


def test_results_map_to_text_images_and_errors() -> None:
    png = "iVBORw0KGgo="
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="hello"),
            mcp_types.ImageContent(type="image", data=png, mime_type="image/png"),
            mcp_types.ImageContent(type="image", data=png, mime_type="image/x-icon"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(
                    uri="file:///a.txt", mime_type="text/plain", text="inside"
                ),
            ),
            mcp_types.ResourceLink(type="resource_link", uri="demo://x", name="x"),
        ],
        is_error=False,
    )
    mapped = result_from_mcp(result, "srv")
    assert not mapped.is_error
    assert mapped.content[0] == TextBlock(text="hello")
    assert mapped.content[1] == ImageBlock(media_type="image/png", data=png)
    assert isinstance(mapped.content[2], TextBlock) and "image/x-icon" in mapped.content[2].text
    assert isinstance(mapped.content[3], TextBlock) and "inside" in mapped.content[3].text
    assert (
        isinstance(mapped.content[4], TextBlock) and "access_mcp_resource" in mapped.content[4].text
    )
    failed = result_from_mcp(
        mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text="no")], is_error=True
        ),
        "srv",
    )
    assert failed.is_error and isinstance(failed.content[0], TextBlock)
    assert failed.content[0].text.startswith("Error: the MCP server 'srv' reported an error")
    huge = result_from_mcp(
        mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x" * 200_000)]),
        "srv",
    )
    assert isinstance(huge.content[0], TextBlock) and len(huge.content[0].text) < 70_000


def test_servers_offered_to_a_task_are_its_own_bounded_and_never_replace_configured_ones(
    tmp_path: Path,
) -> None:
    settings = McpSettings(servers={"time": McpServerDefinition(command="mcp-server-time")})

    async def no_secret(name: str) -> str | None:
        return None

    async def no_event(event: object) -> None:
        return None

    hub = McpHub(
        lambda: settings, secrets=no_secret, emit=no_event, trust_file=tmp_path / "trust.json"
    )
    ws = str(tmp_path)
    mine = [
        OfferedMcpServer(name="time", command="python3"),
        OfferedMcpServer(name="notes", url="http://127.0.0.1:9/mcp", headers={"X": "y"}),
    ]
    hub.offer("t1", ws, mine)
    found, _ = hub._found(ws, "t1")
    # The configured `time` wins over the offered one of that name.
    assert found["time"].definition.command == "mcp-server-time" and found["time"].offered is None
    assert found["notes"].offered == ("t1", ws) and found["notes"].definition.transport == "http"
    # Another task, and hdsp's own listing, do not have them.
    assert "notes" not in hub._found(ws, "t2")[0] and "notes" not in hub._found(ws)[0]
    # Offering anew replaces; forgetting the task drops them.
    hub.offer("t1", ws, [OfferedMcpServer(name="other", command="python3")])
    assert set(hub._found(ws, "t1")[0]) == {"time", "other"}
    hub.forget_task("t1")
    assert set(hub._found(ws, "t1")[0]) == {"time"}
    # At most MAX_OFFERING_TASKS tasks keep offered servers: the least recently
    # offered go first.
    for n in range(MAX_OFFERING_TASKS + 1):
        hub.offer(f"task{n}", ws, [OfferedMcpServer(name="notes", command="python3")])
    assert "notes" not in hub._found(ws, "task0")[0]
    assert "notes" in hub._found(ws, "task1")[0]
    assert "notes" in hub._found(ws, f"task{MAX_OFFERING_TASKS}")[0]
