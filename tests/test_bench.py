"""The benchmark harness runs and produces figures (how fast is `make bench`'s
business, not a test's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_quick_produces_every_figure(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        cwd=Path(__file__).parents[1],
        timeout=280,
    )
    data = json.loads((tmp_path / "quick.json").read_text())
    names = {r["name"] for r in data["results"]}
    assert names == {
        # fair
        "round trip, minimal client",
        "fan-out, same reading code, subscribers in one process",
        "fan-out, same reading code, subscribers in separate processes",
        "fan-out from real task turns",
        "journal commit+publish",
        "journal commit+publish, PostgreSQL",
        "kernel execute, lean client",
        "kernel execute, lean client on hdspd's kernel",
        "start-up, exec to first answered command",
        "curve: event log",
        "curve: tasks",
        "curve: history",
        "token count, Anthropic",
        "tool-call burst",
        "first execution of a task",
        # old, kept for comparison
        "event fan-out",
        "command round trip",
        "kernel execute",
        "start-up",
        "history growth",
        "scale",
        "snapshot",
    }
    for result in data["results"]:
        for figure in [*result["hdsp"].values(), *result["baseline"].values()]:
            assert 0 < figure["min"] <= figure["median"] <= figure["max"]
        assert result["ratios"], result["name"]
        assert result["description"], result["name"]
        before, after = result["load"]  # the load average it ran at
        assert before >= 0 and after >= 0, result["name"]
    table = (tmp_path / "quick.md").read_text()
    assert table.startswith("| benchmark |")
    for name in names:  # each row's definition is printed with the table
        assert f"\n- {name}: " in table
