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

A reference is read only where `extract_blobs` writes one (the image fields of
`_ImageFields`), and only for a blob the record's task stored itself (the
`task_blobs` table says which; `extract_blobs` records it with the blob). Text
that looks like a reference is text: a model, a kernel or a file can make a
task store any string, also in an image's place, and must not read another
task's images by naming their sha256.
"""

from __future__ import annotations

import binascii
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from hdsp.protocol import BLOB_SCHEME, parse_blob_reference

__all__ = [
    "BLOB_MARKER",
    "MIN_BLOB_CHARS",
    "Blob",
    "BlobLookup",
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
#: A media type a reference can carry (see `parse_blob_reference`).
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9.+/-]*")
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


class _ImageFields:
    """Visits each string in a place of a record that holds an image, and only
    there: an image block's `data` (API history, also inside a tool result), a
    mime bundle's `image/...` value (also in a `cell_output`'s text, which is a
    CellOutput in JSON), and each of a message's `images`. Text elsewhere
    (a model's words, a tool's output) is never an image, whatever it says."""

    #: Bumped by `image` for each value it changes.
    changes = 0

    def image(self, value: str, media_type: str, url: bool) -> str:
        """What to store in place of `value`: a data URL (`url`) or bare base64."""
        raise NotImplementedError

    def may_hold(self, text: bytes) -> bool:
        """Whether a `cell_output`'s text is worth decoding."""
        raise NotImplementedError

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
                value["data"] = self.image(data, media_type, url=False)
        if value.get("say") == "cell_output":  # its text is a CellOutput, in JSON
            text = value.get("text")
            if isinstance(text, str):
                value["text"] = self.nested(text)
        for key, item in value.items():
            if isinstance(item, str):
                if key.startswith("image/"):  # a mime bundle
                    value[key] = self.image(item, key, url=False)
            elif key == "images" and isinstance(item, list):
                value[key] = [
                    self.image(v, "", url=True) if isinstance(v, str) else v for v in item
                ]
            elif isinstance(item, dict | list):
                value[key] = self.walk(item)
        return value

    def nested(self, text: str) -> str:
        if not self.may_hold(text.encode()):
            return text
        try:
            doc = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return text
        before = self.changes
        doc = self.walk(doc)
        if self.changes == before:
            return text
        return msgspec.json.encode(doc).decode()

    def rewrite(self, body: bytes) -> bytes:
        """`body` with its image fields rewritten; `body` itself when none changed
        (or it is no JSON)."""
        try:
            doc = msgspec.json.decode(body)
        except msgspec.DecodeError:
            return body
        doc = self.walk(doc)
        return msgspec.json.encode(doc) if self.changes else body


class _Extraction(_ImageFields):
    def __init__(self) -> None:
        self.blobs: dict[str, Blob] = {}

    def may_hold(self, text: bytes) -> bool:
        return len(text) >= MIN_BLOB_CHARS and _CANDIDATE.search(text) is not None

    def image(self, value: str, media_type: str, url: bool) -> str:
        if url:
            return self.data_url(value)
        sha = self.blob(media_type, value)
        return value if sha is None else blob_reference(sha)

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
        self.changes += 1
        if sha not in self.blobs:
            self.blobs[sha] = Blob(sha, media_type, raw)
        return sha

    def data_url(self, value: str) -> str:
        if value.startswith("data:"):
            media_type, sep, b64 = value[5:].partition(";base64,")
            if sep and _MEDIA_TYPE.fullmatch(media_type) and (sha := self.blob(media_type, b64)):
                return blob_reference(sha, media_type or "application/octet-stream")
            return value
        sha = self.blob("", value)  # bare base64, as a client may send
        return value if sha is None else blob_reference(sha)


def extract_blobs(body: bytes) -> tuple[bytes, list[Blob]]:
    """`body` (a JSON record) with each image's base64 replaced by a reference,
    and the images as blobs; `body` itself when it holds none."""
    if len(body) < MIN_BLOB_CHARS or not _CANDIDATE.search(body):
        return body, []
    extraction = _Extraction()
    stored = extraction.rewrite(body)
    return stored, list(extraction.blobs.values())


class _Hashes(_ImageFields):
    def __init__(self) -> None:
        self.found: list[str] = []

    def may_hold(self, text: bytes) -> bool:
        return BLOB_MARKER in text

    def image(self, value: str, media_type: str, url: bool) -> str:
        if (reference := parse_blob_reference(value)) is not None:
            self.found.append(reference[0])
        return value


def referenced_hashes(body: bytes) -> list[str]:
    """The sha256 of every blob `body` refers to where an image belongs, in order
    (repeats included). A reference anywhere else is text."""
    if BLOB_MARKER not in body:
        return []
    hashes = _Hashes()
    hashes.rewrite(body)
    return hashes.found


class _PutBack(_ImageFields):
    def __init__(self, budget: int | None) -> None:
        self.blobs: dict[str, tuple[str, bytes]] = {}
        self.left = budget
        self._encoded: dict[str, str] = {}

    def may_hold(self, text: bytes) -> bool:
        return BLOB_MARKER in text

    def image(self, value: str, media_type: str, url: bool) -> str:
        reference = parse_blob_reference(value)
        if reference is None or reference[0] not in self.blobs:
            return value
        sha, data_url_type = reference
        b64 = self._encoded.get(sha)
        if b64 is None:
            raw = self.blobs[sha][1]
            b64 = self._encoded[sha] = binascii.b2a_base64(raw, newline=False).decode("ascii")
        if self.left is not None:
            if len(b64) > self.left:
                self.left = 0  # keep the order: nothing after the first left out
                return value
            self.left -= len(b64)
        self.changes += 1
        return b64 if data_url_type is None else f"data:{data_url_type};base64,{b64}"


#: Looks up the blobs a task stored itself: (task id, sha256s) -> sha256 ->
#: (media type, bytes); blobs it did not store, and missing ones, left out.
BlobLookup = Callable[[str, Iterable[str]], dict[str, tuple[str, bytes]]]


def resolve_references(
    records: Sequence[tuple[str, bytes]], lookup: BlobLookup, budget: int | None = None
) -> list[bytes]:
    """The bodies of `records` ((owning task id, body) pairs) with each reference
    where an image belongs replaced by the base64 (or data URL) it stands for,
    when the task stored that blob itself. A reference elsewhere is text (a
    model can write one); one to a blob of another task stays as it is (a
    model, a kernel or a file can make a task store any string in an image's
    place, and must never read another task's images that way). With a
    `budget` (bytes of base64 to put back in all), references past it stay as
    they are, and so do references to blobs that are missing."""
    wanted: dict[str, set[str]] = {}
    for owner, body in records:
        if hashes := referenced_hashes(body):
            wanted.setdefault(owner, set()).update(hashes)
    if not wanted:
        return [body for _, body in records]
    owned = {owner: lookup(owner, hashes) for owner, hashes in wanted.items()}
    put_back = _PutBack(budget)
    bodies = []
    for owner, body in records:
        blobs = owned.get(owner)
        if not blobs or BLOB_MARKER not in body:
            bodies.append(body)
            continue
        put_back.blobs, put_back.changes = blobs, 0
        bodies.append(put_back.rewrite(body))
    return bodies
