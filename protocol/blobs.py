"""Images stored once, by content: the reference that stands for one in a record,
and `GetBlob`, which fetches one.

The daemon keeps each image (a pasted picture, a plot from a cell, an image the
model was shown) once, keyed by the sha256 of its bytes. GetTask and Replay put
the images back into the records they answer, so clients see Roo's shapes
(`images` as data URLs, mime bundles and image blocks as base64). Only when one
answer would carry more images than its budget (32 MiB of base64: half the
frame limit) does it keep references past it:

- ``hdsp-blob:<media type>;sha256,<hex>`` where a data URL was
  (``data:<media type>;base64,<data>``);
- ``hdsp-blob:sha256,<hex>`` where bare base64 was (a mime bundle's value).

A client that knows them fetches each with `GetBlob`; one that does not shows
the short URI where the image would be. `parse_blob_reference` reads one.

`GetBlob` answers with at most `maxMessageSize` (the Ack's) worth of base64 per
reply: a blob larger than that comes in pieces, `offset` and `length` choosing
the bytes (the result says the blob's whole `size`; ask again from
`offset + len(bytes)` until it is reached).
"""

from __future__ import annotations

import re
from typing import Annotated

from msgspec import Meta

from ._base import CommandBase, WireStruct

__all__ = [
    "BLOB_SCHEME",
    "BlobData",
    "GetBlob",
    "GetBlobData",
    "parse_blob_reference",
]

BLOB_SCHEME = "hdsp-blob:"
_REFERENCE = re.compile(r"hdsp-blob:(?:([A-Za-z0-9.+/-]+);)?sha256,([0-9a-f]{64})")


def parse_blob_reference(value: str) -> tuple[str, str | None] | None:
    """(sha256, media type) of a blob reference; the media type is None where the
    reference stands for bare base64. None when `value` is no reference."""
    match = _REFERENCE.fullmatch(value)
    if match is None:
        return None
    return match.group(2), match.group(1)


class GetBlobData(WireStruct, frozen=True):
    sha256: Annotated[
        str,
        Meta(
            pattern="^[0-9a-f]{64}$",
            description="The blob's sha256, 64 lowercase hex digits (from a reference).",
        ),
    ]
    offset: Annotated[int, Meta(ge=0, description="The first byte to send.")] = 0
    length: (
        Annotated[
            int,
            Meta(
                ge=0,
                description="How many bytes at most; the daemon sends fewer when they would "
                "not fit in one frame. Absent or null: all of it that fits.",
            ),
        ]
        | None
    ) = None


class GetBlob(CommandBase["BlobData"], tag="GetBlob", frozen=True):
    data: GetBlobData


class BlobData(WireStruct, frozen=True):
    sha256: Annotated[str, Meta(description="The blob's sha256.")]
    media_type: Annotated[
        str,
        Meta(
            description='E.g. "image/png"; "" when the writer did not say '
            "(bare base64 from a client)."
        ),
    ]
    size: Annotated[int, Meta(description="Bytes of the whole blob.")]
    offset: Annotated[int, Meta(description="Where `data` begins in the blob.")] = 0
    data: Annotated[
        str,
        Meta(description="base64 of the bytes from `offset` on (all of the rest when it fits)."),
    ] = ""
