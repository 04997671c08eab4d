"""Images a model can take: fitted to the providers' limits, and few per request.

A plot from a cell can be a 30 MB PNG; sent as it is, it makes a 41 MB request
that every later turn sends again, and a provider refuses it ("image exceeds
5 MB"). So every image that enters the API history passes `fit_image` first:

- an image within `ImageLimits` (bytes and pixels on the longest side) in a type
  every provider reads (PNG, JPEG) is kept byte for byte;
- a larger one is decoded with Pillow, scaled down to the longest side, and
  encoded again as PNG, or as JPEG when PNG stays over the byte limit;
- one that cannot be decoded, or that is a decompression bomb (more pixels than
  `ImageLimits.max_pixels` before any decoding), becomes a short text block that
  says so, which the model can read.

The limits are the strictest of the providers hdsp speaks to: Anthropic takes at
most 5 MB of base64 per image (3.75 MB of bytes) and scales anything over 1568
pixels on the longest side down itself, so more pixels buy nothing; OpenAI's
"high" detail works on at most 2048 x 768 tiles of the same order.

Requests carry only the most recent images (`recent_images_only`): older ones
become a text stub in the request while the stored history keeps them, so a
long analysis with a plot per step does not resend every plot every turn. When
a provider still refuses an image, `without_images` gives the request the task
retries, with every image replaced by a stub.

Decoding is CPU work of up to a second for a huge image: call `fit_image` from a
worker thread when the image may be big.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from hdsp.daemon.conversation import ApiMessage, Block, ImageBlock, TextBlock, ToolResultBlock

from .errors import InvalidRequest, ProviderError

__all__ = [
    "DEFAULT_LIMITS",
    "ImageLimits",
    "fit_image",
    "image_block",
    "image_refused",
    "recent_images_only",
    "without_images",
]

_READABLE = frozenset({"image/png", "image/jpeg"})


@dataclass(frozen=True)
class ImageLimits:
    #: Bytes of the encoded image (before base64).
    max_bytes: int = 3_750_000
    #: Pixels on the longest side.
    max_side: int = 1568
    #: Images with more pixels than this are refused undecoded (a decompression
    #: bomb: a small PNG of 100,000 x 100,000 pixels would take 30 GB).
    max_pixels: int = 64_000_000


DEFAULT_LIMITS = ImageLimits()


def image_block(value: str) -> ImageBlock:
    """An image a client sent (a data URL, or bare base64 taken as PNG) as a block."""
    media_type, _, data = value.removeprefix("data:").partition(";base64,")
    if not data:
        media_type, data = "image/png", value
    return ImageBlock(media_type=media_type or "image/png", data=data.replace("\n", ""))


def _stub(why: str) -> TextBlock:
    return TextBlock(text=f"[image not shown: {why}]")


def fit_image(block: ImageBlock, limits: ImageLimits = DEFAULT_LIMITS) -> ImageBlock | TextBlock:
    """`block` within `limits`, scaled down and re-encoded if need be, or a text
    block saying why no image can be shown."""
    from PIL import Image, UnidentifiedImageError

    try:
        raw = base64.b64decode(block.data, validate=False)
    except (binascii.Error, ValueError):
        return _stub("its data is not valid base64")
    try:
        with warnings.catch_warnings():
            # Pillow warns above its own pixel limit, and raises at twice it;
            # either way this is an image not to decode.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw))
            width, height = image.size
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        return _stub("it has too many pixels to decode safely")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return _stub(f"it is not a readable {block.media_type} image")
    if width * height > limits.max_pixels:
        return _stub(f"{width} x {height} pixels is too many to decode safely")
    fits = max(width, height) <= limits.max_side and len(raw) <= limits.max_bytes
    actual = Image.MIME.get(image.format or "", block.media_type)
    if fits and actual in _READABLE:
        if actual == block.media_type:
            return block
        return ImageBlock(media_type=actual, data=block.data)
    try:
        with image:
            image.draft("RGB", (limits.max_side, limits.max_side))  # JPEG: decode small
            image.thumbnail((limits.max_side, limits.max_side))
            data, media_type = _encode(image, limits.max_bytes)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        return _stub(f"it could not be decoded ({type(exc).__name__})")
    if data is None:
        return _stub(f"it stays over {limits.max_bytes:,} bytes even when scaled down")
    return ImageBlock(media_type=media_type, data=base64.b64encode(data).decode("ascii"))


def _encode(image: object, max_bytes: int) -> tuple[bytes | None, str]:
    """PNG if it fits in `max_bytes` (plots are flat colour: PNG is small and
    exact), else JPEG at falling quality."""
    from PIL import Image

    assert isinstance(image, Image.Image)
    if image.mode not in ("RGB", "RGBA", "L", "LA", "P"):
        image = image.convert("RGBA")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    if out.tell() <= max_bytes:
        return out.getvalue(), "image/png"
    if image.mode in ("RGBA", "LA", "P"):
        flat = Image.new("RGB", image.size, "white")
        rgba = image.convert("RGBA")
        flat.paste(rgba, mask=rgba.getchannel("A"))
        image = flat
    for quality in (85, 70, 50):
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=quality)
        if out.tell() <= max_bytes:
            return out.getvalue(), "image/jpeg"
    return None, ""


def _replace_images(blocks: Sequence[Block], keep: set[int], counter: list[int]) -> list[Block]:
    out: list[Block] = []
    for block in blocks:
        if isinstance(block, ImageBlock):
            counter[0] += 1
            out.append(block if counter[0] in keep else _OLDER)
        elif isinstance(block, ToolResultBlock) and any(
            isinstance(part, ImageBlock) for part in block.content
        ):
            parts = _replace_images(block.content, keep, counter)
            content = [p for p in parts if isinstance(p, TextBlock | ImageBlock)]
            out.append(msgspec.structs.replace(block, content=content))
        else:
            out.append(block)
    return out


_OLDER = TextBlock(
    text="[an earlier image, not sent again to save context; it is in the task's history]"
)


def _count(blocks: Sequence[Block]) -> int:
    n = 0
    for block in blocks:
        if isinstance(block, ImageBlock):
            n += 1
        elif isinstance(block, ToolResultBlock):
            n += _count(block.content)
    return n


def recent_images_only(messages: list[ApiMessage], keep: int) -> list[ApiMessage]:
    """`messages` with every image but the last `keep` replaced by a text stub;
    the same list when there is nothing to replace (the common case: no copy)."""
    counts = [_count(m.content) for m in messages]
    total = sum(counts)
    if total <= keep:
        return messages
    kept = set(range(total - keep + 1, total + 1))
    counter = [0]
    out = []
    for message, n in zip(messages, counts, strict=True):
        if n == 0:
            out.append(message)
            continue
        content = _replace_images(message.content, kept, counter)
        out.append(msgspec.structs.replace(message, content=content))
    return out


def without_images(messages: list[ApiMessage]) -> list[ApiMessage]:
    """`messages` with no image at all (after a provider refused one)."""
    return recent_images_only(messages, 0)


def image_refused(exc: ProviderError) -> bool:
    """Whether a provider refused a request because of an image in it (a 400 that
    names an image: too large, a type it does not read, images unsupported)."""
    return isinstance(exc, InvalidRequest) and "image" in exc.message.lower()
