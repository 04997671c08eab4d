"""Measuring: repetitions after a warm-up, medians with min and max, and ratios
against a baseline measured in the same run."""

from __future__ import annotations

import json
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Figure", "Result", "latency_result", "percentile", "table", "write_results"]


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


@dataclass
class Figure:
    """One measured quantity: its samples' median, min and max."""

    unit: str
    median: float
    min: float
    max: float
    p99: float | None = None

    @classmethod
    def of(cls, samples: list[float], unit: str, *, p99: bool = False) -> Figure:
        return cls(
            unit=unit,
            median=statistics.median(samples),
            min=min(samples),
            max=max(samples),
            p99=percentile(samples, 99) if p99 else None,
        )


@dataclass
class Result:
    name: str
    description: str
    hdsp: dict[str, Figure]
    baseline: dict[str, Figure] = field(default_factory=dict)
    #: name -> (value, target, "<=" or ">=")
    ratios: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    #: The machine's 1-minute load average when the benchmark started and ended
    #: (the machine is shared: a ratio is only worth the load it was taken at).
    load: tuple[float, float] | None = None

    def met(self) -> bool:
        return all((v <= t) if op == "<=" else (v >= t) for v, t, op in self.ratios.values())


def latency_result(
    name: str,
    description: str,
    hdsp: tuple[str, list[float]],
    baseline: tuple[str, list[float]],
    target: float,
) -> Result:
    """A latency comparison in µs from samples in seconds: both sides' figures
    with p99, and p50 and p99 ratios held to `target` (at most)."""
    (hdsp_name, hdsp_s), (base_name, base_s) = hdsp, baseline
    us = [s * 1e6 for s in hdsp_s]
    base = [s * 1e6 for s in base_s]
    result = Result(
        name=name,
        description=description,
        hdsp={hdsp_name: Figure.of(us, "µs", p99=True)},
        baseline={base_name: Figure.of(base, "µs", p99=True)},
    )
    for p in (50, 99):
        result.ratios[f"p{p}"] = (percentile(us, p) / percentile(base, p), target, "<=")
    return result


def _fmt(f: Figure) -> str:
    text = f"{f.median:.3g} {f.unit} ({f.min:.3g}-{f.max:.3g})"
    return text + (f", p99 {f.p99:.3g}" if f.p99 is not None else "")


def table(results: list[Result]) -> str:
    lines = [
        "| benchmark | hdsp | baseline | ratio (target) | met | load |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        hd = "; ".join(f"{k}: {_fmt(v)}" for k, v in r.hdsp.items())
        base = "; ".join(f"{k}: {_fmt(v)}" for k, v in r.baseline.items()) or "-"
        ratios = "; ".join(f"{k} {v:.3g} ({op} {t:g})" for k, (v, t, op) in r.ratios.items())
        load = f"{r.load[0]:.1f}-{r.load[1]:.1f}" if r.load is not None else "-"
        lines.append(
            f"| {r.name} | {hd} | {base} | {ratios or '-'} | {'yes' if r.met() else 'NO'} | {load} |"
        )
    lines += [
        "",
        "load: the 1-minute load average at the benchmark's start and end (2 cores, shared).",
        "What each compares (the module docstrings of bench/ say it in full):",
        "",
    ]
    lines += [f"- {r.name}: {r.description}" for r in results]
    return "\n".join(lines) + "\n"


def write_results(
    results: list[Result], directory: Path, *, quick: bool, stem: str | None = None
) -> Path:
    """Write `<stem>.json` and `<stem>.md` (stem: "quick" or "latest" by default)."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = stem or ("quick" if quick else "latest")
    payload: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "quick": quick,
        "results": [asdict(r) for r in results],
    }
    path = directory / f"{stem}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    (directory / f"{stem}.md").write_text(table(results))
    return path
