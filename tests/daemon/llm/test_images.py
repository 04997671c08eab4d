"""Images fitted to what a model takes, and how many a request carries."""

from __future__ import annotations

import base64
import io
import os
import struct
import zlib

from PIL import Image

from hdsp.daemon.conversation import ApiMessage, ImageBlock, TextBlock, ToolResultBlock
from hdsp.daemon.llm.images import (
    ANTHROPIC_LIMITS,
    OPENAI_LIMITS,
    ImageLimits,
    describe_image,
    fit_image,
    image_block,
    images_for_model,
    recent_images_only,
    without_images,
)


def _png(width: int, height: int, *, noise: bool = False) -> ImageBlock:
    if noise:
        image = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    else:
        image = Image.new("RGB", (width, height), "steelblue")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return ImageBlock(media_type="image/png", data=base64.b64encode(out.getvalue()).decode())


def _decoded(block: ImageBlock) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(block.data)))


def test_an_image_within_the_limits_is_kept_byte_for_byte() -> None:
    block = _png(800, 600)
    assert fit_image(block) is block


def test_a_large_image_is_scaled_to_the_longest_side() -> None:
    fitted = fit_image(_png(4000, 1000))
    assert isinstance(fitted, ImageBlock) and fitted.media_type == "image/png"
    assert _decoded(fitted).size == (2048, 512)


def test_an_image_over_the_byte_limit_becomes_a_smaller_jpeg() -> None:
    limits = ImageLimits(max_bytes=200_000, max_side=600)
    fitted = fit_image(_png(600, 600, noise=True), limits)  # ~1 MB of PNG noise
    assert isinstance(fitted, ImageBlock) and fitted.media_type == "image/jpeg"
    assert len(base64.b64decode(fitted.data)) <= 200_000


def test_a_mislabelled_image_gets_its_real_type() -> None:
    out = io.BytesIO()
    Image.new("RGB", (10, 10)).save(out, format="JPEG")
    block = ImageBlock(media_type="image/png", data=base64.b64encode(out.getvalue()).decode())
    fitted = fit_image(block)
    assert isinstance(fitted, ImageBlock) and fitted.media_type == "image/jpeg"


def test_garbage_and_bombs_become_text_the_model_can_read() -> None:
    garbage = fit_image(ImageBlock(media_type="image/png", data="bm90IGFuIGltYWdl"))
    assert isinstance(garbage, TextBlock) and "not a readable image/png" in garbage.text
    # A PNG header claiming 100,000 x 100,000 pixels: never decoded.
    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n"
    for kind, body in ((b"IHDR", ihdr), (b"IDAT", zlib.compress(b"\0" * 64))):
        png += struct.pack(">I", len(body)) + kind + body
        png += struct.pack(">I", zlib.crc32(kind + body))
    bomb = fit_image(ImageBlock(media_type="image/png", data=base64.b64encode(png).decode()))
    assert isinstance(bomb, TextBlock) and "too many pixels" in bomb.text


def test_image_block_reads_data_urls_and_bare_base64() -> None:
    assert image_block("data:image/jpeg;base64,AAAA") == ImageBlock(
        media_type="image/jpeg", data="AAAA"
    )
    assert image_block("AAAA") == ImageBlock(media_type="image/png", data="AAAA")


def _history(images: int) -> list[ApiMessage]:
    picture = ImageBlock(media_type="image/png", data="AAAA")
    messages = [ApiMessage(role="user", content=[TextBlock(text="go")], ts=1)]
    for i in range(images):
        messages.append(
            ApiMessage(
                role="user",
                content=[
                    ToolResultBlock(tool_use_id=f"t{i}", content=[TextBlock(text="p"), picture])
                ],
                ts=10 + i,
            )
        )
    return messages


def _images(messages: list[ApiMessage]) -> list[int]:
    """The ts of each message that still carries an image."""
    return [
        m.ts
        for m in messages
        for b in m.content
        if isinstance(b, ToolResultBlock) and any(isinstance(p, ImageBlock) for p in b.content)
    ]


def test_a_request_carries_only_the_most_recent_images() -> None:
    history = _history(6)
    sent = recent_images_only(history, 4)
    assert _images(sent) == [12, 13, 14, 15]
    stub = sent[1].content[0]
    assert isinstance(stub, ToolResultBlock) and "earlier image" in str(stub.content)
    assert _images(history) == [10, 11, 12, 13, 14, 15], "the history itself is untouched"
    few = _history(3)
    assert recent_images_only(few, 4) is few
    assert _images(without_images(history)) == []


def test_each_provider_gets_the_size_its_documentation_names() -> None:
    square, wide = _png(2000, 2000), _png(3000, 1000)
    # Anthropic: 1568 on the long edge and ~1.15 megapixels (1092 x 1092 for a square).
    for block in (square, wide):
        fitted = fit_image(block, ANTHROPIC_LIMITS)
        assert isinstance(fitted, ImageBlock)
        width, height = _decoded(fitted).size
        assert max(width, height) <= 1568 and width * height <= 1_150_000
    assert _decoded(fit_image(square, ANTHROPIC_LIMITS)).size == (1072, 1072)  # type: ignore[arg-type]
    # OpenAI: within 2048 x 2048, then 768 on the short side.
    assert _decoded(fit_image(square, OPENAI_LIMITS)).size == (768, 768)  # type: ignore[arg-type]
    assert _decoded(fit_image(wide, OPENAI_LIMITS)).size == (2048, 682)  # type: ignore[arg-type]
    assert ImageLimits().size_for(640, 480) == (640, 480)


def test_a_model_without_image_input_gets_a_note_that_says_what_the_image_was() -> None:
    history = [
        ApiMessage(role="user", content=[TextBlock(text="look"), _png(640, 480)], ts=1),
        ApiMessage(
            role="user",
            content=[
                ToolResultBlock(tool_use_id="t1", content=[TextBlock(text="ok"), _png(30, 20)])
            ],
            ts=2,
        ),
    ]

    def count(messages: list[ApiMessage]) -> int:
        return sum(
            isinstance(b, ImageBlock)
            or (
                isinstance(b, ToolResultBlock) and any(isinstance(p, ImageBlock) for p in b.content)
            )
            for m in messages
            for b in m.content
        )

    notes = images_for_model(history, None)
    assert count(notes) == 0
    assert notes[0].content[1] == TextBlock(
        text="[image: 640\u00d7480 PNG, not shown: this model does not take images]"
    )
    result = notes[1].content[0]
    assert isinstance(result, ToolResultBlock)
    assert result.content[1] == TextBlock(
        text="[image: 30\u00d720 PNG, not shown: this model does not take images]"
    )
    # A vision model gets them, fitted; a history without images is passed as it is.
    assert count(images_for_model(history, ANTHROPIC_LIMITS)) == 2
    plain = [ApiMessage(role="user", content=[TextBlock(text="hi")], ts=1)]
    assert images_for_model(plain, None) is plain
    assert describe_image(ImageBlock(media_type="image/png", data="bm90")) == (
        "PNG that cannot be read"
    )
