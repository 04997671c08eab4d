"""`python -m bench [--quick]`: run every benchmark, write bench/results/."""

from __future__ import annotations

import argparse
import compileall
import gc
import os
import re
import sys
import time
from pathlib import Path
from types import ModuleType

import anyio

from tests.support.daemon_process import DaemonProcess, short_tmp_dir

from . import (
    bench_burst,
    bench_curves,
    bench_fanout,
    bench_first_execution,
    bench_history,
    bench_journal,
    bench_journal_pg,
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
    bench_journal_pg,
    bench_scale,
    bench_startup,
    bench_snapshot,
    bench_curves,
    bench_token_count,
    bench_burst,
    bench_first_execution,
]


def _compile_sources() -> None:
    """Bytecode for hdsp's own modules (and the peers'), as `pip install` writes it:
    with PYTHONDONTWRITEBYTECODE set (as on this machine) a source checkout has
    none, so every hdspd and `hdsp` the benchmarks spawn compiled some 50 modules
    from source (about 100 ms of its start-up), while a baseline process, made of
    installed packages, had its bytecode: a warm-up the two sides did not share."""
    import hdsp.client
    import hdsp.daemon
    import hdsp.protocol

    root = Path(__file__).resolve().parent
    dirs = [*hdsp.daemon.__path__, *hdsp.protocol.__path__, *hdsp.client.__path__]
    dirs += [
        str(root),
        str(root.parent / "tests" / "support"),
        str(root.parent / "tests" / "fakes"),
    ]
    for directory in dirs:
        compileall.compile_dir(directory, quiet=1, rx=re.compile(r"node_modules"))


def _name(bench: ModuleType) -> str:
    return bench.__name__.rsplit(".", 1)[-1].removeprefix("bench_")


async def _main(quick: bool, out: Path, only: list[str]) -> list[Result]:
    chosen = [b for b in BENCHMARKS if not only or _name(b) in only]
    _compile_sources()
    scratch = short_tmp_dir()
    daemon = DaemonProcess(short_tmp_dir())
    results: list[Result] = []
    try:
        daemon.start()
        for bench in chosen:
            print(f"running {_name(bench)} ...", file=sys.stderr, end=" ", flush=True)
            started = time.perf_counter()
            gc.collect()  # what the one before left behind is not this one's cost
            load_before = os.getloadavg()[0]
            got = await bench.run(daemon.runtime_dir, scratch, quick=quick)
            load_after = os.getloadavg()[0]
            for result in got if isinstance(got, list) else [got]:
                result.load = (load_before, load_after)
                results.append(result)
            print(
                f"{time.perf_counter() - started:.0f} s (load {load_before:.1f}-{load_after:.1f})",
                file=sys.stderr,
            )
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
    # The stores the benchmarks open in this process log as hdspd's would: only
    # warnings and errors belong between the lines of the progress report.
    from hdsp.daemon.logs import configure_logging

    configure_logging("warning")
    results = anyio.run(_main, args.quick, args.out, args.only, backend="asyncio")
    sys.stdout.write(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
