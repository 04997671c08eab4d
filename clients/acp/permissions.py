"""hdsp's asks as ACP permission requests, and the host's choice as hdsp's answer.

A host offers its user the options the adapter lists: allow once (approve this
call), allow always (approve this call, and later calls of the same scope in
this session without asking), reject (deny it). What "the same scope" is stays
narrow: the same tool for file and notebook tools, the very same command line
for shell commands. A protected path and the cap on automatic approvals never
offer "always", and hdsp's cap on automatic approvals in a row
(`max_auto_approved_requests`) counts the calls an "always" approves: at the
cap the host is asked again. Nothing a host sends widens hdsp's own approval
settings: an "always" lives in this session's record only, and each call it
approves is answered as an ordinary approval, which every hdsp client sees.
"""

from __future__ import annotations

import json

from acp.schema import PermissionOption

from hdsp.protocol import AskResponse, ClineMessage

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


def always_scope(ask: ClineMessage) -> str | None:
    """What an "allow always" answer to `ask` covers (None: it cannot be
    offered): `command:<the command line>` or `tool:<tool name>`."""
    if ask.is_protected or ask.ask == "auto_approval_max_req_reached":
        return None
    if ask.ask == "command":
        return f"command:{ask.text}" if ask.text else None
    if ask.ask == "tool" and ask.text:
        try:
            data = json.loads(ask.text)
        except ValueError:
            return None
        if isinstance(data, dict) and isinstance(data.get("tool"), str):
            # A kernel replay runs the code shown in this ask, and another replay
            # other code: each is approved on its own.
            if data["tool"] == "replay_kernel":
                return None
            return f"tool:{data['tool']}"
    return None


def permission_options(ask: ClineMessage) -> list[PermissionOption]:
    """The choices a host shows for `ask`."""
    options = [PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once")]
    scope = always_scope(ask)
    if scope is not None:
        what = "this command" if scope.startswith("command:") else scope.removeprefix("tool:")
        options.append(
            PermissionOption(
                option_id=ALLOW_ALWAYS,
                name=f"Allow always ({what}, this session)",
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
