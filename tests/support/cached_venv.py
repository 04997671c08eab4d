"""A virtual environment made with pip once, under the test venv
(`<venv>/hdsp-test-cache/NAME/`), for what cannot share hdsp's own environment
(Jupyter AI, Enterprise Gateway). One that cannot be made fails the test that
needs it, with pip's reason: it is never a silent skip."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["cached_venv"]


def cached_venv(name: str, pip_args: list[str], *, what: str, failure: type[Exception]) -> Path:
    """The interpreter of the venv `name`, made on first use with `pip install
    PIP_ARGS`; `failure(message)` is raised, saying `what` could not be
    installed and why, when pip fails."""
    target = Path(sys.prefix) / "hdsp-test-cache" / name
    python = target / "bin" / "python"
    if (target / ".installed").is_file():
        return python
    shutil.rmtree(target, ignore_errors=True)
    venv.create(target, with_pip=True, symlinks=True)
    command = [str(python), "-m", "pip", "install", "--quiet", *pip_args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False)
    if done.returncode != 0:
        raise failure(
            f"could not install {what}: `{' '.join(command)}` exited {done.returncode}:\n"
            f"{done.stderr.strip()[-3000:]}"
        )
    (target / ".installed").write_text(name + "\n")
    return python
