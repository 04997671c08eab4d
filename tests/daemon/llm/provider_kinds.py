"""Each provider with its wire-level fake, for the tests that run against every one
(test_provider_contract.py, test_llm_faults.py; the fixtures are in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hdsp.daemon.conversation import StreamTimeouts
from hdsp.daemon.llm import Provider
from hdsp.daemon.llm.anthropic import AnthropicProvider
from hdsp.daemon.llm.openai_compat import OpenAICompatibleProvider
from tests.fakes import anthropic_server, openai_server

__all__ = ["ANTHROPIC_KEY", "KINDS", "Kind"]

#: The key of the Anthropic provider of KINDS (the fake checks that one is sent).
ANTHROPIC_KEY = "sk-ant-test-not-a-real-key"


@dataclass(frozen=True)
class Kind:
    """A provider, its fake server and the fake's scripted replies."""

    fake: Callable[[], Any]
    provider: Callable[[str, StreamTimeouts], Provider]
    reply: Any
    #: The environment variable a rejected key's error message points to.
    key_variable: str
    #: Which SSE event of a text reply (counted from 0) carries its first text.
    text_at: int


KINDS = {
    "anthropic": Kind(
        anthropic_server.FakeAnthropic,
        lambda url, t: AnthropicProvider("claude-test", ANTHROPIC_KEY, url, timeouts=t),
        anthropic_server.Reply,
        key_variable="ANTHROPIC_API_KEY",
        text_at=3,  # after message_start, content_block_start and ping
    ),
    "openai": Kind(
        openai_server.FakeOpenAI,
        lambda url, t: OpenAICompatibleProvider("gpt-test", url, "sk-test", timeouts=t),
        openai_server.Reply,
        key_variable="HDSP_API_KEY",
        text_at=1,  # after the role chunk
    ),
}
