"""Secrets scrubbed out of every string the daemon stores, publishes or logs.

Why this shape:

- Secrets live in the keyring and in the daemon's memory only (DESIGN.md, "Security
  model"). Yet text from outside can quote them back: a provider that echoes the
  key in a 401 body, a tool or a kernel that prints an environment variable, a
  base URL with a password in it. So every such text is scrubbed where it enters
  (provider errors, tool results) and once more, as the last line of defence,
  where everything durable or published passes: the journal, on the encoded bytes
  (:meth:`SecretScrubber.scrub_json`), and the log processor.
- Two kinds of thing are replaced:

  * **known values**: every key the secrets service read or was given, the
    environment fallbacks (``HDSP_API_KEY``, ``OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``), and credentials found in a profile's base URL. Each
    becomes ``[secret:NAME]`` when its name is known, else ``[REDACTED]``.
    Values shorter than :data:`MIN_SECRET_LENGTH` are not registered: hiding every
    "abc" would blank ordinary words all over.
  * **shapes** of well-known credentials, hidden even when nobody registered them
    (:data:`SECRET_SHAPES`, each with why it cannot match ordinary prose).

- Cost: all of it is one compiled alternation, rebuilt only when the set of known
  values changes; a string with no match (nearly all of them) costs one
  ``search`` and is returned as the same object. Only a string that matches takes
  the slower path that also handles values overlapping each other.
- :meth:`SecretScrubber.known_values` hands the values to whoever must keep them
  out of a child's environment (the sandbox).

The daemon uses the one process-wide instance :data:`scrubber` (as it has one
logging configuration); tests make their own.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import AnyStr, Final
from urllib.parse import SplitResult, urlsplit, urlunsplit

import msgspec

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SECRET_QUERY_PARAMETER",
    "SECRET_SHAPES",
    "SecretScrubber",
    "SecretShape",
    "scrubber",
    "url_credentials",
]

#: What a secret of no known name, or of a known shape, is replaced with.
REDACTED: Final = "[REDACTED]"

#: Known values shorter than this are not registered (see the module docstring).
MIN_SECRET_LENGTH: Final = 8


@dataclass(frozen=True, slots=True)
class SecretShape:
    """A credential recognisable by its form. Only the group named ``secret`` (the
    whole match when there is none) is replaced, so ``Bearer`` or a URL's host stay."""

    name: str
    pattern: str
    why: str
    #: Literal strings one of which is in every match: a string holding none of
    #: them, nor a known value (nearly every string), is passed after one quick search.
    anchors: tuple[str, ...]


#: Names of URL query parameters that carry credentials: ``key``, ``sig``, ``auth``
#: and ``pwd`` exactly; anything ending in ``token``, ``secret``, ``password``,
#: ``signature``, ``api_key``/``apikey``, ``access_key`` or ``credential``
#: (``access_token``, ``client_secret``, ``X-Amz-Signature``...).
SECRET_QUERY_PARAMETER: Final = (
    r"(?i:key|sig|auth|pwd|[A-Za-z0-9_.\-]*(?:token|secret|password|passwd|signature"
    r"|api[_\-]?key|access[_\-]?key|credential))"
)

# Character classes never include `"` or `\`: the journal scrubs encoded JSON, and a
# match must never reach across a string's end or into an escape sequence.
#: The credential shapes hidden wherever they appear, in this order.
SECRET_SHAPES: Final[tuple[SecretShape, ...]] = (
    SecretShape(
        "private key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[A-Za-z0-9+/=\s\\:,.\-]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
        "a PEM block says what it is",
        ("-----BEGIN",),
    ),
    SecretShape(
        "provider key",
        r"(?<![A-Za-z0-9_\-])sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9][A-Za-z0-9_\-]{19,}",
        "OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-) keys: 'sk-' then 20 or more "
        "key characters, not inside a word ('task-...')",
        ("k-",),
    ),
    SecretShape(
        "bearer token",
        r"\b[Bb]earer\s+(?P<secret>(?=[A-Za-z\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{8,}=*)",
        "an HTTP bearer credential; the token must hold a digit, so that 'Bearer "
        "authentication' stays",
        ("Bearer", "bearer"),
    ),
    SecretShape(
        "authorization header",
        r"\b(?:[Aa]uthorization|AUTHORIZATION|(?:[Xx]-)?(?:[Aa]pi-[Kk]ey|API-KEY)|x-goog-api-key)"
        r"['\"]?\s*[:=]\s*['\"]?"
        r"(?:[A-Za-z]+\s+)?(?P<secret>(?=[^\s'\",;\\&()]*[0-9])[^\s'\",;\\&()]{8,})",
        "a header named for a credential (Authorization, X-Api-Key...), with a value "
        "of 8 or more characters holding a digit",
        ("zation", "ZATION", "-key", "-Key", "-KEY"),
    ),
    SecretShape(
        "AWS access key id",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        "AKIA/ASIA and exactly 16 upper-case letters or digits",
        ("AKIA", "ASIA"),
    ),
    SecretShape(
        "GitHub token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        "ghp_/gho_/ghu_/ghs_/ghr_ and 36 characters or more, or github_pat_",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    SecretShape(
        "Slack token",
        r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
        "xoxb-/xoxp-/xoxa-... and 10 or more characters",
        ("xox",),
    ),
    SecretShape(
        "Google API key",
        r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])",
        "AIza and exactly 35 key characters",
        ("AIza",),
    ),
    SecretShape(
        "JSON web token",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
        "two base64url JSON objects ('eyJ' is the start of '{\"'), dot-separated",
        (".eyJ",),
    ),
    SecretShape(
        "URL credentials",
        r"(?<=://)(?P<secret>[^/\s:@'\"\\<>]+:[^/\s@'\"\\<>]*)@",
        "user:password@ after a URL's scheme",
        ("//",),
    ),
    SecretShape(
        "URL query credential",
        rf"[?&]{SECRET_QUERY_PARAMETER}=(?P<secret>[^&#\s'\"\\<>()\[\]{{}},;]+)",
        "a query parameter named for a credential (see SECRET_QUERY_PARAMETER)",
        ("?", "&"),
    ),
)

_LABEL = re.compile(r"[^A-Za-z0-9_.\-]")


def _marker(name: str | None) -> str:
    if not name:
        return REDACTED
    return f"[secret:{_LABEL.sub('', name)[:64] or 'unnamed'}]"


# Characters seldom seen in prose or in the daemon's JSON: where a known value's
# anchor starts, so that the detector stops at few places.
_RARE = frozenset("BCDEFGHJKLMNOPQRUVWXYZ3456789qjzxvk")


def _anchor(value: str) -> str:
    """Eight characters of `value` (all if shorter), from a rare character on."""
    for position, char in enumerate(value[: max(1, len(value) - 7)]):
        if char in _RARE:
            return value[position : position + 8]
    return value[:8]


def _json_form(value: str) -> str:
    """`value` as it appears inside a JSON string written by msgspec."""
    return msgspec.json.encode(value).decode()[1:-1]


class _Compiled:
    """The patterns of one set of known values, for str and for UTF-8 bytes."""

    def __init__(self, values: dict[str, str | None]) -> None:
        forms: dict[str, str] = {}  # every form of every value -> its marker
        for value, name in values.items():
            for form in (value, _json_form(value)):
                forms.setdefault(form, _marker(name))
        ordered = sorted(forms, key=len, reverse=True)  # a value holding another wins
        known = "|".join(re.escape(v) for v in ordered)
        hints = sorted({_anchor(v) for v in ordered})
        self.known_markers = forms
        self.known_markers_bytes = {k.encode(): m.encode() for k, m in forms.items()}
        shapes = [s.pattern for s in SECRET_SHAPES]
        # Literals only, so that `re` skips ahead by the set of their first characters.
        anchors = [re.escape(a) for shape in SECRET_SHAPES for a in shape.anchors]
        detector = "|".join([re.escape(h) for h in hints] + anchors)
        self.any = re.compile(detector)
        self.any_bytes = re.compile(detector.encode())
        # Overlapping occurrences of known values: a lookahead finds one at every position.
        self.known = re.compile(f"(?=({known}))") if known else None
        self.known_bytes = re.compile(f"(?=({known}))".encode()) if known else None
        self.shapes = [re.compile(p) for p in shapes]
        self.shapes_bytes = [re.compile(p.encode()) for p in shapes]


def _rewrite(
    text: AnyStr,
    known: re.Pattern[AnyStr] | None,
    markers: Mapping[AnyStr, AnyStr],
    shapes: list[re.Pattern[AnyStr]],
    redacted: AnyStr,
) -> AnyStr:
    """Replace every span that holds a secret; overlapping spans merge into one."""
    spans: list[tuple[int, int, AnyStr]] = []
    if known is not None:
        for m in known.finditer(text):
            found = m.group(1)
            spans.append((m.start(1), m.start(1) + len(found), markers[found]))
    for shape in shapes:
        for m in shape.finditer(text):
            group = "secret" if "secret" in shape.groupindex else 0
            start, end = m.span(group)
            if end > start:
                spans.append((start, end, redacted))
    if not spans:
        return text
    spans.sort(key=lambda s: (s[0], -s[1]))
    pieces: list[AnyStr] = []
    position = 0
    run_start, run_end, run_marker = spans[0]
    for start, end, marker in spans[1:]:
        if start < run_end:  # overlaps the run: extend it
            if end > run_end:
                run_end = end
            if run_marker == redacted:
                run_marker = marker  # a named marker says more
            continue
        pieces += [text[position:run_start], run_marker]
        position = run_end
        run_start, run_end, run_marker = start, end, marker
    pieces += [text[position:run_start], run_marker, text[run_end:]]
    return text[:0].join(pieces)


class SecretScrubber:
    """Known secret values and credential shapes, replaced in text (module docstring).

    Thread-safe: values are added under a lock and the compiled patterns are
    replaced, never changed, so a reader on any thread sees the old or the new set.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, str | None] = {}
        self._compiled = _Compiled({})

    def add(self, value: str, *, name: str | None = None) -> None:
        """Hide `value` (and `value` without surrounding whitespace) from now on,
        as ``[secret:NAME]`` when `name` is given. Values shorter than
        :data:`MIN_SECRET_LENGTH` are ignored."""
        if not isinstance(value, str):
            return
        stripped = value.strip()
        if len(stripped) < MIN_SECRET_LENGTH:
            return
        candidates = {value, stripped}
        with self._lock:
            added = False
            for candidate in candidates:
                if candidate not in self._values or (name and not self._values[candidate]):
                    self._values[candidate] = name
                    added = True
            if added:
                self._compiled = _Compiled(dict(self._values))

    def add_all(self, values: Iterable[tuple[str, str | None]]) -> None:
        """Add several (value, name) pairs."""
        for value, name in values:
            self.add(value, name=name)

    def known_values(self) -> frozenset[str]:
        """Every value registered so far (for keeping them out of a child's
        environment: drop a variable whose value contains one)."""
        with self._lock:
            return frozenset(self._values)

    def scrub(self, text: str) -> str:
        """`text` with secrets replaced; `text` itself when it holds none."""
        if len(text) < MIN_SECRET_LENGTH:
            return text
        c = self._compiled
        if c.any.search(text) is None:
            return text
        return _rewrite(text, c.known, c.known_markers, c.shapes, REDACTED)

    def scrub_json(self, data: bytes) -> bytes:
        """UTF-8 `data` (JSON as msgspec writes it) with secrets replaced, including
        values in their JSON-escaped form; `data` itself when it holds none. The
        markers hold no quote or backslash, so valid JSON stays valid."""
        if len(data) < MIN_SECRET_LENGTH:
            return data
        c = self._compiled
        if c.any_bytes.search(data) is None:
            return data
        return _rewrite(
            data, c.known_bytes, c.known_markers_bytes, c.shapes_bytes, REDACTED.encode()
        )

    def scrub_url(self, url: str) -> str:
        """`url` fit to show: user info and credential query parameters replaced
        (see :data:`SECRET_QUERY_PARAMETER`), then any known value."""
        return self.scrub(_redact_url(url))


def _redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(
        f"{name}={REDACTED}" if sep and _QUERY_NAME.fullmatch(name) else piece
        for piece in parts.query.split("&")
        for name, sep, _ in [piece.partition("=")]
    )
    return urlunsplit(SplitResult(parts.scheme, netloc, parts.path, query, parts.fragment))


_QUERY_NAME = re.compile(SECRET_QUERY_PARAMETER)


def url_credentials(url: str) -> list[str]:
    """The credentials inside `url`: its password (or user name standing alone, a
    token as GitHub takes it) and the values of credential query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    if parts.password:
        found.append(parts.password)
    elif parts.username:
        found.append(parts.username)
    for piece in parts.query.split("&"):
        name, sep, value = piece.partition("=")
        if sep and value and _QUERY_NAME.fullmatch(name):
            found.append(value)
    return found


#: The daemon's scrubber: the secrets service adds to it, the journal, the log
#: processor and the providers' errors scrub with it.
scrubber: Final = SecretScrubber()
