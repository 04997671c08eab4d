"""Model providers: one interface, one normalised stream of chunks.

The provider modules (and their SDKs) are imported when first used, not here,
and so is the registry (`hdsp.daemon.llm.registry`), which depends on the config.
"""

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

__all__ = [
    "AuthenticationFailed",
    "ContextWindowExceeded",
    "InvalidRequest",
    "NetworkError",
    "Overloaded",
    "Provider",
    "ProviderError",
    "RateLimited",
    "ServerError",
]
