"""Holding an import in a child process (see ``sitecustomize`` here)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio.to_thread

__all__ = ["ImportHold"]

_HERE = Path(__file__).parent


class ImportHold:
    """The first import of `module` off the main thread of a child process waits
    until :meth:`release`; :meth:`wait_held` returns once it waits. Give the child
    :attr:`env`."""

    def __init__(self, module: str, directory: Path) -> None:
        self._held = directory / "import-held"
        self._release = directory / "import-release"
        os.mkfifo(self._held)
        os.mkfifo(self._release)
        self.env = {
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(_HERE), os.environ.get("PYTHONPATH", "")) if p
            ),
            "HDSP_TEST_HOLD_IMPORT": f"{module}:{self._held}:{self._release}",
        }
        self.released = False

    async def wait_held(self) -> str:
        """Wait until the child holds the import; returns the holding thread's
        name. The caller sets the deadline."""

        def read() -> str:
            with open(self._held) as held:
                return held.read().strip()

        return await anyio.to_thread.run_sync(read, abandon_on_cancel=True)

    def release(self) -> None:
        """Let the held import go on (nothing happens if it is not held)."""
        if self.released:
            return
        try:
            fd = os.open(self._release, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader, the import is not held
            return
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
        self.released = True
