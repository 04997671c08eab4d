"""bench/bench_install.py reads the phases of a `make run` from the lines make
prints (the run itself is `make bench-install`'s business: it installs from the
package index)."""

from __future__ import annotations

import pytest

from bench.bench_install import phases


def test_a_cold_round_is_split_into_its_phases() -> None:
    lines = [
        (0.01, "test -x .venv/bin/python || python3 -m venv .venv"),
        (5.0, "pip install uv (into .venv)"),
        (12.0, "uv pip install -e ."),
        (20.0, "PYTHONDONTWRITEBYTECODE= .venv/bin/python -c 'import hdsp.daemon.app'"),
        (22.0, "touch .venv/.installed-run"),
        (22.5, ".venv/bin/hdspd"),
        (23.0, '{"event": "hdspd ready"}'),
    ]
    spent = phases(lines, to_ready=24.5)
    assert spent == pytest.approx(
        {
            "venv": 4.99,
            "pip install uv": 7.0,
            "install with uv": 8.0,
            "bytecode of what hdspd imports": 2.5,
            "hdspd to READY": 2.0,
        }
    )


def test_a_warm_round_is_make_then_hdspd() -> None:
    assert phases([(0.3, ".venv/bin/hdspd")], to_ready=1.5) == pytest.approx(
        {"make": 0.3, "hdspd to READY": 1.2}
    )
