"""hdsp's asks as ACP permission requests, and the host's choice as hdsp's answer.

A host offers its user the options the adapter lists: allow once (approve this
call), allow always (approve this call, and later calls of the same scope in
this session without asking), reject (deny it). "The same scope" is what the
ask showed, as for a shell command, whose scope is the very same command line:
the very same code for `execute_code`, the same tool on the same path for file
and notebook tools (a write's content differs from call to call; its place does
not), and the very same call for any other tool. The option's label says which.
A call whose ask does not show what it runs (`run_cell` runs whatever the cell
holds then, a kernel replay runs a checkpoint's cells), a protected path and
the cap on automatic approvals never offer "always", and hdsp's cap on
automatic approvals in a row (`max_auto_approved_requests`) counts the calls an
"always" approves: at the cap the host is asked again. Nothing a host sends
widens hdsp's own approval settings: an "always" lives in this session's record
only, and each call it approves is answered as an ordinary approval, which
every hdsp client sees.
"""

from __future__ import annotations

import json

from acp.schema import PermissionOption

from hdsp.protocol import AskResponse, ClineMessage

from .updates import inline_code

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "REJECT_ONCE",
    "always_scope",
    "answer_of_option",
    "permission_options",
]

ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"

#: Tools whose ask does not show the code they run: each call is approved alone.
_RUNS_UNSHOWN = frozenset({"replay_kernel", "run_cell"})
#: The most characters of a path a label shows (the scope is the whole path).
_LABEL_PATH = 80


def always_scope(ask: ClineMessage) -> str | None:
    """What an "allow always" answer to `ask` covers (None: it cannot be
    offered): `command:<the command line>`, `code:<the code>` (execute_code),
    `path:<tool>:<path>` (a tool that names a path) or `call:<the call, as
    canonical JSON>`."""
    if ask.is_protected or ask.ask == "auto_approval_max_req_reached":
        return None
    if ask.ask == "command":
        return f"command:{ask.text}" if ask.text else None
    if ask.ask != "tool" or not ask.text:
        return None
    try:
        data = json.loads(ask.text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
        return None
    tool = data["tool"]
    if tool in _RUNS_UNSHOWN:
        return None
    if tool == "execute_code":
        code = data.get("code")
        return f"code:{code}" if isinstance(code, str) else None
    path = data.get("path")
    if isinstance(path, str) and path:
        return f"path:{tool}:{path}"
    return "call:" + json.dumps(data, sort_keys=True, ensure_ascii=False)


def _covers(scope: str) -> str:
    """What an "allow always" of `scope` covers, for its label."""
    kind, _, rest = scope.partition(":")
    if kind == "command":
        return "this very command"
    if kind == "code":
        return "this very code"
    if kind == "path":
        tool, _, path = rest.partition(":")
        shown = path if len(path) <= _LABEL_PATH else path[: _LABEL_PATH - 1] + "…"
        return f"{tool} on {inline_code(shown)}"
    tool = json.loads(rest).get("tool", "this tool")
    return f"this very {tool} call"


def permission_options(ask: ClineMessage) -> list[PermissionOption]:
    """The choices a host shows for `ask`."""
    options = [PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once")]
    scope = always_scope(ask)
    if scope is not None:
        options.append(
            PermissionOption(
                option_id=ALLOW_ALWAYS,
                name=f"Allow always ({_covers(scope)}, this session)",
                kind="allow_always",
            )
        )
    options.append(PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"))
    return options


def answer_of_option(option_id: str) -> AskResponse | None:
    """hdsp's answer for a chosen option; None for an option never offered."""
    if option_id in (ALLOW_ONCE, ALLOW_ALWAYS):
        return AskResponse.YES
    if option_id == REJECT_ONCE:
        return AskResponse.NO
    return None
