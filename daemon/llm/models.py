"""What hdsp knows about models: context window, output limit, prices, images.

The engine needs these numbers for three things: when to condense the history
(the context window), how much to ask for (``max_tokens``), and what a task cost
(prices per million tokens, disjoint input counts as in :class:`UsageChunk`).
Providers do not report them, so they live in this table, per provider family,
keyed by the canonical model id.

:func:`lookup_model` finds a model by the names people actually configure:
dated snapshots (``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``),
``-latest`` aliases, Bedrock and Vertex spellings
(``us.anthropic.claude-sonnet-4-5-20250929-v1:0``, ``claude-haiku-4-5@20251001``),
router prefixes (``anthropic/claude-sonnet-4.5``), and longer names that extend a
known one (``gpt-4o-search-preview``), but never a different version
(``claude-sonnet-4-7`` is not ``claude-sonnet-4``). Entries from the user's settings
(`extra`) win over the table, so a price change or a new model needs no release.
The provider's own table is searched first, then the others, since routers such
as OpenRouter serve Claude through an OpenAI-compatible API at the same prices.
A model found nowhere gets the provider's defaults with ``known=False``; callers
log a warning, since its costs will show as zero.

Prices are the providers' list prices in USD (Anthropic's cache write is the
five-minute rate; OpenAI charges nothing to write its cache).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from hdsp.daemon.config.provider_kinds import PROVIDER_KINDS
from hdsp.daemon.config.settings import Settings
from hdsp.daemon.conversation import ModelInfo
from hdsp.protocol import ModelEntry

__all__ = [
    "DEFAULT_MODEL_INFO",
    "PROVIDER_FAMILIES",
    "list_models",
    "lookup_model",
    "model_table",
    "roo_model_record",
]


def _claude(context: int, output: int, input_price: float, output_price: float) -> ModelInfo:
    # Anthropic prices cache reads at a tenth of input, five-minute cache writes at 1.25x.
    return ModelInfo(
        context_window=context,
        max_output=output,
        input_price=input_price,
        output_price=output_price,
        cache_read_price=round(input_price * 0.1, 6),
        cache_write_price=round(input_price * 1.25, 6),
        supports_images=True,
    )


def _gpt(
    context: int,
    output: int,
    input_price: float,
    output_price: float,
    cached: float,
    *,
    images: bool = True,
) -> ModelInfo:
    return ModelInfo(
        context_window=context,
        max_output=output,
        input_price=input_price,
        output_price=output_price,
        cache_read_price=cached,
        supports_images=images,
    )


_ANTHROPIC: dict[str, ModelInfo] = {
    "claude-opus-4-7": _claude(1_000_000, 128_000, 5.0, 25.0),
    "claude-opus-4-6": _claude(1_000_000, 128_000, 5.0, 25.0),
    "claude-opus-4-5": _claude(200_000, 64_000, 5.0, 25.0),
    "claude-opus-4-1": _claude(200_000, 32_000, 15.0, 75.0),
    "claude-opus-4": _claude(200_000, 32_000, 15.0, 75.0),
    "claude-opus-4-0": _claude(200_000, 32_000, 15.0, 75.0),
    "claude-sonnet-4-6": _claude(1_000_000, 64_000, 3.0, 15.0),
    "claude-sonnet-4-5": _claude(200_000, 64_000, 3.0, 15.0),
    "claude-sonnet-4": _claude(200_000, 64_000, 3.0, 15.0),
    "claude-sonnet-4-0": _claude(200_000, 64_000, 3.0, 15.0),
    "claude-haiku-4-5": _claude(200_000, 64_000, 1.0, 5.0),
    "claude-3-7-sonnet": _claude(200_000, 64_000, 3.0, 15.0),
    "claude-3-5-sonnet": _claude(200_000, 8_192, 3.0, 15.0),
    "claude-3-5-haiku": _claude(200_000, 8_192, 0.8, 4.0),
}

_OPENAI: dict[str, ModelInfo] = {
    "gpt-4o": _gpt(128_000, 16_384, 2.5, 10.0, 1.25),
    "gpt-4o-mini": _gpt(128_000, 16_384, 0.15, 0.6, 0.075),
    "gpt-4.1": _gpt(1_047_576, 32_768, 2.0, 8.0, 0.5),
    "gpt-4.1-mini": _gpt(1_047_576, 32_768, 0.4, 1.6, 0.1),
    "gpt-4.1-nano": _gpt(1_047_576, 32_768, 0.1, 0.4, 0.025),
    "o1": _gpt(200_000, 100_000, 15.0, 60.0, 7.5),
    "o3": _gpt(200_000, 100_000, 2.0, 8.0, 0.5),
    "o3-pro": _gpt(200_000, 100_000, 20.0, 80.0, 0.0),
    "o3-mini": _gpt(200_000, 100_000, 1.1, 4.4, 0.55, images=False),
    "o4-mini": _gpt(200_000, 100_000, 1.1, 4.4, 0.275),
    "gpt-5": _gpt(400_000, 128_000, 1.25, 10.0, 0.125),
    "gpt-5-mini": _gpt(400_000, 128_000, 0.25, 2.0, 0.025),
    "gpt-5-nano": _gpt(400_000, 128_000, 0.05, 0.4, 0.005),
    "gpt-5.1": _gpt(400_000, 128_000, 1.25, 10.0, 0.125),
}

_TABLES: dict[str, dict[str, ModelInfo]] = {"anthropic": _ANTHROPIC, "openai": _OPENAI}

#: Which table a profile's `provider` reads (a column of the provider kinds' table).
PROVIDER_FAMILIES: Mapping[str, str] = {
    kind: row.family for kind, row in PROVIDER_KINDS.items() if row.family is not None
}

#: What a model found nowhere gets: generous enough to work, priced at zero.
#: Images are sent to it: a server whose model takes none refuses them, and the
#: task retries without (:func:`hdsp.daemon.llm.images.image_refused`); a model
#: the table or the settings mark ``supports_images=False`` gets text notes instead.
DEFAULT_MODEL_INFO: Mapping[str, ModelInfo] = {
    # Every Claude model takes images and has at least 200k tokens of context.
    "anthropic": ModelInfo(context_window=200_000, max_output=8_192, supports_images=True),
    "openai": ModelInfo(context_window=128_000, max_output=8_192, supports_images=True),
}

_ROUTER_PREFIX = re.compile(r"^.*/")  # openrouter's "anthropic/", litellm's "openai/"
_BEDROCK_PREFIX = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.")  # "us.anthropic.", "anthropic."
_BEDROCK_SUFFIX = re.compile(r"-v\d+(?::\d+)?$")  # "-v1:0"
_VERTEX_SUFFIX = re.compile(r"@.*$")  # "@20251001"
_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")
_DOTTED_VERSION = re.compile(r"(?<=\d)\.(?=\d)")  # claude-sonnet-4.5 -> claude-sonnet-4-5
# A remainder that starts with a short number names another version, not a variant.
_OTHER_VERSION = re.compile(r"^\d{1,2}(?:$|[-.])")


def _family(provider: str) -> str | None:
    return PROVIDER_FAMILIES.get(provider.strip().lower())


def _canonical(family: str | None, model: str) -> str:
    """`model` without the decorations that do not change which model it is."""
    name = _ROUTER_PREFIX.sub("", model.strip().lower())
    name = _VERTEX_SUFFIX.sub("", _BEDROCK_SUFFIX.sub("", _BEDROCK_PREFIX.sub("", name)))
    while True:
        shorter = _DATE_SUFFIX.sub("", name)
        if shorter == name:
            break
        name = shorter
    if family == "anthropic" or name.startswith("claude"):
        name = _DOTTED_VERSION.sub("-", name)
    return name


def _find(table: Mapping[str, ModelInfo], name: str) -> ModelInfo | None:
    """Exact, else the longest key that `name` extends by a variant (not a version)."""
    found = table.get(name)
    if found is not None:
        return found
    best: str | None = None
    for key in table:
        if name.startswith(key + "-") and (best is None or len(key) > len(best)):
            if not _OTHER_VERSION.match(name[len(key) + 1 :]):
                best = key
    return table[best] if best is not None else None


def lookup_model(
    provider: str, model: str, extra: Mapping[str, ModelInfo] | None = None
) -> ModelInfo:
    """The :class:`ModelInfo` of `model` at `provider` ("anthropic", "openai-compatible"...).

    `extra` (models from the user's settings, by id) wins over the table; its ids
    are matched like the table's. A model found nowhere gets the provider's
    defaults with ``known=False``.
    """
    family = _family(provider)
    name = _canonical(family, model)
    if extra:
        exact = extra.get(model)
        if exact is not None:
            return exact
        user = {_canonical(family, key): info for key, info in extra.items()}
        found = _find(user, name)
        if found is not None:
            return found
    # The provider's own table first, then the others: an OpenAI-compatible router
    # (OpenRouter, LiteLLM) serves Claude models at Anthropic's prices.
    tables = sorted(_TABLES.items(), key=lambda item: item[0] != family)
    for _, table in tables:
        found = _find(table, name)
        if found is not None:
            return found
    default = DEFAULT_MODEL_INFO.get(family or "", ModelInfo())
    return msgspec.structs.replace(default, known=False)


def list_models(
    provider: str, extra: Mapping[str, ModelInfo] | None = None
) -> dict[str, ModelInfo]:
    """Every model known for `provider`, by id (the table's, then the user's), sorted."""
    family = _family(provider)
    models = dict(_TABLES.get(family, {}) if family is not None else {})
    models.update(extra or {})
    return dict(sorted(models.items()))


# ---- the catalogue as GetModels answers it -----------------------------------------

#: The model tables GetModels lists when it is given no provider: every family's.
_LISTED_FAMILIES = tuple(_TABLES)


def model_table(settings: Settings, provider: str | None = None) -> list[ModelEntry]:
    """hdsp's model table with `settings.models` applied: one provider's, or every
    family's (user entries that extend no table then count as OpenAI-compatible)."""
    overrides = settings.models

    def entry(family: str, model_id: str, info: ModelInfo) -> ModelEntry:
        return ModelEntry(
            provider=family,
            id=model_id,
            context_window=info.context_window,
            max_output=info.max_output,
            input_price=info.input_price,
            output_price=info.output_price,
            cache_read_price=info.cache_read_price,
            cache_write_price=info.cache_write_price,
            supports_images=info.supports_images,
            source="settings" if model_id in overrides else "builtin",
        )

    kind = PROVIDER_KINDS.get(provider) if provider is not None else None
    if kind is not None and kind.family is None:
        return []  # the demo: no model table
    if provider is not None:
        extra = {
            model_id: o.apply(lookup_model(provider, model_id)) for model_id, o in overrides.items()
        }
        return [entry(provider, i, info) for i, info in list_models(provider, extra).items()]
    entries: list[ModelEntry] = []
    listed: set[str] = set()
    for family in _LISTED_FAMILIES:
        table = list_models(family)
        for model_id, info in table.items():
            override = overrides.get(model_id)
            entries.append(entry(family, model_id, override.apply(info) if override else info))
            listed.add(model_id)
    for model_id, override in sorted(overrides.items()):
        if model_id not in listed:
            info = override.apply(lookup_model("openai-compatible", model_id))
            entries.append(entry("openai-compatible", model_id, info))
    return entries


def roo_model_record(models: list[ModelEntry]) -> dict[str, Any]:
    """The `modelsResponse` payload: Roo's record of ModelInfo by model id."""
    record: dict[str, Any] = {}
    for m in models:
        record.setdefault(
            m.id,
            {
                "provider": m.provider,
                "contextWindow": m.context_window,
                "maxTokens": m.max_output,
                "supportsImages": m.supports_images,
                "supportsPromptCache": m.cache_read_price > 0,
                "inputPrice": m.input_price,
                "outputPrice": m.output_price,
                "cacheReadsPrice": m.cache_read_price,
                "cacheWritesPrice": m.cache_write_price,
            },
        )
    return record
