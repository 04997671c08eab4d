"""hdsp as an Agent Client Protocol agent (`hdsp acp`): ACP hosts such as
Jupyter AI and Zed drive hdsp tasks through it. See :mod:`.agent`."""

from __future__ import annotations

from .agent import HdspAcpAgent, serve
from .command import add_acp_parser

__all__ = ["HdspAcpAgent", "add_acp_parser", "serve"]
