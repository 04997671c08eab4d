"""hdspd: the long-running per-user service that owns agent tasks, their durable
history and connections to Jupyter kernels."""

from __future__ import annotations

from hdsp.protocol import __version__

__all__ = ["__version__"]
