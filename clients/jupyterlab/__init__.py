"""hdsp's JupyterLab plugin, server half: a jupyter_server extension that relays the
browser's commands to the user's hdspd and streams its events back over one
WebSocket (see CONTRACT.md in this directory)."""

from __future__ import annotations

from typing import Any

from .extension import HdspExtension

__all__ = ["HdspExtension"]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "hdsp.client.jupyterlab", "app": HdspExtension}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    # Jupyter Server loads an ExtensionApp through its extension point; this entry
    # point is for servers that call the classic hook by name.
    HdspExtension._load_jupyter_server_extension(serverapp)  # type: ignore[no-untyped-call]
