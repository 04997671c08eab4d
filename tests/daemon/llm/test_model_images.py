"""Images in requests as each model takes them, through the real SDKs to the
wire-level fakes: a vision model gets each picture scaled to its provider's
limits (measured with Pillow in the request the fake received), a model without
image input gets a text note and not one byte of the picture; a profile can say
which a model is."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from hdsp.daemon.config.profiles import Profiles
from hdsp.daemon.config.settings import Settings
from hdsp.daemon.conversation import (
    ApiMessage,
    ImageBlock,
    ModelInfo,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from hdsp.daemon.llm.anthropic import AnthropicProvider
from hdsp.daemon.llm.models import lookup_model
from hdsp.daemon.llm.openai_compat import OpenAICompatibleProvider
from hdsp.daemon.llm.registry import Providers
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.support.provider_helpers import collect


def _png(width: int, height: int) -> ImageBlock:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "steelblue").save(out, format="PNG")
    return ImageBlock(media_type="image/png", data=base64.b64encode(out.getvalue()).decode())


#: A plot as execute_code returns it (fitted to what the history keeps: 2048 px).
PLOT = _png(2048, 1536)
PASTED = _png(640, 480)


def _request() -> ModelRequest:
    return ModelRequest(
        system="",
        messages=[
            ApiMessage(role="user", ts=1, content=[TextBlock(text="Plot x."), PASTED]),
            ApiMessage(
                role="assistant",
                ts=2,
                content=[ToolUseBlock(id="call_1", name="execute_code", input={"code": "plot"})],
            ),
            ApiMessage(
                role="user",
                ts=3,
                content=[
                    ToolResultBlock(
                        tool_use_id="call_1", content=[TextBlock(text="[image 1: image/png]"), PLOT]
                    )
                ],
            ),
        ],
    )


def _size(data: str) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        return image.size


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def _anthropic_images(body: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for message in body["messages"]:
        for block in message["content"]:
            if block["type"] == "image":
                found.append(block)
            for part in block.get("content", []) if block["type"] == "tool_result" else []:
                if part["type"] == "image":
                    found.append(part)
    return found


async def test_claude_gets_the_plot_within_1568_px_and_1_15_megapixels(
    fake_anthropic: FakeAnthropic,
) -> None:
    provider = AnthropicProvider("claude-sonnet-4-5", "sk-ant-test", fake_anthropic.base_url)
    try:
        await collect(provider, _request())
    finally:
        await provider.aclose()
    [body] = fake_anthropic.requests
    pasted, plot = (_size(b["source"]["data"]) for b in _anthropic_images(body))
    assert pasted == (640, 480)  # within the limits: sent as it is
    width, height = plot
    assert max(width, height) <= 1568 and width * height <= 1_150_000
    assert abs(width / height - 2048 / 1536) < 0.01 and width > 1200


async def test_an_openai_vision_model_gets_the_plot_at_768_px_on_its_short_side(
    fake_openai: FakeOpenAI,
) -> None:
    provider = OpenAICompatibleProvider(
        model="gpt-4o",
        base_url=fake_openai.base_url,
        api_key="sk-test",
        model_info=lookup_model("openai", "gpt-4o"),
    )
    try:
        await collect(provider, _request())
    finally:
        await provider.aclose()
    [body] = fake_openai.requests
    urls = [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]
    sizes = [_size(url.partition(";base64,")[2]) for url in urls]
    assert sizes == [(640, 480), (1024, 768)]


async def test_a_text_only_model_gets_notes_and_no_image_bytes(
    fake_openai: FakeOpenAI, fake_anthropic: FakeAnthropic
) -> None:
    o3_mini = lookup_model("openai", "o3-mini")
    assert not o3_mini.supports_images
    openai = OpenAICompatibleProvider(
        model="o3-mini", base_url=fake_openai.base_url, api_key="sk-test", model_info=o3_mini
    )
    claude = AnthropicProvider(
        "claude-sonnet-4-5",
        "sk-ant-test",
        fake_anthropic.base_url,
        model_info=ModelInfo(supports_images=False),
    )
    try:
        await collect(openai, _request())
        await collect(claude, _request())
    finally:
        await openai.aclose()
        await claude.aclose()
    for body in (fake_openai.requests[0], fake_anthropic.requests[0]):
        sent = json.dumps(body)
        assert "image_url" not in sent and '"type": "image"' not in sent
        for picture in (PLOT, PASTED):
            assert picture.data[100:200] not in sent
        assert "[image: 640\\u00d7480 PNG, not shown: this model does not take images]" in sent
        assert "[image: 2048\\u00d71536 PNG, not shown: this model does not take images]" in sent
    # In the OpenAI request the note is the tool's message itself (no image to follow).
    tool = next(m for m in fake_openai.requests[0]["messages"] if m["role"] == "tool")
    assert "not shown" in tool["content"] and "in the next message" not in tool["content"]


def test_a_profile_says_whether_its_model_takes_images() -> None:
    settings = Settings.model_validate(
        {
            "profiles": {
                "local": {
                    "name": "local",
                    "provider": "openai-compatible",
                    "model": "gpt-4o",
                    "base_url": "http://localhost:1/v1",
                    "options": {"supports_images": False},
                },
                "llava": {
                    "name": "llava",
                    "provider": "openai-compatible",
                    "model": "o3-mini",
                    "base_url": "http://localhost:1/v1",
                    "options": {"supports_images": True},
                },
                "plain": {
                    "name": "plain",
                    "provider": "openai-compatible",
                    "model": "o3-mini",
                    "base_url": "http://localhost:1/v1",
                },
            }
        }
    )
    providers = Providers(Profiles(settings, env={}))
    assert providers.get("local").info().supports_images is False
    assert providers.get("llava").info().supports_images is True
    assert providers.get("plain").info().supports_images is False
