"""`hdsp`, the command-line frontend of hdspd: a client of the library above
(`hdsp.client`) like any other.

:mod:`.parser` builds the parser, one row per command, and :mod:`.main` runs a
command; each `*_command` module holds the parsers and the handlers of one group
of commands (`hdsp run`, `hdsp tasks`, `hdsp config`, `hdsp mcp`, ...); the rest
draw a task on the terminal (:mod:`.render`, :mod:`.live`,
:mod:`.follow`, :mod:`.chat`, :mod:`.status_line`) or read what the user types.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
