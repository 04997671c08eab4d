"""Which servers of a workspace's `.hdsp/mcp.json` the user trusts.

A workspace file can start processes (a stdio server is a command) and send
secrets to a URL (`${secret:NAME}` in a header), and anyone who can write the
workspace (a cloned repository, the agent itself) can write that file. So hdsp
starts a workspace's server only once the user trusted it, and what is trusted
is the exact definition: a digest of the server's whole entry (command,
arguments, environment, working directory, URL, headers, alwaysAllow,
timeouts), kept per workspace and server name in `mcp-trust.json` in hdsp's
data dir. Any change to the entry makes it untrusted again. The settings'
servers are the user's own and need no trust.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import structlog

from hdsp.daemon.atomic_write import write_atomically
from hdsp.daemon.config.mcp import McpServerDefinition

__all__ = ["TrustStore", "fingerprint"]

log = structlog.get_logger("hdsp.mcp")


def fingerprint(definition: McpServerDefinition) -> str:
    """A digest of everything the definition says."""
    document = definition.model_dump(mode="json")
    encoded = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()


class TrustStore:
    """`{workspace: {server: fingerprint}}`, in one private JSON file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._trusted: dict[str, dict[str, str]] = {}
        try:
            loaded = json.loads(path.read_text())
        except FileNotFoundError:
            loaded = {}
        except (OSError, ValueError) as exc:
            log.warning("mcp trust file unreadable; trusting nothing", error=str(exc))
            loaded = {}
        if isinstance(loaded, dict):
            for workspace, servers in loaded.items():
                if isinstance(workspace, str) and isinstance(servers, dict):
                    self._trusted[workspace] = {
                        k: v for k, v in servers.items() if isinstance(v, str)
                    }

    def is_trusted(self, workspace: str, name: str, definition: McpServerDefinition) -> bool:
        return self._trusted.get(workspace, {}).get(name) == fingerprint(definition)

    def set(
        self, workspace: str, name: str, definition: McpServerDefinition, trusted: bool
    ) -> None:
        servers = self._trusted.setdefault(workspace, {})
        if trusted:
            servers[name] = fingerprint(definition)
        else:
            servers.pop(name, None)
        if not servers:
            self._trusted.pop(workspace, None)
        text = json.dumps(self._trusted, indent=2, sort_keys=True)
        write_atomically(self._path, text.encode(), mode=0o600)
