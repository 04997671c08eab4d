"""Model providers: one interface, one normalised stream of chunks."""

from __future__ import annotations

from .base import Provider
from .errors import (
    AuthenticationFailed,
    ContextWindowExceeded,
    InvalidRequest,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)
from .openai_compat import OpenAICompatibleProvider
from .registry import Providers

__all__ = [
    "AuthenticationFailed",
    "ContextWindowExceeded",
    "InvalidRequest",
    "NetworkError",
    "OpenAICompatibleProvider",
    "Overloaded",
    "Provider",
    "ProviderError",
    "Providers",
    "RateLimited",
    "ServerError",
]
