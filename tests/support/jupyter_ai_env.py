"""A virtual environment with Jupyter AI 3 and this hdsp, for the test that
shows hdsp answering as a Jupyter AI persona.

Jupyter AI is not a dependency of hdsp, not even a dev one: its server
extensions would load into every JupyterLab the other tests start, and it pins
its own MCP and ACP libraries. So it gets a venv of its own, made with pip once
(`<venv>/hdsp-test-cache/jupyter-ai-<version>/`), with hdsp installed there in
editable mode from this source tree. A venv that cannot be made fails the test
that needs it, with pip's reason: it is never a silent skip.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cached_venv import cached_venv

__all__ = ["JUPYTER_AI", "JupyterAiUnavailable", "jupyter_ai_python"]

#: The release the test runs (3.x: ACP personas).
JUPYTER_AI = "3.2.0"

REPO = Path(__file__).resolve().parents[2]


class JupyterAiUnavailable(RuntimeError):
    """The Jupyter AI venv could not be made."""


def jupyter_ai_python() -> Path:
    """The interpreter of the Jupyter AI venv, made on first use."""
    return cached_venv(
        f"jupyter-ai-{JUPYTER_AI}",
        [f"jupyter-ai=={JUPYTER_AI}", "--editable", str(REPO)],
        what=f"Jupyter AI {JUPYTER_AI} next to hdsp",
        failure=JupyterAiUnavailable,
    )
