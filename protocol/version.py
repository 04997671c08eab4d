"""Protocol and package versions."""

from __future__ import annotations

__all__ = ["PROTOCOL_VERSION", "__version__"]

#: Bumped only for changes that old peers cannot read. Additive changes keep it.
PROTOCOL_VERSION = 1

__version__ = "0.1.0"
