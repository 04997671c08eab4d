"""`make run` from a fresh clone (issue 33): the time to a running daemon, cold and warm.

Each round is timed from the invocation of `make run` to the reply of `hdsp daemon
status`: make creates .venv, installs uv into it with pip, installs the project
(without [dev], no Node.js) with uv, and starts hdspd in the foreground; hdspd says
READY=1 on the socket named by NOTIFY_SOCKET once its sockets are bound, and
`hdsp daemon status` is asked then (its answer ends the round).

The rounds, in this order, each with its own data and runtime dirs:

1. cold, empty caches: `git clone` of this repository's HEAD into a new temporary
   folder, then `make run`, with UV_CACHE_DIR and PIP_CACHE_DIR set to new empty
   folders (so every package is downloaded from the index);
2. warm: a second `make run` in that clone, nothing changed (the stamps say it is
   installed: no installer runs);
3. cold, warm caches: a second fresh clone, with the caches round 1 filled;
4. baseline, cold with pip alone (`make run INSTALLER=pip`), a fresh clone and an
   empty pip cache: what uv is held to (uv ÷ pip, at most 1).

The caches are the benchmark's own unless `--user-caches` is given (then round 1
uses the user's caches as they are, and says how full they were). Every round's
daemon is stopped (`hdsp daemon stop`) before the next begins. Only HEAD is
cloned: commit what is to be measured.

`make bench-install` (or `python -m bench.bench_install [--skip-pip]`) prints the
table and writes bench/results/install.json and install.md.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .harness import Figure, Result, table, write_results

__all__ = ["Round", "main", "make_run"]

REPO = Path(__file__).resolve().parents[1]

#: What the issue asks of `make run` on this machine (seconds).
COLD_TARGET = 120.0
WARM_TARGET = 5.0

#: No round may take longer than this (an install that hangs fails the benchmark).
PATIENCE = 900.0


@dataclass
class Round:
    """One `make run`: seconds to READY=1 and to the answer of `hdsp daemon status`."""

    to_ready: float
    to_status: float
    load: tuple[float, float]
    log: Path
    #: Seconds in each phase (see `PHASES`) this round went through.
    phases: dict[str, float]


def _size(path: Path) -> int:
    if not path.is_dir():
        return 0
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _clean_env(root: Path) -> dict[str, str]:
    """The user's environment as a shell in a fresh clone has it: no venv of ours on
    PATH, no outer make's flags, no hdsp or systemd settings; the daemon's files under
    `root`."""
    ours = str(Path(sys.executable).parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HDSP_", "NOTIFY_"))
        and k not in {"VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"}
    }
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != ours)
    env |= {
        "HDSP_DATA_DIR": str(root / "data"),
        "HDSP_RUNTIME_DIR": str(root / "run"),
        "XDG_DATA_HOME": str(root / "xdg-data"),
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
    }
    return env


def clone(into: Path, commit: str) -> Path:
    """A fresh clone of this repository, at `commit` (every round measures the same)."""
    checkout = into / "hdsp"
    for argv in (
        ["git", "clone", "--quiet", "--no-hardlinks", "--no-checkout", str(REPO), str(checkout)],
        ["git", "-C", str(checkout), "checkout", "--quiet", commit],
    ):
        subprocess.run(argv, check=True, capture_output=True)
    return checkout


#: The phases of a `make run`: each begins when make prints a line that starts with
#: its prefix (make prints each command before it runs it, the installer says which
#: it runs), and lasts until the next one begins; the last, until READY=1.
PHASES = (
    ("test -x .venv/bin/python", "venv"),
    ("pip install uv", "pip install uv"),
    ("uv pip install", "install with uv"),
    ("pip install -e", "install with pip"),
    ("PYTHONDONTWRITEBYTECODE=", "bytecode of what hdspd imports"),
    (".venv/bin/hdspd", "hdspd to READY"),
)


def phases(lines: list[tuple[float, str]], to_ready: float) -> dict[str, float]:
    """Seconds spent in each phase this round went through, by the times at which
    make printed its lines; "make" is what came before the first."""
    begun: list[tuple[float, str]] = [(0.0, "make")]
    for at, line in lines:
        for prefix, name in PHASES:
            if line.startswith(prefix) and name not in {n for _, n in begun}:
                begun.append((at, name))
    ends = [at for at, _ in begun[1:]] + [to_ready]
    spent = {name: end - at for (at, name), end in zip(begun, ends, strict=True)}
    if spent["make"] < 0.05:
        del spent["make"]  # (a cold round: the venv came first)
    return spent


def _read_lines(
    stream: IO[bytes], t0: float, log: IO[bytes], into: list[tuple[float, str]]
) -> None:
    for raw in stream:
        into.append((time.perf_counter() - t0, raw.decode(errors="replace").strip()))
        log.write(raw)


def make_run(
    checkout: Path, root: Path, env_extra: dict[str, str], *make_args: str, log_name: str
) -> Round:
    """Run `make run` in `checkout` until hdspd answers `hdsp daemon status`, then stop
    the daemon (and so make) and return the times."""
    root.mkdir(parents=True, exist_ok=True)
    env = _clean_env(root) | env_extra
    runtime = Path(env["HDSP_RUNTIME_DIR"])
    notify_path = root / "notify"
    log = root / log_name
    load_before = os.getloadavg()[0]
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify,
        open(log, "wb") as out,
    ):
        notify.bind(str(notify_path))
        env["NOTIFY_SOCKET"] = str(notify_path)
        lines: list[tuple[float, str]] = []
        started = time.perf_counter()
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "run", *make_args],
            cwd=checkout,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=_read_lines, args=(proc.stdout, started, out, lines))
        reader.start()
        try:
            to_ready = _wait_ready(proc, notify, started, log)
            status = [str(checkout / ".venv" / "bin" / "hdsp"), "daemon", "status"]
            answer = subprocess.run(
                [*status, "--runtime-dir", str(runtime)], env=env, capture_output=True, text=True
            )
            to_status = time.perf_counter() - started
            if answer.returncode != 0:
                raise RuntimeError(f"hdsp daemon status failed: {answer.stdout}{answer.stderr}")
        finally:
            _stop(proc, checkout, runtime, env)
            reader.join(30)
    load = (load_before, os.getloadavg()[0])
    return Round(to_ready, to_status, load, log, phases(lines, to_ready))


def _wait_ready(
    proc: subprocess.Popen[bytes], notify: socket.socket, t0: float, log: Path
) -> float:
    pidfd = os.pidfd_open(proc.pid)
    try:
        while (left := PATIENCE - (time.perf_counter() - t0)) > 0:
            ready, _, _ = select.select([notify.fileno(), pidfd], [], [], left)
            if notify.fileno() in ready:
                if b"READY=1" in notify.recv(4096).split(b"\n"):
                    return time.perf_counter() - t0
            elif ready:
                tail = log.read_text(errors="replace")[-4000:]
                raise RuntimeError(f"make run exited {proc.wait()} before hdspd was ready:\n{tail}")
    finally:
        os.close(pidfd)
    raise RuntimeError(f"hdspd was not ready within {PATIENCE:.0f} s (see {log})")


def _stop(
    proc: subprocess.Popen[bytes], checkout: Path, runtime: Path, env: dict[str, str]
) -> None:
    """Ask the daemon to stop, as a user would; make ends with it. A daemon that does
    not stop, and make, are ended by a signal to make's process group."""
    hdsp = checkout / ".venv" / "bin" / "hdsp"
    if proc.poll() is None and hdsp.exists():
        subprocess.run(
            [str(hdsp), "daemon", "stop", "--runtime-dir", str(runtime)],
            env=env,
            capture_output=True,
            check=False,
        )
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _mb(n: int) -> str:
    return f"{n / 2**20:.0f} MB"


def measure(work: Path, commit: str, *, user_caches: bool, skip_pip: bool) -> list[Result]:
    fresh = {"UV_CACHE_DIR": str(work / "uv-cache"), "PIP_CACHE_DIR": str(work / "pip-cache")}
    if user_caches:
        caches_env: dict[str, str] = {}
        uv_dir = Path(os.environ.get("UV_CACHE_DIR", Path.home() / ".cache" / "uv"))
        pip_dir = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip"))
        state = (
            f"the user's caches as they were (uv {_mb(_size(uv_dir))}, pip {_mb(_size(pip_dir))})"
        )
    else:
        caches_env = fresh
        state = "empty caches (UV_CACHE_DIR and PIP_CACHE_DIR: new empty folders)"
    results: list[Result] = []
    # 1. cold; 2. warm (the same clone again).
    first = clone(work / "clone-1", commit)
    cold = make_run(first, work / "round-1", caches_env, log_name="make-run.log")
    print(f"cold, {state}: {cold.to_status:.1f} s", file=sys.stderr)
    filled = _size(work / "uv-cache") if not user_caches else None
    warm = make_run(first, work / "round-2", caches_env, log_name="make-run.log")
    print(f"warm: {warm.to_status:.2f} s", file=sys.stderr)
    # 3. a fresh clone again, the caches as round 1 left them.
    second = clone(work / "clone-2", commit)
    recached = make_run(second, work / "round-3", caches_env, log_name="make-run.log")
    print(f"cold, warm caches: {recached.to_status:.1f} s", file=sys.stderr)
    pip_round = None
    if not skip_pip:
        pip_env = {"PIP_CACHE_DIR": str(work / "pip-only-cache")}
        third = clone(work / "clone-3", commit)
        pip_round = make_run(
            third, work / "round-4", pip_env, "INSTALLER=pip", log_name="make-run.log"
        )
        print(f"cold with pip, empty pip cache: {pip_round.to_status:.1f} s", file=sys.stderr)

    def figures(r: Round) -> dict[str, Figure]:
        got = {
            "to status": Figure.of([r.to_status], "s"),
            "to READY": Figure.of([r.to_ready], "s"),
        }
        return got | {name: Figure.of([spent], "s") for name, spent in r.phases.items()}

    cold_result = Result(
        name="make run, fresh clone, cold",
        description=(
            f"`git clone` then `make run` (venv, uv, the project, hdspd) to the answer of "
            f"`hdsp daemon status`; {state}. Baseline: the same with INSTALLER=pip and an "
            f"empty pip cache (ratio uv ÷ pip)."
        ),
        hdsp=figures(cold),
        ratios={"to status, s": (cold.to_status, COLD_TARGET, "<=")},
        load=cold.load,
    )
    if pip_round is not None:
        before, after = pip_round.load
        cold_result.description += f" The pip round ran at load {before:.1f}-{after:.1f}."
        cold_result.baseline = {"pip": Figure.of([pip_round.to_status], "s")}
        cold_result.ratios["uv ÷ pip"] = (cold.to_status / pip_round.to_status, 1.0, "<=")
    results.append(cold_result)
    results.append(
        Result(
            name="make run, warm",
            description=(
                "a second `make run` in the same clone, nothing changed (no installer runs), "
                "to the answer of `hdsp daemon status`."
            ),
            hdsp=figures(warm),
            ratios={"to status, s": (warm.to_status, WARM_TARGET, "<=")},
            load=warm.load,
        )
    )
    cache_note = "" if filled is None else f" ({_mb(filled)} of uv cache)"
    results.append(
        Result(
            name="make run, fresh clone, warm caches",
            description=(
                f"a second fresh clone, `make run` with the caches the first round filled"
                f"{cache_note}: the same install, nothing downloaded."
            ),
            hdsp=figures(recached),
            ratios={"to status, s": (recached.to_status, COLD_TARGET, "<=")},
            load=recached.load,
        )
    )
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_install", description=__doc__)
    p.add_argument("--skip-pip", action="store_true", help="leave out the pip baseline")
    p.add_argument(
        "--user-caches",
        action="store_true",
        help="round 1 uses the user's uv and pip caches as they are (default: empty ones)",
    )
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    p.add_argument("--keep", action="store_true", help="keep the clones and their logs")
    args = p.parse_args(argv)
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"cloning {REPO} at {head[:10]} (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="hdsp-install-", dir="/tmp"))
    started = time.perf_counter()
    try:
        results = measure(work, head, user_caches=args.user_caches, skip_pip=args.skip_pip)
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"({time.perf_counter() - started:.0f} s in all)", file=sys.stderr)
    write_results(results, args.out, quick=False, stem="install")
    sys.stdout.write(table(results))
    return 0 if all(r.met() for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
