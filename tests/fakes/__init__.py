"""Wire-level fakes of the services hdsp talks to, over real sockets.

Each lives in its own module (``tests.fakes.openai_server``, ...), imported from
there; this package re-exports nothing, so that ``python -m tests.fakes.<name>``
runs a fake without importing it twice.
"""

from __future__ import annotations

__all__: list[str] = []
