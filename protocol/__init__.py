"""hdsp protocol v1: the wire types shared by the daemon and every client.

Imports only msgspec and the standard library (a test checks it).
"""

from __future__ import annotations

from .agents import *  # noqa: F403
from .agents import __all__ as _agents_all
from .blobs import *  # noqa: F403
from .blobs import __all__ as _blobs_all
from .checkpoints import *  # noqa: F403
from .checkpoints import __all__ as _checkpoints_all
from .codec import *  # noqa: F403
from .codec import __all__ as _codec_all
from .commands import *  # noqa: F403
from .commands import __all__ as _commands_all
from .discovery import *  # noqa: F403
from .discovery import __all__ as _discovery_all
from .documents import *  # noqa: F403
from .documents import __all__ as _documents_all
from .envelope import *  # noqa: F403
from .envelope import __all__ as _envelope_all
from .errors import ErrorCode
from .events import *  # noqa: F403
from .events import __all__ as _events_all
from .file_names import *  # noqa: F403
from .file_names import __all__ as _file_names_all
from .history import *  # noqa: F403
from .history import __all__ as _history_all
from .kernels import *  # noqa: F403
from .kernels import __all__ as _kernels_all
from .mcp import *  # noqa: F403
from .mcp import __all__ as _mcp_all
from .modes import *  # noqa: F403
from .modes import __all__ as _modes_all
from .prompt_context import *  # noqa: F403
from .prompt_context import __all__ as _prompt_context_all
from .relayed_calls import *  # noqa: F403
from .relayed_calls import __all__ as _relayed_calls_all
from .settings import *  # noqa: F403
from .settings import __all__ as _settings_all
from .status import *  # noqa: F403
from .status import __all__ as _status_all
from .storage import StorageHealth, StorageState
from .tasks import *  # noqa: F403
from .tasks import __all__ as _tasks_all
from .tcp import Z85_KEY_PATTERN, TcpEndpoints, check_curve_key, tcp_endpoints
from .variables import *  # noqa: F403
from .variables import __all__ as _variables_all
from .version import PROTOCOL_VERSION, __version__

__all__ = [
    "PROTOCOL_VERSION",
    "ErrorCode",
    "StorageHealth",
    "StorageState",
    "TcpEndpoints",
    "Z85_KEY_PATTERN",
    "__version__",
    "check_curve_key",
    "tcp_endpoints",
    *_blobs_all,
    *_codec_all,
    *_commands_all,
    *_discovery_all,
    *_documents_all,
    *_envelope_all,
    *_events_all,
    *_file_names_all,
    *_history_all,
    *_kernels_all,
    *_checkpoints_all,
    *_mcp_all,
    *_modes_all,
    *_agents_all,
    *_prompt_context_all,
    *_relayed_calls_all,
    *_settings_all,
    *_status_all,
    *_tasks_all,
    *_variables_all,
]
