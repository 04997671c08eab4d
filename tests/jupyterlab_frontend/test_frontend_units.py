"""The panel's frontend unit tests (jest, clients/jupyterlab/frontend/test/):
the reducer event by event, the message helpers, and the committed recording
of a daemon run, so that `make test` runs them."""

from __future__ import annotations

import pytest

from tests.jupyterlab_frontend import frontend


@pytest.mark.slow
@pytest.mark.timeout(600)  # a first run installs the frontend's packages (npm ci)
def test_the_frontend_unit_tests_pass() -> None:
    done = frontend.run(["node_modules/jest/bin/jest.js", "--ci"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Tests:" in done.stderr and " failed" not in done.stderr, done.stderr
