"""Images stored once, by their content.

An image reaches several records: the UI message that shows it (`images` of a
user's message, the mime bundle of a plot in a `cell_output`), the event that
announced that message, and the API history the model reads (an image block,
also inside a tool result). Each used to hold the image's base64. Now the
database keeps the bytes once, in the `blobs` table under their sha256, and
each record holds a *reference* in place of the base64:

- ``hdsp-blob:<media type>;sha256,<hex>`` (see :mod:`hdsp.protocol.blobs`) in place of a data URL
  (``data:<media type>;base64,<data>``): it keeps the data URL's shape;
- ``hdsp-blob:sha256,<hex>`` in place of bare base64 (a mime bundle's value,
  an image block's data).

This happens at the store's edge and nowhere else: `extract_blobs` rewrites a
body just before the database writes it (the blobs go in the same transaction
as the record that refers to them, so no record can refer to a blob that is not
committed), and `resolve_references` puts the base64 back into bodies the
database reads. The daemon's engine, the events it publishes live, and what
GetTask and Replay answer keep their shapes: an old client never sees a
reference unless a read passes its budget (a GetTask or Replay page would then
not fit in a frame); the references left in it are then shown as they are (a
short URI, where the image would be) and a client fetches each with `GetBlob`.

Only base64 of at least `MIN_BLOB_CHARS` that encodes its bytes canonically (so
that it comes back byte for byte) is stored as a blob; smaller or odd images
stay inline.
"""

from __future__ import annotations

import binascii
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from hdsp.protocol import BLOB_SCHEME

__all__ = [
    "BLOB_MARKER",
    "MIN_BLOB_CHARS",
    "Blob",
    "blob_reference",
    "extract_blobs",
    "referenced_hashes",
    "resolve_references",
]

#: Base64 characters below which an image stays inline (a reference and its row
#: cost about 200 bytes).
MIN_BLOB_CHARS = 1024

#: A body that can hold an image: an image block, a mime type or a data URL.
_CANDIDATE = re.compile(rb'"type":"image"|image/')
#: A reference, in a body as stored (also inside a JSON string: its characters
#: need no escaping).
_REFERENCE = re.compile(rb"hdsp-blob:(?:([A-Za-z0-9.+/-]+);)?sha256,([0-9a-f]{64})")
#: What every reference begins with, as bytes: a body without it has none.
BLOB_MARKER = BLOB_SCHEME.encode()


@dataclass(frozen=True, slots=True)
class Blob:
    sha256: str
    media_type: str
    data: bytes


def blob_reference(sha256: str, media_type: str | None = None) -> str:
    """The reference that stands for a blob: in place of a data URL when
    `media_type` is given, else in place of bare base64."""
    if media_type:
        return f"{BLOB_SCHEME}{media_type};sha256,{sha256}"
    return f"{BLOB_SCHEME}sha256,{sha256}"


class _Extraction:
    def __init__(self) -> None:
        self.blobs: dict[str, Blob] = {}
        #: References made so far (an image seen twice counts twice).
        self.references = 0

    def blob(self, media_type: str, b64: str) -> str | None:
        """The sha256 of the image `b64` holds, recorded as a blob; None when it
        stays inline (small, not base64, or not in canonical form)."""
        if len(b64) < MIN_BLOB_CHARS or not b64.isascii():
            return None
        try:
            raw = binascii.a2b_base64(b64, strict_mode=True)
        except (binascii.Error, ValueError):
            return None
        if binascii.b2a_base64(raw, newline=False) != b64.encode("ascii"):
            return None
        sha = hashlib.sha256(raw).hexdigest()
        self.references += 1
        if sha not in self.blobs:
            self.blobs[sha] = Blob(sha, media_type, raw)
        return sha

    def data_url(self, value: str) -> str:
        if value.startswith("data:"):
            media_type, sep, b64 = value[5:].partition(";base64,")
            if sep and "," not in media_type and (sha := self.blob(media_type, b64)):
                return blob_reference(sha, media_type or "application/octet-stream")
            return value
        sha = self.blob("", value)  # bare base64, as a client may send
        return value if sha is None else blob_reference(sha)

    def bare(self, media_type: str, value: str) -> str:
        sha = self.blob(media_type, value)
        return value if sha is None else blob_reference(sha)

    def walk(self, value: Any) -> Any:
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict | list):
                    value[i] = self.walk(item)
            return value
        if not isinstance(value, dict):
            return value
        if value.get("type") == "image":  # an image block of the API history
            data = value.get("data")
            media_type = value.get("media_type", value.get("mediaType"))
            if isinstance(data, str) and isinstance(media_type, str):
                value["data"] = self.bare(media_type, data)
        if value.get("say") == "cell_output":  # its text is a CellOutput, in JSON
            text = value.get("text")
            if isinstance(text, str) and len(text) >= MIN_BLOB_CHARS:
                value["text"] = self.nested(text)
        for key, item in value.items():
            if isinstance(item, str):
                if key.startswith("image/"):  # a mime bundle
                    value[key] = self.bare(key, item)
            elif key == "images" and isinstance(item, list):
                value[key] = [self.data_url(v) if isinstance(v, str) else v for v in item]
            elif isinstance(item, dict | list):
                value[key] = self.walk(item)
        return value

    def nested(self, text: str) -> str:
        if not _CANDIDATE.search(text.encode()):
            return text
        try:
            doc = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return text
        before = self.references
        doc = self.walk(doc)
        if self.references == before:
            return text
        return msgspec.json.encode(doc).decode()


def extract_blobs(body: bytes) -> tuple[bytes, list[Blob]]:
    """`body` (a JSON record) with each image's base64 replaced by a reference,
    and the images as blobs; `body` itself when it holds none."""
    if len(body) < MIN_BLOB_CHARS or not _CANDIDATE.search(body):
        return body, []
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body, []
    extraction = _Extraction()
    doc = extraction.walk(doc)
    if not extraction.references:
        return body, []
    return msgspec.json.encode(doc), list(extraction.blobs.values())


def referenced_hashes(body: bytes) -> list[str]:
    """The sha256 of every blob `body` refers to, in order (repeats included)."""
    if BLOB_MARKER not in body:
        return []
    return [m.group(2).decode() for m in _REFERENCE.finditer(body)]


#: Looks blobs up by sha256: sha256 -> (media type, bytes); absent ones left out.
BlobLookup = Callable[[Iterable[str]], dict[str, tuple[str, bytes]]]


def resolve_references(
    bodies: list[bytes], lookup: BlobLookup, budget: int | None = None
) -> list[bytes]:
    """`bodies` with each reference replaced by the base64 (or data URL) it stands
    for. With a `budget` (bytes of base64 to put back in all), references past
    it stay as they are, and so do references to blobs that are missing."""
    wanted = {sha for body in bodies for sha in referenced_hashes(body)}
    if not wanted:
        return bodies
    found = lookup(wanted)
    encoded: dict[str, bytes] = {}
    left = [budget]

    def put_back(match: re.Match[bytes]) -> bytes:
        media_type, sha = match.group(1), match.group(2).decode()
        if sha not in found:
            return match.group(0)
        b64 = encoded.get(sha)
        if b64 is None:
            b64 = encoded[sha] = binascii.b2a_base64(found[sha][1], newline=False)
        if left[0] is not None:
            if len(b64) > left[0]:
                left[0] = 0  # keep the order: nothing after the first left out
                return match.group(0)
            left[0] -= len(b64)
        if media_type is None:
            return b64
        return b"data:" + media_type + b";base64," + b64

    return [_REFERENCE.sub(put_back, body) if BLOB_MARKER in body else body for body in bodies]
