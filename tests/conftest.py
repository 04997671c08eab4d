"""Shared test set-up: anyio on asyncio (pyzmq's asyncio sockets need it)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
