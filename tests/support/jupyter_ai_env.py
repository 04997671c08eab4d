"""A virtual environment with Jupyter AI 3, for the test that shows hdsp
answering as a Jupyter AI persona.

Jupyter AI is not a dependency of hdsp, not even a dev one: its server
extensions would load into every JupyterLab the other tests start, and it pins
its own MCP and ACP libraries (`mcp<2`, where hdsp needs `mcp>=2.3`: the two
cannot share an environment). So it gets a venv of its own, made with pip once
(`<venv>/hdsp-test-cache/jupyter-ai-<version>-alone/`), without hdsp, as a user
has it: Jupyter AI runs this tree's `hdsp acp` from hdsp's own venv, through the
persona file `hdsp acp --jupyter-ai-persona` writes. A venv that cannot be made
fails the test that needs it, with pip's reason: it is never a silent skip.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cached_venv import cached_venv

__all__ = ["JUPYTER_AI", "JupyterAiUnavailable", "jupyter_ai_python"]

#: The release the test runs (3.x: ACP personas).
JUPYTER_AI = "3.2.0"


class JupyterAiUnavailable(RuntimeError):
    """The Jupyter AI venv could not be made."""


def jupyter_ai_python() -> Path:
    """The interpreter of the Jupyter AI venv, made on first use."""
    return cached_venv(
        f"jupyter-ai-{JUPYTER_AI}-alone",
        [f"jupyter-ai=={JUPYTER_AI}"],
        what=f"Jupyter AI {JUPYTER_AI}",
        failure=JupyterAiUnavailable,
    )
