"""`python -m bench [--quick]`: run every benchmark, write bench/results/."""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path
from types import ModuleType

import anyio

from tests.support.daemon_process import DaemonProcess, short_tmp_dir

from . import (
    bench_curves,
    bench_fanout,
    bench_history,
    bench_journal,
    bench_kernel,
    bench_roundtrip,
    bench_scale,
    bench_snapshot,
    bench_startup,
    bench_token_count,
)
from .harness import Result, table, write_results

#: Each starts what it needs beyond the shared daemon; the round trip goes first, on
#: a quiet machine.
BENCHMARKS = [
    bench_roundtrip,
    bench_fanout,
    bench_kernel,
    bench_history,
    bench_journal,
    bench_scale,
    bench_startup,
    bench_snapshot,
    bench_curves,
    bench_token_count,
]


def _name(bench: ModuleType) -> str:
    return bench.__name__.rsplit(".", 1)[-1].removeprefix("bench_")


async def _main(quick: bool, out: Path, only: list[str]) -> list[Result]:
    chosen = [b for b in BENCHMARKS if not only or _name(b) in only]
    scratch = short_tmp_dir()
    daemon = DaemonProcess(short_tmp_dir())
    results: list[Result] = []
    try:
        daemon.start()
        for bench in chosen:
            print(f"running {_name(bench)} ...", file=sys.stderr)
            gc.collect()  # what the one before left behind is not this one's cost
            got = await bench.run(daemon.runtime_dir, scratch, quick=quick)
            results.extend(got if isinstance(got, list) else [got])
    finally:
        if daemon.proc is not None:
            daemon.stop()
        daemon.cleanup()
        DaemonProcess(scratch).cleanup()
    write_results(results, out, quick=quick)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("--quick", action="store_true", help="small sizes; checks the harness runs")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    p.add_argument(
        "only",
        nargs="*",
        metavar="NAME",
        help=f"run only these ({', '.join(_name(b) for b in BENCHMARKS)}); all by default",
    )
    args = p.parse_args(argv)
    unknown = set(args.only) - {_name(b) for b in BENCHMARKS}
    if unknown:
        p.error(f"no benchmark named {', '.join(sorted(unknown))}")
    results = anyio.run(_main, args.quick, args.out, args.only, backend="asyncio")
    sys.stdout.write(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
