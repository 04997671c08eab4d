"""The model table: lookups by the names people configure, and the user's own entries."""

from __future__ import annotations

import pytest

from hdsp.daemon.conversation import ModelInfo
from hdsp.daemon.llm.models import DEFAULT_MODEL_INFO, list_models, lookup_model


@pytest.mark.parametrize(
    ("model", "canonical"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-haiku-4-5@20251001", "claude-haiku-4-5"),  # Vertex
        ("anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),  # Bedrock
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),  # OpenRouter
        ("Claude-Sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
    ],
)
def test_anthropic_names_find_their_model(model: str, canonical: str) -> None:
    info = lookup_model("anthropic", model)

    assert info.known
    assert info == lookup_model("anthropic", canonical)


@pytest.mark.parametrize(
    ("model", "canonical"),
    [
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("o3-2025-04-16", "o3"),
        ("o4-mini-2025-04-16", "o4-mini"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("openai/gpt-5-nano", "gpt-5-nano"),
        ("gpt-4o-search-preview", "gpt-4o"),  # a variant of a known model
    ],
)
def test_openai_names_find_their_model(model: str, canonical: str) -> None:
    info = lookup_model("openai-compatible", model)

    assert info.known
    assert info == lookup_model("openai", canonical)


def test_the_table_has_the_numbers_that_matter() -> None:
    sonnet = lookup_model("anthropic", "claude-sonnet-4-5")
    assert (sonnet.context_window, sonnet.max_output) == (200_000, 64_000)
    assert (sonnet.input_price, sonnet.output_price) == (3.0, 15.0)
    assert (sonnet.cache_read_price, sonnet.cache_write_price) == (0.3, 3.75)
    assert sonnet.supports_images

    haiku = lookup_model("anthropic", "claude-3-5-haiku")
    assert (haiku.max_output, haiku.input_price, haiku.cache_write_price) == (8_192, 0.8, 1.0)

    mini = lookup_model("openai", "gpt-4o-mini")
    assert (mini.context_window, mini.input_price, mini.cache_read_price) == (128_000, 0.15, 0.075)
    assert mini.cache_write_price == 0.0  # OpenAI does not charge for writing its cache
    assert not lookup_model("openai", "o3-mini").supports_images


def test_every_entry_is_consistent() -> None:
    for provider in ("anthropic", "openai"):
        models = list_models(provider)
        assert models
        for model, info in models.items():
            assert info.known, model
            assert 0 < info.max_output <= info.context_window, model
            assert info.output_price >= info.input_price > 0, model
            assert info.cache_read_price < info.input_price, model
            assert lookup_model(provider, model) == info, model


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("anthropic", "claude-sonnet-4-7"),  # another version, not a variant of claude-sonnet-4
        ("anthropic", "claude-next"),
        ("openai", "gpt-5.9"),
        ("openai-compatible", "llama3.1:8b"),
        ("demo", "hdsp-demo"),
    ],
)
def test_unknown_models_get_defaults_marked_unknown(provider: str, model: str) -> None:
    info = lookup_model(provider, model)

    assert not info.known
    assert info.input_price == info.output_price == 0.0


def test_unknown_claude_models_get_claude_defaults() -> None:
    info = lookup_model("anthropic", "claude-next")

    assert info == ModelInfo(
        context_window=200_000, max_output=8_192, supports_images=True, known=False
    )
    assert DEFAULT_MODEL_INFO["anthropic"].known  # the shared default is not changed


def test_a_router_serving_claude_finds_anthropic_prices() -> None:
    assert lookup_model("openai-compatible", "anthropic/claude-sonnet-4.5") == lookup_model(
        "anthropic", "claude-sonnet-4-5"
    )


def test_the_users_models_win_over_the_table() -> None:
    mine = ModelInfo(context_window=50_000, max_output=1_000, input_price=9.0)
    extra = {"claude-sonnet-4-5": mine, "my-local-model": ModelInfo(context_window=32_768)}

    assert lookup_model("anthropic", "claude-sonnet-4-5-20250929", extra) == mine
    assert lookup_model("openai-compatible", "my-local-model", extra).context_window == 32_768
    assert lookup_model("openai-compatible", "my-local-model", extra).known
    # Others are untouched.
    assert lookup_model("anthropic", "claude-haiku-4-5", extra).input_price == 1.0


def test_an_exact_user_entry_wins_over_a_matched_one() -> None:
    exact = ModelInfo(context_window=1)
    extra = {"gpt-4o": ModelInfo(context_window=2), "gpt-4o-2024-08-06": exact}

    assert lookup_model("openai", "gpt-4o-2024-08-06", extra) == exact


def test_list_models_includes_the_users_models_in_order() -> None:
    mine = ModelInfo(context_window=32_768)
    models = list_models("openai-compatible", {"aaa-local": mine})

    assert next(iter(models)) == "aaa-local"
    assert models["aaa-local"] == mine
    assert "gpt-4o" in models
    assert not any(model.startswith("claude") for model in models)
    assert list_models("demo") == {}
