"""The interface every provider implements."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from hdsp.daemon.conversation import Chunk, ModelInfo, ModelRequest

__all__ = ["Provider"]


class Provider(Protocol):
    """One configured model behind one API.

    `stream()` is an async context manager so that the HTTP response is closed
    when the caller leaves it, including on cancellation::

        async with provider.stream(request) as chunks:
            async for chunk in chunks:
                ...
    """

    @property
    def model(self) -> str: ...

    def info(self) -> ModelInfo: ...

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[Chunk]]: ...

    async def count_tokens(self, request: ModelRequest) -> int | None:
        """The prompt tokens `request` would take, by the provider's own counter or
        the model's tokenizer (:mod:`.tokens`); None when the provider has neither
        (then the caller estimates). Never raises for a counter that fails."""
        ...

    async def aclose(self) -> None: ...
