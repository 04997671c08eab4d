"""What the adapter remembers of an ACP session across its own restarts.

ACP names a session at `session/new`, before its first prompt; hdsp makes a
task only with its first message. A small record per session (in the user's
state dir, `hdsp/acp-sessions/<id>.json`, 0600) ties the two together, so that
a new adapter process, started by an editor that reloaded, finds the task again
at `session/load`. It also keeps what the host chose for the session before the
task existed (mode, profile), the MCP servers the host offered, and the scopes
the user allowed always.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import msgspec
from platformdirs import user_state_dir

from ..private_files import write_whole

__all__ = ["SessionRecord", "SessionRecords"]

_ID = re.compile(r"^acp-[0-9a-f]{32}$")


class SessionRecord(msgspec.Struct, kw_only=True, rename="camel"):
    session_id: str
    cwd: str
    task_id: str | None = None
    mode: str | None = None
    profile: str | None = None
    #: The MCP servers the host offered at session/new or session/load, as it
    #: sent them but for the values of their env and headers (names only).
    mcp_servers: list[dict[str, Any]] = []
    #: What "allow always" covers in this session (see permissions.always_scope).
    always_allowed: list[str] = []


_decoder = msgspec.json.Decoder(SessionRecord)


class SessionRecords:
    """The records, one file per session."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else Path(user_state_dir("hdsp")) / "acp-sessions"

    @staticmethod
    def new_id() -> str:
        return f"acp-{uuid.uuid4().hex}"

    def _path(self, session_id: str) -> Path | None:
        if not _ID.match(session_id):
            return None  # (never a path from the host's text)
        return self.root / f"{session_id}.json"

    def load(self, session_id: str) -> SessionRecord | None:
        path = self._path(session_id)
        if path is None:
            return None
        try:
            return _decoder.decode(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, msgspec.DecodeError):
            return None

    def save(self, record: SessionRecord) -> None:
        """Write `record` whole, atomically (a reader sees the old or the new)."""
        path = self._path(record.session_id)
        assert path is not None
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_whole(path, msgspec.json.encode(record))
