"""Fixtures of more than one module of the daemon's tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Leave the process's logging as the test found it: its root handlers and
    level, warnings capture, structlog's context and configuration."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    logging.captureWarnings(False)
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()
