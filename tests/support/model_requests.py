"""What the scripted model received: the tool results and images of the
requests the fake recorded (OpenAI's chat completions shape)."""

from __future__ import annotations

from typing import Any

from tests.fakes.openai_server import FakeOpenAI

__all__ = ["image_urls", "tool_results"]


def tool_results(fake: FakeOpenAI, request: int) -> list[str]:
    """The tool results the model received in request `request`."""
    return [m["content"] for m in fake.requests[request]["messages"] if m["role"] == "tool"]


def image_urls(request: dict[str, Any]) -> list[str]:
    """The data URLs of every image in one request, in order."""
    urls = []
    for message in request["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            urls += [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
    return urls
