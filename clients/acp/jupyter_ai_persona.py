"""hdsp as a Jupyter AI 3 persona: Jupyter AI's ACP client running `hdsp acp`.

Jupyter AI finds it through the `jupyter_ai.personas` entry point hdsp declares,
so installing hdsp next to `jupyter-ai` (same environment as the Jupyter
server) is all it takes: "hdsp" appears among the chat's personas (@hdsp). The
adapter runs with the server's interpreter and environment, so it talks to the
hdspd that `HDSP_RUNTIME_DIR` (or the default runtime dir) names.

Only Jupyter AI imports this module; hdsp itself never needs Jupyter AI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["HdspAcpPersona"]

try:
    from jupyter_ai_acp_client.base_acp_persona import (  # type: ignore[import-not-found]
        BaseAcpPersona,
    )
    from jupyter_ai_persona_manager import PersonaDefaults  # type: ignore[import-not-found]
except ImportError:  # Jupyter AI is not installed here: there is nothing to define.
    __all__ = []
else:

    class HdspAcpPersona(BaseAcpPersona):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            executable = [sys.executable, "-m", "hdsp.client", "acp"]
            super().__init__(*args, executable=executable, **kwargs)

        @property
        def defaults(self) -> Any:
            return PersonaDefaults(
                name="hdsp",
                description="hdsp, the data-science agent in hdspd: its tasks outlive the "
                "chat, and `hdsp attach` or the hdsp panel can follow and answer them.",
                avatar_path=str(Path(__file__).with_name("hdsp.svg")),
                system_prompt="unused",
            )
