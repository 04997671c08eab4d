"""The kinds of provider a profile can name, one row each: what a profile's
`provider` may say, which environment variables hold the key of a profile that
names no secret, and which model table its models are looked up in.

Adding a kind is adding a row here (and the Literal below) and the module it
names, whose ``build`` makes its provider (:mod:`hdsp.daemon.llm.recipe`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["PROVIDER_KINDS", "ProviderKind", "ProviderKindRow"]

#: A profile's `provider`: the keys of :data:`PROVIDER_KINDS` (a test checks both agree).
ProviderKind = Literal["anthropic", "openai", "openai-compatible", "demo"]


@dataclass(frozen=True, kw_only=True)
class ProviderKindRow:
    #: As a profile spells it.
    kind: str
    #: The module of :mod:`hdsp.daemon.llm` whose ``build`` makes its providers.
    module: str
    #: The secret a profile of this kind without a `secret` of its own takes its key
    #: from; None: such a profile has no key (it names one, or needs none).
    conventional_secret: str | None = None
    #: Environment variables read, in order, for the conventional secret when the
    #: keyring has no value.
    env_vars: tuple[str, ...] = ()
    #: The model table (:mod:`hdsp.daemon.llm.models`) its models are found in;
    #: None: it has none (GetModels lists nothing).
    family: str | None = None


PROVIDER_KINDS: Final[Mapping[str, ProviderKindRow]] = {
    row.kind: row
    for row in (
        ProviderKindRow(
            kind="anthropic",
            module="anthropic",
            conventional_secret="anthropic",
            env_vars=("ANTHROPIC_API_KEY",),
            family="anthropic",
        ),
        ProviderKindRow(
            kind="openai",
            module="openai_compat",
            conventional_secret="openai",
            env_vars=("OPENAI_API_KEY",),
            family="openai",
        ),
        # A server that speaks OpenAI's API (vLLM, Ollama, OpenRouter, LiteLLM...):
        # its key is the profile's own secret, its models are priced as OpenAI's
        # (routers serve Claude too, found in the other table).
        ProviderKindRow(kind="openai-compatible", module="openai_compat", family="openai"),
        # The bundled demo server: no key, no model table.
        ProviderKindRow(kind="demo", module="demo"),
    )
}
