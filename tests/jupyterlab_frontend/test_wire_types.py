"""The panel's TypeScript wire types (clients/jupyterlab/frontend/src/wire.ts) are
generated from protocol/schema.json, and committed: they must be current, as
schema.json itself must be (tests/protocol/test_codec.py)."""

from __future__ import annotations

import pytest

from tests.jupyterlab_frontend import frontend


@pytest.mark.slow
@pytest.mark.timeout(600)  # a first run installs the frontend's packages (npm ci)
def test_committed_wire_types_are_current() -> None:
    done = frontend.run(["scripts/generate-wire-types.mjs", "--check"])
    assert done.returncode == 0, done.stderr or done.stdout
