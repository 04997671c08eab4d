"""The Makefile's plans (issue 33), read from GNU make itself (`make -n`): `make run`
installs only what the daemon needs, with no Node.js, and a second `make run` with
nothing changed installs nothing; `make test` still installs [dev] and builds the
panel. The times are bench/bench_install.py's business."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A folder with the repository's Makefile and pyproject.toml and the panel's
    sources (the prerequisites make looks at), and no venv."""
    root = tmp_path / "hdsp"
    root.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)
    frontend = Path("clients/jupyterlab/frontend")
    for name in ("package.json", "package-lock.json", "tsconfig.json"):
        (root / frontend).mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / frontend / name, root / frontend / name)
    for name in ("package.json", "package-lock.json"):
        ui = Path("clients/jupyterlab/ui-tests")
        (root / ui).mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / ui / name, root / ui / name)
    return root


def plan(root: Path, *targets: str) -> list[str]:
    """The commands `make -n TARGETS` would run in `root`, one a line."""
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", *targets],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def stamp(root: Path, name: str) -> None:
    """Mark the venv installed (`name`), newer than pyproject.toml."""
    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / "bin" / "python").touch(mode=0o755)
    path = venv / name
    path.touch()
    later = (root / "pyproject.toml").stat().st_mtime + 10
    os.utime(path, (later, later))


def test_a_cold_make_run_installs_the_project_alone_with_no_node(checkout: Path) -> None:
    steps = plan(checkout, "run")
    text = "\n".join(steps)
    assert "-m venv .venv" in text
    assert "uv pip install" in text and " -e .;" in text  # the project alone
    assert "[dev]" not in text
    assert "npm" not in text and "labextension" not in text
    assert steps[-1] == ".venv/bin/hdspd"


def test_a_warm_make_run_installs_nothing(checkout: Path) -> None:
    stamp(checkout, ".installed-run")
    assert plan(checkout, "run") == [".venv/bin/hdspd"]
    # A changed pyproject.toml installs again.
    later = (checkout / ".venv" / ".installed-run").stat().st_mtime + 10
    os.utime(checkout / "pyproject.toml", (later, later))
    assert any("pip install" in step for step in plan(checkout, "run"))


def test_make_run_after_make_test_installs_nothing(checkout: Path) -> None:
    """A venv `make test` installed ([dev]) is one `make run` can use as it is."""
    stamp(checkout, ".installed-run")
    stamp(checkout, ".installed")
    assert plan(checkout, "run") == [".venv/bin/hdspd"]


def test_pip_alone_is_one_setting_away(checkout: Path) -> None:
    text = "\n".join(plan(checkout, "run", "INSTALLER=pip"))
    assert '[ "pip" = uv ]' in text  # so the uv branch is not taken
    assert "-m pip install --quiet --disable-pip-version-check -e ." in text


def test_make_test_still_installs_dev_and_builds_the_panel(checkout: Path) -> None:
    text = "\n".join(plan(checkout, "test"))
    assert "-e '.[dev]'" in text
    assert "npm ci" in text and "npm run --silent build" in text
    assert "ln -sfn" in text  # the editable install's link to the panel


def test_the_bench_finds_every_phase_it_times_in_what_make_prints(checkout: Path) -> None:
    """bench/bench_install.py splits a round by the lines make prints: each phase's
    line is one a cold `make run` prints, with uv or with pip (`make -n` shows the
    installer's echoes inside its shell line)."""
    from bench.bench_install import PHASES

    printed = "\n".join(plan(checkout, "run") + plan(checkout, "run", "INSTALLER=pip"))
    for prefix, name in PHASES:
        assert prefix in printed, name


def test_the_modules_whose_bytecode_make_run_writes_exist(checkout: Path) -> None:
    """The run stamp imports what hdspd and `hdsp` import at start (START_IMPORTS),
    to write their bytecode: a module renamed away would fail `make run`."""
    (line,) = [step for step in plan(checkout, "run") if "importlib.import_module" in step]
    modules = line.rpartition("]'")[2].split()
    assert "hdsp.daemon.app" in modules and "hdsp.client.cli" in modules
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    assert not missing, f"START_IMPORTS in the Makefile names modules that do not exist: {missing}"
