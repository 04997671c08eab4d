"""Settings documents as JSON objects: their errors, migration from older
versions, JSON Merge Patch, and validation (strict, or keeping what validates).

Settings hold the *names* of secrets, never their values (see :mod:`.secrets`):
a key that looks like a secret (``api_key``, ``token``...) is refused anywhere in
a document.

Errors::

    SettingsError              the file cannot be read or written (the message says which)
    └── SettingsInvalid        a change or document does not validate (`.errors`)
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import structlog
from pydantic import ValidationError

from hdsp.daemon.errors import HdspError
from hdsp.daemon.logs import is_secret_key
from hdsp.protocol import ErrorCode

from .settings_model import SETTINGS_VERSION, Settings

__all__ = [
    "SECRET_REASON",
    "FieldError",
    "SettingsError",
    "SettingsInvalid",
    "check_document",
    "merge_patch",
    "migrate",
    "secret_like_keys",
    "validate_salvaging",
]

log = structlog.get_logger("hdsp.settings")


# ---- errors ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldError:
    #: Dotted path of the field: "retry.max_attempts", "profiles.work.provider".
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '(the document)'}: {self.message}"


class SettingsError(HdspError):
    """The settings file cannot be read or written; the message says which and why."""

    code = ErrorCode.INTERNAL


class SettingsInvalid(SettingsError, ValueError):
    """A change or a document does not validate; `errors` lists every bad field
    (and so do the details of the error reply)."""

    code = ErrorCode.INVALID_REQUEST

    def __init__(
        self, errors: list[FieldError], what: str = "The settings were not changed"
    ) -> None:
        self.errors = errors
        listed = "; ".join(str(e) for e in errors)
        super().__init__(
            f"{what}: {listed}.",
            details={"errors": [{"path": e.path, "message": e.message} for e in errors]},
        )


# ---- documents: migration, merge, validation ------------------------------------------


def _v0_to_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Files written before the version field existed have version 1's shape."""
    return data


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 retried a failing model request for ever by default, and wrote
    that default (``retry.max_attempts: null``) into every file: the null goes, so
    that the finite default of version 2 applies."""
    retry = data.get("retry")
    if isinstance(retry, Mapping) and "max_attempts" in retry and retry["max_attempts"] is None:
        data["retry"] = {key: value for key, value in retry.items() if key != "max_attempts"}
    return data


#: One step per version: _MIGRATIONS[n] turns a version-n document into version n+1.
_MIGRATIONS: Final[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    0: _v0_to_v1,
    1: _v1_to_v2,
}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring a settings document of an older version up to :data:`SETTINGS_VERSION`.

    A document without ``version`` is version 0. A newer document is returned as
    it is: this hdsp keeps what it does not know and never lowers the version.

    Raises:
        SettingsInvalid: ``version`` is not a whole number of at least 0.
    """
    version = data.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise SettingsInvalid(
            [FieldError("version", f"must be a whole number, not {version!r}")],
            "The settings document cannot be read",
        )
    if version > SETTINGS_VERSION:
        log.warning(
            "settings written by a newer hdsp: keys this version does not know are kept",
            file_version=version,
            known_version=SETTINGS_VERSION,
        )
        return data
    while version < SETTINGS_VERSION:
        data = _MIGRATIONS[version](dict(data))
        version += 1
        data["version"] = version
    return data


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON Merge Patch (RFC 7396): objects merge key by key, ``None`` removes a key,
    anything else replaces. Neither argument is modified."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _walk(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield (*path, str(key))
            yield from _walk(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, (*path, str(index)))


def secret_like_keys(document: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Paths of keys named like secret values. A profile's ``secret`` (the name of a
    keyring entry) is the one allowed."""
    return [
        path
        for path in _walk(document)
        if is_secret_key(path[-1])
        and not (len(path) == 3 and path[0] == "profiles" and path[2] == "secret")
        # A gateway's `token_secret` names a keyring entry too (validated as a name).
        and not (path[-2:] == ("gateway", "token_secret") and path[-3] == "kernels")
        and path != ("store", "secret")
        # An MCP server's env and headers: McpSettings lets only `${secret:NAME}`
        # references stand under names like these.
        and not (len(path) == 5 and path[:2] == ("mcp", "servers") and path[3] in _MCP_MAPS)
    ]


_MCP_MAPS = frozenset({"env", "headers"})


SECRET_REASON = (
    "looks like a secret value; settings hold only the names of secrets. Store the "
    "key with `hdsp secret set NAME` and name it in a profile's `secret`"
)


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _field_errors(exc: ValidationError) -> list[FieldError]:
    return [FieldError(_dotted(err["loc"]), err["msg"]) for err in exc.errors()]


def check_document(document: Mapping[str, Any]) -> Settings:
    """Validate a whole document strictly.

    Raises:
        SettingsInvalid: listing every bad field (and every key that looks like a secret).
    """
    errors = [FieldError(".".join(p), SECRET_REASON) for p in secret_like_keys(document)]
    try:
        settings = Settings.model_validate(document)
    except ValidationError as exc:
        errors += _field_errors(exc)
    if errors:
        raise SettingsInvalid(errors)
    return settings


def _unit_of(loc: tuple[Any, ...]) -> tuple[str, ...]:
    """What to leave out for an error at `loc`: a whole profile or model entry, a
    whole list, else the field itself."""
    unit: list[str] = []
    for part in loc:
        if not isinstance(part, str):
            break  # a list index: the list goes as a whole
        unit.append(part)
        if len(unit) == 2 and unit[0] in ("profiles", "models"):
            break
    return tuple(unit)


def _get(document: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    node: Any = document
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _restore(document: dict[str, Any], path: tuple[str, ...], base: Mapping[str, Any]) -> None:
    """Put `base`'s value at `path` into `document`, or remove `path` if base has none."""
    parent: Any = document
    for part in path[:-1]:
        if not isinstance(parent, dict) or not isinstance(parent.get(part), dict):
            return
        parent = parent[part]
    found, value = _get(base, path)
    if found:
        parent[path[-1]] = copy.deepcopy(value)
    else:
        parent.pop(path[-1], None)


def validate_salvaging(
    document: Mapping[str, Any], base: Mapping[str, Any] | None = None
) -> tuple[Settings, list[FieldError]]:
    """Validate `document`, leaving out what does not validate: a whole profile or
    model entry, a list, or a single field, which takes `base`'s value (or its
    default). Returns the settings and what was left out, and why.

    Raises:
        SettingsInvalid: nothing could be salvaged (the document is not an object).
    """
    base = base or {}
    if not isinstance(document, Mapping):
        raise SettingsInvalid([FieldError("", "must be a JSON object")], "Not a settings document")
    work: dict[str, Any] = copy.deepcopy(dict(document))
    rejected: list[FieldError] = []
    for path in secret_like_keys(work):
        unit = path if path[0] not in ("profiles", "models") else path[:2]
        rejected.append(FieldError(".".join(path), SECRET_REASON))
        _restore(work, unit, {})  # never from base: a secret-like key is never wanted
    tried: set[tuple[str, ...]] = set()
    while True:
        try:
            return Settings.model_validate(work), rejected
        except ValidationError as exc:
            errors = exc.errors()
        progress = False
        for err in errors:
            unit = _unit_of(err["loc"])
            rejected.append(FieldError(_dotted(err["loc"]), err["msg"]))
            if not unit or (unit in tried and not _get(work, unit)[0]):
                continue
            # The first time, restore the base's value; if that fails too, drop it.
            _restore(work, unit, base if unit not in tried else {})
            tried.add(unit)
            progress = True
        if not progress:
            raise SettingsInvalid(
                [FieldError(_dotted(e["loc"]), e["msg"]) for e in errors],
                "The settings document cannot be used",
            )
