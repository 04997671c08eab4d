"""Holds one import in a process a test starts, to make an import race happen
every time instead of now and then.

Put this directory on the child's ``PYTHONPATH`` (Python imports
``sitecustomize`` at start-up) and set ``HDSP_TEST_HOLD_IMPORT`` to
``MODULE:HELD:RELEASE``, two FIFOs the test made (:class:`tests.support.import_hold.ImportHold`).
The first import of MODULE by a thread other than the main one stops before the
module's code runs, as a slow import would, while that thread holds the import
locks of MODULE and of every module it is importing on the way (those that
import MODULE): it writes
to HELD (which returns once the test reads it) and then reads a byte from RELEASE
(which the test writes). No polling: FIFOs block
until the other side opens them.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType


class _HeldLoader(Loader):
    """Runs the module's code once the test lets it."""

    def __init__(self, inner: Loader, held: str, release: str) -> None:
        self._inner = inner
        self._held = held
        self._release = release

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # RELEASE is open for reading before HELD is written, so the test's
        # release can never come in between and find no reader. Opened read-write,
        # so the open does not wait for a writer and the read waits for a byte.
        release = os.open(self._release, os.O_RDWR)
        try:
            with open(self._held, "w") as held:
                held.write(f"{threading.current_thread().name}\n")
            os.read(release, 1)
        finally:
            os.close(release)
        self._inner.exec_module(module)


class _HoldImport(MetaPathFinder):
    def __init__(self, module: str, held: str, release: str) -> None:
        self._module = module
        self._held = held
        self._release = release

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != self._module or threading.current_thread() is threading.main_thread():
            return None
        sys.meta_path.remove(self)  # once
        # Held while the module runs, not here: finders run under the global
        # import lock, which would stop every import in every thread.
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _HeldLoader(spec.loader, self._held, self._release)
        return spec


def _install() -> None:
    spec = os.environ.get("HDSP_TEST_HOLD_IMPORT")
    if spec:
        module, held, release = spec.split(":")
        sys.meta_path.insert(0, _HoldImport(module, held, release))


_install()
