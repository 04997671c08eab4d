"""Checkpoint cost (issue 20): the time of one checkpoint of a workspace of
10,000 files when one file changed since the last, and when none did, with the
real git through `ShadowRepo` as the daemon drives it.

The workspace: 10,000 small text files in 100 folders (and a .gitignore), saved
once first (the first checkpoint stages everything; not timed). Then, in each
round, one file is rewritten and a checkpoint taken (timed from the call to its
return: `git status` with the untracked cache, `git add` of the one path,
write-tree, commit-tree, update-ref), then a checkpoint with nothing changed
(`git status` only: no commit). Baseline: a bare `git status --porcelain` of the
same shadow repository, the floor of finding what changed.

`python -m bench.bench_checkpoints [--rounds N]` prints min and median of each
and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from hdsp.daemon.checkpoints import ShadowRepo

FILES = 10_000
FOLDERS = 100


def _fill(workspace: Path) -> None:
    for i in range(FILES):
        folder = workspace / f"d{i % FOLDERS:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i:05d}.txt").write_text(f"file {i}\n" * 4)
    (workspace / ".gitignore").write_text("*.log\n")


async def measure(rounds: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        _fill(workspace)
        repo = ShadowRepo(Path(tmp) / "data", workspace, max_file_bytes=10 * 2**20)
        await repo.save("first")
        await repo.save("settle")  # (the untracked cache is written by the first status)
        one: list[float] = []
        none: list[float] = []
        floor: list[float] = []
        for r in range(rounds):
            (workspace / "d042" / "f00042.txt").write_text(f"round {r}\n")
            started = time.perf_counter()
            saved = await repo.save(f"round {r}")
            one.append((time.perf_counter() - started) * 1000)
            assert saved.changed == ["d042/f00042.txt"], saved.changed
            started = time.perf_counter()
            again = await repo.save(f"round {r} again")
            none.append((time.perf_counter() - started) * 1000)
            assert again.commit == saved.commit
            started = time.perf_counter()
            await repo.git("status", "--porcelain=v1", "-z", "--untracked-files=all")
            floor.append((time.perf_counter() - started) * 1000)
        return {"one file changed": one, "nothing changed": none, "git status alone": floor}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    before = os.getloadavg()
    results = anyio.run(measure, args.rounds)
    after = os.getloadavg()
    print(f"checkpoint of a {FILES:,}-file workspace, {args.rounds} rounds (ms):")
    for name, samples in results.items():
        print(
            f"  {name:<18} min {min(samples):7.1f}  median {statistics.median(samples):7.1f}"
            f"  max {max(samples):7.1f}"
        )
    print(
        f"load average before {before[0]:.2f} {before[1]:.2f}, after {after[0]:.2f} {after[1]:.2f}"
    )


if __name__ == "__main__":
    main()
