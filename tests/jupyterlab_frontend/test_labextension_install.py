"""The wheel carries the prebuilt panel: installed into a fresh virtualenv next
to JupyterLab, `jupyter labextension list` shows it enabled and OK, with no
Node.js at install time. (The labextension must have been built: `make labext`,
which `make test` runs first.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.jupyterlab_frontend import frontend
from tests.test_packaging import _NOT_COPIED, REPO, run

#: Where JupyterLab looks for a prebuilt extension: its npm name.
DATA = "hdsp-0.1.0.data/data/share/jupyter/labextensions/@hdsp/jupyterlab/"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_installs_the_panel_where_jupyterlab_finds_it(tmp_path: Path) -> None:
    built = frontend.FRONTEND.parent / "labextension" / "package.json"
    assert built.exists(), "the labextension is not built: run `make labext`"
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=_NOT_COPIED, symlinks=True)
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--wheel", "--outdir", dist, source])
    (wheel,) = dist.glob("hdsp-*.whl")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        meta = json.loads(archive.read(DATA + "package.json"))
    assert meta["name"] == "@hdsp/jupyterlab"
    entry = meta["jupyterlab"]["_build"]["load"]
    assert DATA + entry in names, f"the wheel lacks the panel's {entry}"
    assert not any("node_modules" in name or "/frontend/" in name for name in names)

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv])
    pip = [venv / "bin" / "python", "-m", "pip", "install", "--quiet"]
    run([*pip, "--no-deps", wheel])  # the panel needs nothing of hdsp's own deps to list
    run([*pip, "jupyterlab>=4"])
    # It prints its list on stderr.
    done = subprocess.run(
        [venv / "bin" / "jupyter", "labextension", "list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    listed = done.stdout + done.stderr
    line = next((ln for ln in listed.splitlines() if "@hdsp/jupyterlab" in ln), "")
    assert done.returncode == 0 and "enabled" in line and "OK" in line, listed
