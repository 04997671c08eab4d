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

Each provider then sees the image at its own limits, and only if its model
takes images (`images_for_model`, when a request is built):

- Anthropic: at most 1568 pixels on the long edge and about 1.15 megapixels;
  anything larger is scaled down by the API itself, at a cost in latency and no
  gain ("Evaluate image size", https://docs.claude.com/en/docs/build-with-claude/vision);
  at most 5 MB per image (its base64), so 3.75 MB of bytes.
- OpenAI: with detail "high" an image is first scaled to fit a 2048 x 2048
  square, then so that its short side is at most 768 pixels ("Calculating
  costs", https://platform.openai.com/docs/guides/images-vision); pixels beyond
  that are thrown away by the API.
- A model without image input (`ModelInfo.supports_images` False, from the
  model table, the user's `models` entry or the profile's `supports_images`
  option) gets a text note in place of each image, which says what it was
  ("[image: 640x480 PNG, not shown: this model does not take images]").

What the history stores (`fit_image` with `DEFAULT_LIMITS`) is the largest any
provider uses, 2048 pixels on the long side, so that each can scale it to its own.

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
import functools
import io
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from hdsp.daemon.conversation import ApiMessage, Block, ImageBlock, TextBlock, ToolResultBlock

from .errors import InvalidRequest, ProviderError

__all__ = [
    "ANTHROPIC_LIMITS",
    "DEFAULT_LIMITS",
    "OPENAI_LIMITS",
    "ImageLimits",
    "describe_image",
    "fit_image",
    "has_images",
    "image_block",
    "image_refused",
    "images_for_model",
    "recent_images_only",
    "without_images",
]

_READABLE = frozenset({"image/png", "image/jpeg"})


@dataclass(frozen=True)
class ImageLimits:
    #: Bytes of the encoded image (before base64).
    max_bytes: int = 3_750_000
    #: Pixels on the longest side.
    max_side: int = 2048
    #: Images with more pixels than this are refused undecoded (a decompression
    #: bomb: a small PNG of 100,000 x 100,000 pixels would take 30 GB).
    max_pixels: int = 64_000_000
    #: Pixels in all (width x height) an image is scaled down to, if any bound.
    max_area: int | None = None
    #: Pixels on the shortest side an image is scaled down to, if any bound.
    max_short_side: int | None = None

    def size_for(self, width: int, height: int) -> tuple[int, int]:
        """The size an image of `width` x `height` is scaled down to (the same
        when it is within the limits), its aspect ratio kept."""
        scale = min(1.0, self.max_side / max(width, height))
        if self.max_area is not None and width * height > self.max_area:
            scale = min(scale, math.sqrt(self.max_area / (width * height)))
        if self.max_short_side is not None:
            scale = min(scale, self.max_short_side / min(width, height))
        if scale >= 1.0:
            return width, height
        return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


#: What the history keeps: the largest any provider uses (OpenAI's 2048 side).
DEFAULT_LIMITS = ImageLimits()
#: Anthropic: 1568 px on the long edge, ~1.15 megapixels, 5 MB of base64 (see
#: the module docstring for the documentation this follows).
ANTHROPIC_LIMITS = ImageLimits(max_side=1568, max_area=1_150_000)
#: OpenAI (detail "high"): fits 2048 x 2048, then 768 px on the short side.
OPENAI_LIMITS = ImageLimits(max_side=2048, max_short_side=768)


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
    size = limits.size_for(width, height)
    fits = size == (width, height) and len(raw) <= limits.max_bytes
    actual = Image.MIME.get(image.format or "", block.media_type)
    if fits and actual in _READABLE:
        if actual == block.media_type:
            return block
        return ImageBlock(media_type=actual, data=block.data)
    try:
        with image:
            image.draft("RGB", size)  # JPEG: decode small
            scaled: Image.Image = image
            if image.size != size:
                scaled = image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
            data, media_type = _encode(scaled, limits.max_bytes)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        return _stub(f"it could not be decoded ({type(exc).__name__})")
    if data is None:
        return _stub(f"it stays over {limits.max_bytes:,} bytes even when scaled down")
    return ImageBlock(media_type=media_type, data=base64.b64encode(data).decode("ascii"))


def describe_image(block: ImageBlock) -> str:
    """What `block` is, in words: "640x480 PNG" (its header only is read)."""
    from PIL import Image, UnidentifiedImageError

    kind = block.media_type.removeprefix("image/").upper()
    try:
        raw = base64.b64decode(block.data, validate=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(raw)) as image:
                width, height = image.size
                kind = image.format or kind
    except (binascii.Error, ValueError, UnidentifiedImageError, OSError, SyntaxError):
        return f"{kind} that cannot be read"
    except Image.DecompressionBombError:
        return f"{kind} of too many pixels"
    return f"{width}\u00d7{height} {kind}"


def _no_images_note(block: ImageBlock) -> TextBlock:
    return TextBlock(
        text=f"[image: {describe_image(block)}, not shown: this model does not take images]"
    )


@functools.lru_cache(maxsize=16)
def _for_model(block: ImageBlock, limits: ImageLimits | None) -> ImageBlock | TextBlock:
    """One image as a model gets it (cached: a history sends the same images on
    every turn, and their strings keep their hashes)."""
    if limits is None:
        return _no_images_note(block)
    return fit_image(block, limits)


def _blocks_for_model(blocks: Sequence[Block], limits: ImageLimits | None) -> list[Block]:
    out: list[Block] = []
    for block in blocks:
        if isinstance(block, ImageBlock):
            out.append(_for_model(block, limits))
        elif isinstance(block, ToolResultBlock) and any(
            isinstance(part, ImageBlock) for part in block.content
        ):
            parts = [
                _for_model(part, limits) if isinstance(part, ImageBlock) else part
                for part in block.content
            ]
            out.append(msgspec.structs.replace(block, content=parts))
        else:
            out.append(block)
    return out


def has_images(messages: Sequence[ApiMessage]) -> bool:
    """Whether any message carries an image (in a tool result too)."""
    return any(_count(m.content) for m in messages)


def images_for_model(messages: list[ApiMessage], limits: ImageLimits | None) -> list[ApiMessage]:
    """`messages` as a model gets them: each image fitted to `limits`, or, with
    None (a model without image input), a text note that says what it was; the
    same list when there is no image. Decodes images: call it from a worker
    thread when there are some (`has_images`)."""
    if not has_images(messages):
        return messages
    return [
        msgspec.structs.replace(m, content=_blocks_for_model(m.content, limits))
        if _count(m.content)
        else m
        for m in messages
    ]


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
