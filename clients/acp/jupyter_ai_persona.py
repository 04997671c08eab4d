"""hdsp as a Jupyter AI 3 persona: the file `hdsp acp --jupyter-ai-persona` writes.

Jupyter AI 3 hosts ACP agents as chat personas: a persona is a Python class
(a `BaseAcpPersona` naming the agent's command) that Jupyter AI finds through
an entry point of a package installed next to it, or in a file of a
`.jupyter/personas/` directory above the chat. hdsp cannot be installed next to
Jupyter AI 3 (Jupyter AI's MCP libraries pin `mcp<2`, hdsp's MCP client and
server need `mcp>=2.3`), so hdsp gives the file: a persona whose command is
this hdsp's own interpreter running `hdsp acp`, wherever it is installed. The
adapter runs with the Jupyter server's environment, so it talks to the hdspd
that `HDSP_RUNTIME_DIR` (or the default runtime dir) names.

hdsp itself never imports Jupyter AI: the file is text to be written.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["AVATAR", "persona_file"]

#: The persona's picture.
AVATAR = Path(__file__).with_name("hdsp.svg")

_TEMPLATE = '''\
"""hdsp as a Jupyter AI persona (@hdsp), written by `hdsp acp --jupyter-ai-persona`.

Jupyter AI's ACP client runs `hdsp acp` from hdsp's own environment (below);
each chat is a hdsp task in the chat's directory, which outlives the chat and
which `hdsp attach` or the hdsp panel can follow and answer. Start hdspd first.
Write this file again (the same command) after moving or reinstalling hdsp.
"""

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_persona_manager import PersonaDefaults

#: The command that starts hdsp's ACP agent.
HDSP_ACP = {command!r}
#: hdsp's picture.
HDSP_AVATAR = {avatar!r}


class HdspAcpPersona(BaseAcpPersona):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, executable=list(HDSP_ACP), **kwargs)

    @property
    def defaults(self):
        return PersonaDefaults(
            name="hdsp",
            description=(
                "hdsp, the data-science agent in hdspd: its tasks outlive the chat, and "
                "`hdsp attach` or the hdsp panel can follow and answer them."
            ),
            avatar_path=HDSP_AVATAR,
            system_prompt="unused",
        )
'''


def persona_file(command: list[str] | None = None) -> str:
    """The persona file's text, for `.jupyter/personas/hdsp_persona.py`. Its
    command is `command`, by default this interpreter running `hdsp acp`."""
    if command is None:
        command = [sys.executable, "-m", "hdsp.client", "acp"]
    # (repr: the values are Python literals whatever characters a path holds.)
    return _TEMPLATE.format(command=list(command), avatar=str(AVATAR))
