"""What the tests of every provider share: a request, and reading its reply."""

from __future__ import annotations

import pytest

from hdsp.daemon.conversation import ApiMessage, Chunk, ModelRequest, TextBlock, TextDelta
from hdsp.daemon.llm import Provider, ProviderError

__all__ = ["REQUEST", "collect", "collect_until_error", "text_of"]

REQUEST = ModelRequest(
    system="You are a data scientist.",
    messages=[ApiMessage(role="user", content=[TextBlock(text="Describe data.csv")], ts=1)],
)


async def collect(provider: Provider, request: ModelRequest = REQUEST) -> list[Chunk]:
    chunks: list[Chunk] = []
    async with provider.stream(request) as stream:
        async for chunk in stream:
            chunks.append(chunk)
    return chunks


async def collect_until_error(
    provider: Provider, expected: type[ProviderError]
) -> tuple[list[Chunk], ProviderError]:
    """The chunks that arrived before the iteration raised `expected`."""
    chunks: list[Chunk] = []
    with pytest.raises(expected) as caught:
        async with provider.stream(REQUEST) as stream:
            async for chunk in stream:
                chunks.append(chunk)
    return chunks, caught.value


def text_of(chunks: list[Chunk]) -> str:
    return "".join(chunk.text for chunk in chunks if isinstance(chunk, TextDelta))
