"""The size limit of a prompt: a task's first message and each message sent to
it. A prompt past :data:`~hdsp.protocol.MAX_PROMPT_BYTES` (1 MiB) is refused
before anything is stored or sent to the model, with a message that names the
limit and what the model reads at most: a 10 MB prompt would fill no model's
context, only the store and every client's screen."""

from __future__ import annotations

from hdsp.daemon.config import ProfileNotFound
from hdsp.daemon.conversation import ModelInfo
from hdsp.daemon.errors import BadRequest
from hdsp.daemon.llm.registry import Providers
from hdsp.protocol import MAX_PROMPT_BYTES

__all__ = ["check_prompt_size"]

#: About this many bytes of text make a token (the estimate hdsp counts by for
#: models it has no tokenizer of).
_BYTES_PER_TOKEN = 4


def check_prompt_size(text: str | None, providers: Providers, profile: str | None) -> None:
    """Refuse `text`, a prompt for the model of `profile`, if it is larger than
    the limit (BadRequest, the sizes in its details)."""
    if text is None or len(text) * 4 <= MAX_PROMPT_BYTES:  # (no character takes more)
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_PROMPT_BYTES:
        return
    try:
        provider = providers.get(profile)
        model, window = provider.model, provider.info().context_window
    except ProfileNotFound:
        model, window = "(its profile is gone)", ModelInfo().context_window
    raise BadRequest(
        f"The prompt is {size / 1e6:.1f} MB ({size:,} bytes); hdsp takes prompts of up to "
        f"1 MiB ({MAX_PROMPT_BYTES:,} bytes). The model {model} reads at most {window:,} "
        f"tokens, about {window * _BYTES_PER_TOKEN / 1e6:.1f} MB of text, its replies "
        "included: put large data in a file in the workspace and name the file in the prompt.",
        details={"size": size, "limit": MAX_PROMPT_BYTES, "contextWindow": window},
    )
