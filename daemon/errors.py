"""Errors a command handler raises to answer with an error reply.

    CommandError(code, message)     -> Reply{ok: false, error: {code, message}}

Anything else escaping a handler is a bug: the client gets `internal` and the log
gets the traceback.
"""

from __future__ import annotations

from typing import Any

from hdsp.protocol import ErrorCode

__all__ = ["CommandError"]


class CommandError(Exception):
    def __init__(self, code: ErrorCode, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
