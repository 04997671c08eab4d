"""Logging for hdspd: structlog on top of the standard library, with secrets redacted.

Why this shape:

- hdspd runs under systemd, where stderr goes to journald: one JSON object per line
  there (and anywhere stderr is not a terminal) so logs stay machine-readable; a
  person at a terminal gets structlog's readable console lines instead.
- jupyter_client, asyncio and other libraries log through :mod:`logging`. Their
  records go through the same processors as ours (timestamp, level, logger name,
  bound context, redaction), so there is one format and one place to filter.
- Task and client ids are bound with :func:`structlog.contextvars.bind_contextvars`
  and appear in every line logged in that context, including lines that libraries
  log from inside it.
- Secrets never reach a log line (DESIGN.md, "Config and secrets").
  :func:`redact_secrets` is the last processor before rendering, so it also sees
  formatted tracebacks. It hides values under keys named like secrets
  (``api_key``, ``Authorization``, ``access_token``...), every value registered with
  :func:`register_secret` wherever it appears inside a string, and the shapes of
  well-known credentials (``sk-...`` provider keys, ``Bearer ...`` headers,
  passwords in URLs): the same :data:`hdsp.daemon.scrubber.scrubber` that the
  journal and the providers' errors use.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, Final, Literal, TextIO, cast

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from .scrubber import MIN_SECRET_LENGTH, REDACTED, scrubber

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "LogFormat",
    "configure_logging",
    "get_logger",
    "is_secret_key",
    "redact_secrets",
    "redact_text",
    "redact_value",
    "register_secret",
    "registered_secrets",
]

LogFormat = Literal["auto", "json", "console"]


# --- secret keys ---------------------------------------------------------------------

# A key is split into words (snake_case, kebab-case, camelCase, UPPER_CASE) and judged
# by its last word, so that `access_token` and `clientSecret` are secrets while
# `max_tokens`, `token_count` and `secret_ref` (a reference to a keyring entry, not
# the secret) are not: token counts are logged all the time by an LLM agent.
_KEY_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SECRET_LAST_WORDS: Final = frozenset(
    {
        "apikey",
        "authorization",
        "bearer",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "passphrase",
        "passwd",
        "password",
        "passwords",
        "privatekey",
        "secret",
        "secretkey",
        "secrets",
        "token",
    }
)
# `key` alone is too common (cache key, dict key, public key) to be a secret; these
# words before it make it one: api_key, private_key, secretKey, x-api-key.
_KEY_QUALIFIERS: Final = frozenset(
    {"access", "api", "client", "encryption", "master", "private", "secret", "session", "signing"}
)


def is_secret_key(name: str) -> bool:
    """Tell whether a mapping key names a secret, so that its whole value is hidden."""
    words = [word.lower() for word in _KEY_WORD.findall(name)]
    if not words:
        return False
    last = words[-1]
    if last in _SECRET_LAST_WORDS:
        return True
    return last == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS


# --- secret values -------------------------------------------------------------------
# Known values and credential shapes are the scrubber's (one list for logs, the
# journal and provider errors): see hdsp.daemon.scrubber.


def register_secret(value: str, *, name: str | None = None) -> None:
    """Hide ``value`` wherever it appears in a log line, an event or the store from
    now on (see :meth:`SecretScrubber.add`). The config code calls this for every
    API key it loads. Values shorter than :data:`MIN_SECRET_LENGTH` characters are
    ignored (hiding every "abc" would blank out ordinary words); surrounding
    whitespace, as read from a file, is ignored too.
    """
    scrubber.add(value, name=name)


def registered_secrets() -> frozenset[str]:
    """Every secret value registered so far (for the sandbox, which keeps them out
    of the environments of the processes it starts)."""
    return scrubber.known_values()


def redact_text(text: str) -> str:
    """Return ``text`` with known secrets and credential-shaped substrings hidden."""
    return scrubber.scrub(text)


# Deeper structures are rendered as text and redacted as such (this also ends
# recursion on self-referencing containers, whose repr() handles the cycle).
_MAX_DEPTH: Final = 12
_PLAIN_TYPES: Final = (bool, int, float, bytes, type(None))


def _record_fields(value: Any) -> dict[str, Any] | None:
    """The fields of a dataclass instance or msgspec Struct, else None."""
    names: tuple[str, ...] | None = getattr(type(value), "__struct_fields__", None)
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = tuple(field.name for field in dataclasses.fields(value))
    if names is None:
        return None
    return {name: getattr(value, name, None) for name in names}


def redact_value(value: Any, _depth: int = 0) -> Any:
    """Return ``value`` with secrets hidden, leaving the original untouched.

    Mappings lose the values of secret-named keys, lists and tuples are walked, and
    strings go through :func:`redact_text`. A dataclass or msgspec Struct with a
    field named like a secret becomes its repr with that field hidden. Any other
    object is left as it is unless its ``repr()``, which a renderer would print,
    contains a secret: then that redacted text replaces it.
    """
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, _PLAIN_TYPES):
        return value
    if _depth < _MAX_DEPTH:
        if isinstance(value, Mapping):
            return {
                key: (
                    REDACTED
                    if isinstance(key, str) and is_secret_key(key)
                    else redact_value(item, _depth + 1)
                )
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [redact_value(item, _depth + 1) for item in value]
        if isinstance(value, tuple):
            return tuple(redact_value(item, _depth + 1) for item in value)
    fields = _record_fields(value)
    if fields is not None and any(is_secret_key(name) for name in fields):
        # A dataclass or msgspec Struct with a field named like a secret (a provider
        # profile holding its key): render it as its repr would, minus the secret.
        shown = ", ".join(
            f"{name}={REDACTED if is_secret_key(name) else redact_value(item, _MAX_DEPTH)!r}"
            for name, item in fields.items()
        )
        return f"{type(value).__name__}({shown})"
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not break logging
        return value
    redacted = redact_text(text)
    return value if redacted == text else redacted


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: hide secrets anywhere in the event dict (see the module doc)."""
    for key, value in event_dict.items():
        event_dict[key] = REDACTED if is_secret_key(key) else redact_value(value)
    return event_dict


# --- configuration -------------------------------------------------------------------


class _HdspHandler(logging.StreamHandler[TextIO]):
    """The root handler installed by :func:`configure_logging`.

    Its own class so that calling :func:`configure_logging` again replaces it while
    leaving other handlers (pytest's log capture, say) alone.
    """


_LEVELS: Final = ("debug", "info", "warning", "error", "critical")


_LEADING_KEYS: Final = ("timestamp", "level", "logger", "event")


def _leading_keys_first(
    logger: WrappedLogger, method_name: str, event_dict: EventDict
) -> EventDict:
    """Put when, how bad, who and what first in a JSON line, for people reading journalctl."""
    ordered = {key: event_dict.pop(key) for key in _LEADING_KEYS if key in event_dict}
    ordered.update(event_dict)
    return ordered


def _parse_level(level: str) -> int:
    name = level.strip().lower()
    if name == "warn":
        name = "warning"
    if name not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}: use one of {', '.join(_LEVELS)}")
    return logging.getLevelNamesMapping()[name.upper()]


def _use_console(fmt: LogFormat, stream: TextIO) -> bool:
    if fmt == "json":
        return False
    if fmt == "console":
        return True
    if fmt != "auto":
        raise ValueError(f"unknown log format {fmt!r}: use auto, json or console")
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):  # closed or detached stream
        return False


#: Libraries whose info lines are one per request, shown from debug on.
_CHATTY_LIBRARIES: Final = ("httpx", "httpx2")


def configure_logging(
    level: str = "info",
    fmt: LogFormat = "auto",
    stream: TextIO | None = None,
) -> None:
    """Send structlog and stdlib logging to ``stream`` (stderr by default).

    ``fmt="auto"`` writes readable console lines when the stream is a terminal and
    JSON lines otherwise (journald under systemd). Colours follow the terminal and
    the ``NO_COLOR`` convention. Calling it again replaces the previous set-up, which
    is what tests and a ``--log-level`` given after start-up need.

    Raises:
        ValueError: ``level`` or ``fmt`` is not one of the known names.
    """
    numeric_level = _parse_level(level)
    out = sys.stderr if stream is None else stream
    console = _use_console(fmt, out)

    # Applied to every record before rendering, structlog's or a library's.
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        timestamper,
    ]
    renderer: Processor
    finishing: list[Processor] = []
    if console:
        colors = bool(out.isatty()) and "NO_COLOR" not in os.environ
        renderer = structlog.dev.ConsoleRenderer(colors=colors)
    else:
        renderer = structlog.processors.JSONRenderer()
        finishing.append(_leading_keys_first)

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.StackInfoRenderer(),
            # Tracebacks become text before redaction, in both formats, so that a
            # secret quoted in an exception message is hidden too.
            structlog.processors.format_exc_info,
            redact_secrets,
            *finishing,
            renderer,
        ],
    )
    handler = _HdspHandler(out)
    handler.setFormatter(formatter)

    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _HdspHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(numeric_level)
    # httpx logs each request it makes at info ("HTTP Request: POST ..."): a line
    # per model request is noise in the journal, and rendering it costs every turn.
    # Their requests show at debug.
    for name in _CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(
            logging.NOTSET if numeric_level <= logging.DEBUG else logging.WARNING
        )
    # Python warnings (deprecations from libraries) become records too, instead of
    # raw lines that would break the JSON stream.
    logging.captureWarnings(True)

    # The chain is the same on every call; what changes lives in the handler. So
    # loggers cached by an earlier call stay correct.
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """Return the logger for ``name`` (a module's ``__name__``).

    Safe to call at import time, before :func:`configure_logging`: the logger binds
    to the configuration on first use.
    """
    return cast(structlog.stdlib.BoundLogger, structlog.get_logger(name))
