"""What an ACP host is shown of a task: hdsp's UI messages and events turned
into `session/update`s.

A message that streams (text, reasoning, a command's output) arrives as the
whole text so far, many times; the host is sent only what it has not seen yet
(agent message and thought chunks), or, for a tool call, its whole content
again (a `tool_call_update` replaces the content it names).

Everything here came from a model, a tool, a kernel or a file: it goes to the
host as data (text blocks, diffs), never as markup that could escape its frame.
Code and output are put in a fence longer than any run of backticks inside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import msgspec
from acp import (
    plan_entry,
    start_tool_call,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    CurrentModeUpdate,
    FileEditToolCallContent,
    ImageContentBlock,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    ToolKind,
    UserMessageChunk,
)
from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from hdsp.protocol import CellOutput, ClineMessage, TodoItem, ToolResultText

from ..history_view import json_object, kernel_output_text, replay_lines

__all__ = [
    "PERMISSION_ASKS",
    "SessionUpdate",
    "UpdateTranslator",
    "fenced",
    "inline_code",
    "plan_update",
    "tool_call_of_ask",
]

SessionUpdate = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | CurrentModeUpdate
)

ToolContent = ContentToolCallContent | FileEditToolCallContent

#: Asks that approve a tool call: they become `session/request_permission`.
PERMISSION_ASKS = ("tool", "command", "use_mcp_server", "auto_approval_max_req_reached")

#: The most characters of a command's output shown in its tool call (its tail).
OUTPUT_SHOWN = 50_000

_KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "list_files": "read",
    "read_notebook": "read",
    "list_variables": "read",
    "describe_variable": "read",
    "search_files": "search",
    "write_to_file": "edit",
    "edit_file": "edit",
    "insert_cell": "edit",
    "edit_cell": "edit",
    "delete_cell": "delete",
    "move_cell": "move",
    "execute_command": "execute",
    "execute_code": "execute",
    "run_cell": "execute",
    "replay_kernel": "execute",
    "switch_mode": "switch_mode",
    "switchMode": "switch_mode",
    "update_todo_list": "think",
}

_VERBS = {
    "read_file": "Read",
    "list_files": "List",
    "read_notebook": "Read",
    "search_files": "Search in",
    "write_to_file": "Write",
    "edit_file": "Edit",
    "insert_cell": "Insert a cell in",
    "edit_cell": "Edit a cell of",
    "delete_cell": "Delete a cell of",
    "move_cell": "Move a cell of",
    "run_cell": "Run a cell of",
}

_cell_decoder = msgspec.json.Decoder(CellOutput)
_result_decoder = msgspec.json.Decoder(ToolResultText)
_BACKTICKS = re.compile("`+")
_SGR = re.compile("\x1b\\[[0-9;]*m")


def fenced(text: str, info: str = "") -> str:
    """`text` in a code fence no line of it can close (CommonMark: a fence ends
    only at a run of backticks at least as long as the one that opened it)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"


def inline_code(text: str) -> str:
    """`text` as a Markdown code span (a title's path or command): shown as it
    is, never read as links or emphasis, whatever backticks it holds."""
    text = " ".join(text.split())  # (a code span is one line)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _text(text: str) -> ContentToolCallContent:
    return ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=text))


def _diff_content(path: str, diff: str, new_file: bool) -> list[ToolContent]:
    """A write's unified diff as ACP diffs, one per hunk (its old and new
    lines); the diff as text when it does not parse (cut short, say)."""
    try:
        patch = PatchSet(diff)
    except UnidiffParseError:
        return [_text(fenced(diff, "diff"))]
    parts: list[ToolContent] = []
    for patched in patch:
        for hunk in patched:
            old = "".join(line.value for line in hunk.source_lines())
            new = "".join(line.value for line in hunk.target_lines())
            parts.append(
                FileEditToolCallContent(
                    type="diff", path=path, old_text=None if new_file else old, new_text=new
                )
            )
    return parts or [_text(fenced(diff, "diff"))]


@dataclass
class _Call:
    """A tool call as the host was last shown it."""

    title: str
    kind: ToolKind
    status: str
    content: list[ToolContent] = field(default_factory=list)
    #: Content from the ask or say that showed the call (kept when output comes).
    preview: list[ToolContent] = field(default_factory=list)
    locations: list[ToolCallLocation] = field(default_factory=list)
    #: The ts of the message that showed it first.
    start_ts: int | None = None


def tool_call_of_ask(
    m: ClineMessage, workspace: str
) -> tuple[str, str, ToolKind, list[ToolContent], list[ToolCallLocation], Any]:
    """The id, title, kind, content, locations and raw input of the tool call an
    ask or `tool` say message shows."""
    call_id = m.tool_use_id or f"ask-{m.ts}"
    text = m.text or ""
    if m.ask == "command":
        where = f" (in {m.cwd})" if m.cwd else ""
        first = text.strip().splitlines()[0] if text.strip() else "a command"
        return (
            call_id,
            f"Run {inline_code(first[:200])}",
            "execute",
            [_text(fenced(text, "sh") + where)],
            [],
            {"command": text, "cwd": m.cwd},
        )
    if m.ask == "auto_approval_max_req_reached":
        return (
            call_id,
            "Go on past the limit of automatic approvals",
            "other",
            [_text(text)],
            [],
            None,
        )
    data = json_object(text)
    if data is None or not isinstance(data.get("tool"), str):
        title = "Use an MCP server" if m.ask == "use_mcp_server" else "A tool call"
        return call_id, title, "other", [_text(fenced(text))] if text else [], [], None
    tool = str(data["tool"])
    path = data.get("path")
    kind = _KINDS.get(tool, "fetch" if m.ask == "use_mcp_server" else "other")
    absolute = str(PurePosixPath(workspace) / str(path)) if isinstance(path, str) and path else None
    if tool in _VERBS and isinstance(path, str):
        title = f"{_VERBS[tool]} {inline_code(path)}"
    elif tool == "search_files":
        title = f"Search for {inline_code(str(data.get('regex', '')))}"
    elif tool == "execute_code":
        title = "Run code in the kernel"
    elif tool in ("switch_mode", "switchMode"):
        title = f"Switch to {inline_code(str(data.get('mode') or data.get('mode_slug')))} mode"
    elif tool == "update_todo_list":
        title = "Update the todo list"
    elif tool == "replay_kernel":
        title = f"Restore checkpoint {data.get('checkpoint')} with the kernel (run its cells again)"
    else:
        title = inline_code(tool)
    content: list[ToolContent] = []
    if tool == "replay_kernel":
        content = [_text(fenced("\n".join(replay_lines(data)), "python"))]
    elif isinstance(data.get("diff"), str) and absolute is not None:
        content = _diff_content(absolute, str(data["diff"]), bool(data.get("isNewFile")))
    elif isinstance(data.get("code"), str):
        content = [_text(fenced(str(data["code"]), "python"))]
    elif isinstance(data.get("content"), str) and absolute is not None and kind == "edit":
        content = [
            FileEditToolCallContent(
                type="diff", path=absolute, old_text=None, new_text=str(data["content"])
            )
        ]
    locations = [ToolCallLocation(path=absolute)] if absolute is not None else []
    raw = {k: v for k, v in data.items() if k not in ("diff", "content")}
    return call_id, title, kind, content, locations, raw


def _cell_content(text: str) -> list[ToolContent]:
    """Code run in a kernel and its outputs: the code, the text outputs (as a
    terminal shows them), and images the kernel sent inline."""
    try:
        cell = _cell_decoder.decode(text)
    except msgspec.DecodeError:
        return [_text(fenced(text))]
    parts: list[ToolContent] = [_text(fenced(cell.code, "python"))]
    shown: list[str] = []
    for output in cell.outputs:
        data = output.data or {}
        image = next((k for k in ("image/png", "image/jpeg") if isinstance(data.get(k), str)), None)
        if image is not None:
            parts.append(
                ContentToolCallContent(
                    type="content",
                    content=ImageContentBlock(type="image", data=str(data[image]), mime_type=image),
                )
            )
            continue
        shown.append(_SGR.sub("", kernel_output_text(output)).rstrip("\n"))
    if cell.omitted:
        shown.append(f"[{cell.omitted:,} characters not kept]")
    if cell.status not in ("ok", "running", "error"):
        shown.append(f"[{cell.status}]")
    if shown:
        parts.insert(1, _text(fenced("\n".join(shown), "text")))
    return parts


def plan_update(todos: list[TodoItem]) -> AgentPlanUpdate:
    """A task's todo list as the agent's plan."""
    return update_plan(
        [plan_entry(item.content, priority="medium", status=item.status) for item in todos]
    )


class UpdateTranslator:
    """Turns one task's UI messages into session updates, remembering what the
    host has been shown: how much of each streamed text, and each tool call."""

    def __init__(self, workspace: str, *, first_text_is_prompt: bool = True) -> None:
        self.workspace = workspace
        #: Roo's first `text` message of a task is the user's prompt.
        self._seen_first_text = not first_text_is_prompt
        self._sent: dict[int, str] = {}
        self._calls: dict[str, _Call] = {}
        #: hdsp's tool call ids (or `ask-<ts>`) and the ACP ids they are shown under.
        self._ids: dict[str, str] = {}
        #: Messages shown once and done with (asks, results, user messages).
        self._done: set[int] = set()
        #: The agent said something since the user last spoke (a new message is
        #: set apart from what came before).
        self._agent_spoke = False
        #: Texts this adapter sent as prompts, not echoed back to the host live.
        self.own_prompts: list[str] = []

    def message(self, m: ClineMessage, *, replay: bool = False) -> list[SessionUpdate]:
        """The updates that show `m` (a new message or a new version of one)."""
        if m.type == "ask":
            return self._ask(m)
        say = m.say or ""
        text = m.text or ""
        if say == "text" and not self._seen_first_text:
            self._seen_first_text = True
            return self._user(m, replay)
        if say == "user_feedback":
            self._seen_first_text = True
            return self._user(m, replay)
        if say in ("text", "completion_result", "subtask_result"):
            return self._stream(m, text, thought=False)
        if say == "reasoning":
            return self._stream(m, text, thought=True)
        if say == "tool" and m.tool_use_id:
            return self._start_call(m, status="in_progress")
        if say == "command_output" and m.tool_use_id:
            tail = text[-OUTPUT_SHOWN:]
            if len(text) > OUTPUT_SHOWN:
                tail = f"[{len(text) - OUTPUT_SHOWN:,} characters before]\n" + tail
            return self._call_output(self._acp(m.tool_use_id), [_text(fenced(tail, "console"))])
        if say == "cell_output" and m.tool_use_id:
            return self._call_output(self._acp(m.tool_use_id), _cell_content(text))
        if say == "tool_result" and m.tool_use_id:
            return self._call_result(m)
        if say in ("checkpoint_saved", "checkpoint_restored"):
            # (A restore may come from another client: the host sees it here.)
            return self._once(m, text[0:1].upper() + text[1:] + ".")
        if say == "error":
            if m.tool_use_id:
                return self._call_failed(self._acp(m.tool_use_id), text)
            return self._once(m, f"Error: {text}")
        return []

    # ---- messages -------------------------------------------------------------

    def _user(self, m: ClineMessage, replay: bool) -> list[SessionUpdate]:
        if m.ts in self._done:
            return []
        self._done.add(m.ts)
        self._agent_spoke = False
        text = m.text or ""
        if not replay and text in self.own_prompts:
            self.own_prompts.remove(text)
            return []  # the host shows its own prompt
        return [update_user_message_text(text)] if text else []

    def _stream(self, m: ClineMessage, text: str, *, thought: bool) -> list[SessionUpdate]:
        sent = self._sent.get(m.ts)
        if sent is None:
            new = text
            if new and self._agent_spoke and not thought:
                new = "\n\n" + new
        elif text.startswith(sent):
            new = text[len(sent) :]
        else:
            # A retried reply replaced the text the host has: it cannot take
            # chunks back, so the new version follows, marked.
            new = "\n\n[the reply was retried]\n\n" + text
        self._sent[m.ts] = text
        if not new:
            return []
        if thought:
            return [update_agent_thought_text(new)]
        self._agent_spoke = True
        return [update_agent_message_text(new)]

    def _once(self, m: ClineMessage, text: str) -> list[SessionUpdate]:
        if m.ts in self._done or m.partial:
            return []
        self._done.add(m.ts)
        prefix = "\n\n" if self._agent_spoke else ""
        self._agent_spoke = True
        return [update_agent_message_text(prefix + text)]

    def _ask(self, m: ClineMessage) -> list[SessionUpdate]:
        if m.partial:
            return []
        if m.ask in PERMISSION_ASKS:
            call_id = self._acp(m.tool_use_id or f"ask-{m.ts}")
            if not m.is_answered:
                return self._start_call(m, status="pending")
            approved = m.answer == "yesButtonClicked"
            if m.answer == "messageResponse" and m.ask == "auto_approval_max_req_reached":
                approved = True
            updates = self._start_call(m, status="pending") if call_id not in self._calls else []
            if approved:
                return updates + self._set_status(call_id, "in_progress")
            who = f" by {m.answered_by}" if m.answered_by else ""
            return updates + self._call_failed(call_id, f"Denied{who}.")
        if m.ask == "followup":
            data = json_object(m.text) or {}
            question = str(data.get("question", m.text or ""))
            suggestions = [
                str(s.get("answer", "")) for s in data.get("suggest", []) if isinstance(s, dict)
            ]
            text = question + "".join(f"\n- {s}" for s in suggestions if s)
            return self._once(m, text)
        if m.ask == "api_req_failed":
            return self._once(
                m, f"The model request failed: {m.text or ''}\n\nSend any message to retry it."
            )
        if m.ask == "mistake_limit_reached":
            return self._once(m, m.text or "The agent is stuck; say how to go on.")
        return []

    # ---- tool calls -----------------------------------------------------------

    def _acp(self, key: str) -> str:
        """The ACP id of hdsp's tool call `key` (its latest, if the id came again)."""
        return self._ids.get(key, key)

    def _start_call(self, m: ClineMessage, *, status: str) -> list[SessionUpdate]:
        key, title, kind, content, locations, raw = tool_call_of_ask(m, self.workspace)
        call_id = self._acp(key)
        known = self._calls.get(call_id)
        if known is not None and known.start_ts != m.ts and known.status in ("completed", "failed"):
            # A model may reuse a call id in a later reply: a call of its own.
            known, call_id = None, f"{key}-{m.ts}"
        if known is not None:
            return self._set_status(call_id, status) if known.status != status else []
        self._ids[key] = call_id
        self._calls[call_id] = _Call(
            title, kind, status, list(content), list(content), locations, start_ts=m.ts
        )
        self._agent_spoke = True
        return [
            start_tool_call(
                call_id,
                title,
                kind=kind,
                status=status,  # type: ignore[arg-type]
                content=content or None,
                locations=locations or None,
                raw_input=raw,
            )
        ]

    def _known(self, call_id: str) -> tuple[_Call, list[SessionUpdate]]:
        """The call `call_id`, started now if the host has not seen it (a call
        whose output comes first: a replay from the middle)."""
        call = self._calls.get(call_id)
        if call is not None:
            return call, []
        call = self._calls[call_id] = _Call("A tool call", "other", "in_progress")
        return call, [start_tool_call(call_id, call.title, kind="other", status="in_progress")]

    def _set_status(self, call_id: str, status: str) -> list[SessionUpdate]:
        call, updates = self._known(call_id)
        call.status = status
        return [*updates, update_tool_call(call_id, status=status)]  # type: ignore[arg-type]

    def _call_output(self, call_id: str, output: list[ToolContent]) -> list[SessionUpdate]:
        call, updates = self._known(call_id)
        call.content = [*call.preview, *output]
        status = "in_progress" if call.status == "pending" else call.status
        call.status = status
        return [*updates, update_tool_call(call_id, status=status, content=call.content)]  # type: ignore[arg-type]

    def _call_result(self, m: ClineMessage) -> list[SessionUpdate]:
        assert m.tool_use_id is not None
        if m.ts in self._done:
            return []
        self._done.add(m.ts)
        try:
            result = _result_decoder.decode(m.text or "")
        except msgspec.DecodeError:
            result = ToolResultText(tool="", text=m.text or "")
        call_id = self._acp(m.tool_use_id)
        call, updates = self._known(call_id)
        shown = result.text
        if result.omitted:
            shown += f"\n[{result.omitted:,} characters not shown]"
        if shown.strip():
            call.content = [*call.content, _text(fenced(shown))]
        call.status = "failed" if result.is_error else "completed"
        return [
            *updates,
            update_tool_call(
                call_id,
                status=call.status,  # type: ignore[arg-type]
                content=call.content or None,
                raw_output={"isError": result.is_error},
            ),
        ]

    def _call_failed(self, call_id: str, why: str) -> list[SessionUpdate]:
        call, updates = self._known(call_id)
        if call.status == "failed":
            return updates
        call.status = "failed"
        call.content = [*call.content, _text(why)]
        return [*updates, update_tool_call(call_id, status="failed", content=call.content)]

    def permission_call(self, m: ClineMessage) -> ToolCallUpdate:
        """The tool call a permission request for the ask `m` names."""
        key, title, kind, content, locations, raw = tool_call_of_ask(m, self.workspace)
        return ToolCallUpdate(
            tool_call_id=self._acp(key),
            title=title,
            kind=kind,
            status="pending",
            content=content or None,  # type: ignore[arg-type]
            locations=locations or None,
            raw_input=raw,
        )
