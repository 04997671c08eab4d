"""`hdsp show`: a task's whole history as a person reads it.

Everything the history holds is shown, in order: the user's messages, the
agent's text and reasoning, every ask with how it was answered and by whom (the
one the task waits on says so), tool calls with their arguments (a write's diff
coloured on a terminal), calls approved without asking marked `auto-approved`,
command and kernel output (long output folded unless `full`), retries, context
truncations, errors and the result. Every string from the history is untrusted
(a model, a tool, a kernel or a file wrote it) and goes through
:func:`~.escape.escape_controls` before the view adds its own colours.

It is also the one renderer of a settled message: `hdsp run`, `send` and
`attach` print each message for good through :meth:`HistoryView.message`, so
that what they print is `hdsp show`'s body (everything between its header and
its footer), line for line.
"""

from __future__ import annotations

import json
import re
from typing import Any, TextIO

import msgspec

from hdsp.protocol import CellOutput, ClineMessage, KernelOutput, TaskSnapshot, ToolResultText

from .context_line import context_line
from .escape import escape_controls
from .todo_view import todo_markdown

__all__ = [
    "FOLDED_NOTE",
    "FOLD_LINES",
    "HistoryView",
    "json_object",
    "replay_lines",
    "usage_line",
]

#: Output longer than this many lines is folded to its head and tail.
FOLD_LINES = 20
_HEAD, _TAIL = 12, 6
#: A message of the user's longer than this many characters (a prompt read
#: from a file, say) is folded to its first and last characters too.
FOLD_CHARS = 4000
_HEAD_CHARS, _TAIL_CHARS = 2000, 500

_cell_decoder = msgspec.json.Decoder(CellOutput)
_result_decoder = msgspec.json.Decoder(ToolResultText)

#: Colour codes of IPython's tracebacks: dropped, not shown as escapes.
_SGR = re.compile("\x1b\\[[0-9;]*m")

_DIM, _BOLD, _RED, _GREEN, _YELLOW, _CYAN = "2", "1", "31", "32", "33", "36"

#: How an answer reads, by Roo's askResponse.
_VERDICTS = {
    "yesButtonClicked": ("approved", _GREEN),
    "noButtonClicked": ("denied", _RED),
    "messageResponse": ("answered", _CYAN),
    "objectResponse": ("answered", _CYAN),
}

#: Messages that are bookkeeping, not history a person reads.
_QUIET_SAYS = frozenset(
    {
        "api_req_started",
        "api_req_finished",
        "api_req_deleted",
        "api_req_waiting",
    }
)


def _token_change(info: dict[str, Any]) -> str:
    """The change of tokens (", 41,200 -> 9,800 tokens") a condense or truncation records."""
    before, after = info.get("prevContextTokens"), info.get("newContextTokens")
    if isinstance(before, int) and isinstance(after, int):
        return f", {before:,} -> {after:,} tokens"
    return ""


def json_object(text: str | None) -> dict[str, Any] | None:
    """`text` read as a JSON object (what a message's text holds for a tool call,
    an ask or a record); None when it is not one."""
    if not text or not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def replay_lines(data: dict[str, Any]) -> list[str]:
    """What a kernel replay's ask (a restore with the kernel) will run: its note,
    then each cell's code under `--- execution N` (and why it is skipped)."""
    lines = [str(data.get("note", "Replay these cells in a restarted kernel:"))]
    cells = data.get("cells")
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict):
            continue
        skip = f"  [{cell['skip']}]" if cell.get("skip") else ""
        lines.append(f"--- execution {cell.get('seq')}{skip}")
        lines += ["    " + line for line in str(cell.get("code", "")).split("\n")]
    return lines


def usage_line(tokens_in: int, tokens_out: int, cost: float, cache_reads: int | None) -> str:
    """What a task's model requests used (the last line of `hdsp show` and `hdsp run`)."""
    parts = [f"{tokens_in:,} in", f"{tokens_out:,} out"]
    if cache_reads:
        parts.append(f"{cache_reads:,} cache reads")
    return f"tokens: {', '.join(parts)}; cost ${cost:.4f}"


#: The footer's line after the usage when something was folded.
FOLDED_NOTE = "Long outputs were folded; `hdsp show --full` shows them whole."


def kernel_output_text(output: KernelOutput) -> str:
    """What a terminal can show of one kernel output (escaped later)."""
    if output.output_type == "stream":
        return output.text or ""
    if output.output_type == "error":
        lines = [_SGR.sub("", line) for line in output.traceback or []]
        return "\n".join(lines) or f"{output.ename}: {output.evalue}"
    data = output.data or {}
    plain = data.get("text/plain")
    if isinstance(plain, list):
        plain = "".join(str(p) for p in plain)
    if isinstance(plain, str):
        return plain
    kinds = ", ".join(sorted(data)) or output.output_type
    return f"[{kinds}]"


class HistoryView:
    """Writes a task's history to `out`: a whole snapshot (:meth:`render`), or one
    settled message at a time (:meth:`message`). `color` adds ANSI colours (for
    a terminal), `full` shows long outputs whole instead of folded; with
    `first_text_is_prompt` the first text message is the user's prompt (a view
    that starts mid-conversation says False); `task_id` is what the line under
    an ask that waits tells to answer."""

    def __init__(
        self,
        out: TextIO,
        *,
        color: bool,
        full: bool = False,
        first_text_is_prompt: bool = True,
        task_id: str = "",
    ) -> None:
        self.out = out
        self.color = color
        self.full = full
        self.task_id = task_id
        self.folded = False  # whether anything was folded (the footer says how to see it)
        self._expect_prompt = first_text_is_prompt

    # ---- writing ------------------------------------------------------------

    def _style(self, text: str, code: str | None) -> str:
        """`text` escaped, then coloured."""
        safe = escape_controls(text)
        if code is None or not self.color:
            return safe
        return "\n".join(
            f"\x1b[{code}m{line}\x1b[0m" if line else line for line in safe.split("\n")
        )

    def _write(self, text: str, code: str | None = None, indent: str = "") -> None:
        styled = self._style(text, code)
        if indent:
            styled = "\n".join(indent + line for line in styled.split("\n"))
        self.out.write(styled + "\n")

    def _fold(self, text: str) -> str:
        lines = text.rstrip("\n").split("\n")
        if self.full or len(lines) <= FOLD_LINES:
            return "\n".join(lines)
        self.folded = True
        hidden = len(lines) - _HEAD - _TAIL
        return "\n".join(
            [*lines[:_HEAD], f"[... {hidden} more lines; --full shows them ...]", *lines[-_TAIL:]]
        )

    def _fold_message(self, text: str) -> str:
        """A message of the user's, folded if it is long (in characters: a prompt
        of many short lines is shown whole)."""
        if self.full or len(text) <= FOLD_CHARS:
            return text
        self.folded = True
        hidden = len(text) - _HEAD_CHARS - _TAIL_CHARS
        return (
            f"{text[:_HEAD_CHARS]}\n[... {hidden:,} more characters; --full shows them ...]\n"
            f"{text[-_TAIL_CHARS:]}"
        )

    def _diff(self, diff: str, indent: str) -> None:
        for line in self._fold(diff).split("\n"):
            code = None
            if line.startswith("+") and not line.startswith("+++"):
                code = _GREEN
            elif line.startswith("-") and not line.startswith("---"):
                code = _RED
            elif line.startswith("@@"):
                code = _CYAN
            self._write(line, code, indent)

    @property
    def expects_prompt(self) -> bool:
        """Whether the next text message is the user's prompt."""
        return self._expect_prompt

    # ---- the snapshot -------------------------------------------------------

    def render(self, snap: TaskSnapshot) -> None:
        """The whole snapshot: a header line, the body, the footer."""
        item = snap.item
        self.task_id = item.id
        self._write(
            f"task {item.id}  #{item.number}  {snap.state}  workspace {item.workspace}", _DIM
        )
        self.out.write("\n")
        self.body(snap)
        if item.todos:
            self._write(f"todo list ({item.mode or 'code'} mode):", _DIM)
            for line in todo_markdown(item.todos).splitlines():
                self._write(line, None)
        for line in self.footer(item.tokens_in, item.tokens_out, item.total_cost, item.cache_reads):
            self._write(line, _DIM)
        self.out.flush()

    def body(self, snap: TaskSnapshot) -> None:
        """The messages of `snap` and its queue: what a live view prints for good."""
        pending = snap.pending_ask.ts if snap.pending_ask is not None else None
        for m in snap.messages:
            self.message(m, waiting=m.ts == pending)
        for queued in snap.queue:
            self._write(f"(queued) > {queued.text}", _DIM)
        self.out.flush()

    def footer(
        self, tokens_in: int, tokens_out: int, cost: float, cache_reads: int | None
    ) -> list[str]:
        """The lines below the body (unstyled): the usage, and how to see what was
        folded."""
        return [usage_line(tokens_in, tokens_out, cost, cache_reads)] + (
            [FOLDED_NOTE] if self.folded else []
        )

    def message(self, m: ClineMessage, *, waiting: bool = False, asked: bool = False) -> None:
        """One settled message (`waiting`: the ask the task waits on; `asked`: an
        ask whose head :meth:`ask_head` printed already, at a prompt)."""
        if m.type == "say" and m.say == "text" and self._expect_prompt:
            self._expect_prompt = False  # Roo's first text message is the user's task
            self._about(m)
            self._write("> " + self._fold_message(m.text or ""), _BOLD + ";" + _CYAN)
            self.out.write("\n")
        elif m.type == "ask":
            if not asked:
                self.ask_head(m)
            self._verdict(m, self.task_id, waiting=waiting)
        else:
            self._say(m)

    def _about(self, m: ClineMessage) -> None:
        """Who sent a user's message over TCP (a team daemon), and what context
        it carried, if any (its notebook, cell, ...)."""
        if m.sent_by:
            self._write(f"from {m.sent_by}", _DIM)
        about = context_line(m.context)
        if about is not None:
            self._write(about, _DIM)

    def _say(self, m: ClineMessage) -> None:
        text = m.text or ""
        say = m.say or ""
        unfinished = " [unfinished]" if m.partial else ""
        if say in _QUIET_SAYS:
            return
        if say == "text":
            self._write(text + unfinished)
            self.out.write("\n")
        elif say == "user_feedback":
            self._about(m)
            self._write("> " + self._fold_message(text), _BOLD + ";" + _CYAN)
            self.out.write("\n")
        elif say == "reasoning":
            self._write("thinking: " + self._fold(text) + unfinished, _DIM)
        elif say == "tool":
            self._tool(text, "auto-approved")
        elif say == "tool_result":
            self._result(text)
        elif say == "command_output":
            self._write(self._fold(text) + unfinished, None, "  | ")
        elif say == "cell_output":
            self._cell(text)
        elif say == "completion_result":
            self._write("Result: " + text, _BOLD + ";" + _GREEN)
        elif say == "error":
            self._write("error: " + text, _RED)
        elif say == "api_req_retry_delayed":
            problem, _, status = text.rpartition("\n")
            self._write(f"request failed: {problem or status}", _YELLOW)
            if problem:
                self._write(f"  {status}", _DIM)
        elif say == "api_req_retried":
            info = json_object(text) or {}
            attempt, delay = info.get("attempt"), info.get("delay")
            after = f" after {delay:.1f} s" if isinstance(delay, int | float) else ""
            self._write(f"retried the request (attempt {attempt}{after})", _YELLOW)
        elif say == "sliding_window_truncation":
            info = m.context_truncation or json_object(text) or {}
            removed = info.get("messagesRemoved", "some")
            self._write(
                f"context truncated: the {removed} oldest messages were left out of the "
                f"request (the history keeps them){_token_change(info)}",
                _YELLOW,
            )
        elif say == "condense_context":
            info = m.context_condense or json_object(text) or {}
            if m.partial:
                self._write("condensing the context...", _DIM)
            else:
                condensed = info.get("messagesCondensed", "older")
                self._write(
                    f"context condensed: a summary replaces the {condensed} older messages "
                    f"in requests (the history keeps them){_token_change(info)}",
                    _YELLOW,
                )
                summary = info.get("summary")
                if isinstance(summary, str) and summary:
                    self._write(self._fold(summary), _DIM, indent="  ")
        elif say == "condense_context_error":
            self._write(f"context not condensed: {text}", _YELLOW)
        elif say in ("checkpoint_saved", "checkpoint_restored"):
            self._write(text, _DIM if say == "checkpoint_saved" else _YELLOW)
        elif say == "kernel_culled":
            self._write(text or "the kernel was shut down after being idle", _DIM)
        elif say == "image":
            self._write(f"[{len(m.images or [])} image(s)]", _DIM)
        elif say == "mcp_server_request_started":
            # An MCP call's last progress notification (the server's words).
            self._write(f"MCP {text}", _DIM)
        else:
            self._write(f"[{say}] {text}".rstrip(), _DIM)

    def _tool(self, text: str, how: str | None) -> None:
        data = json_object(text)
        if data is None or "tool" not in data:
            self._write(f"tool: {text}" + (f"  ({how})" if how else ""), _DIM)
            return
        args = {k: v for k, v in data.items() if k not in ("tool", "diff", "content")}
        line = f"tool: {data['tool']} {json.dumps(args, ensure_ascii=False)}"
        self._write(line + (f"  ({how})" if how else ""), _DIM)
        if data.get("diff"):
            self._diff(str(data["diff"]), "    ")
        elif isinstance(data.get("content"), str):
            self._write(self._fold(data["content"]), None, "    ")

    def _result(self, text: str) -> None:
        """What a tool call gave back, under the call: `  → ` and its text, folded
        when long (red when it is an error)."""
        try:
            result = _result_decoder.decode(text)
        except msgspec.DecodeError:
            result = ToolResultText(tool="", text=text)
        body = self._fold(result.text) if result.text.strip() else "(nothing)"
        notes = []
        if result.images:
            notes.append(f"[{result.images} image(s)]")
        if result.omitted:
            notes.append(f"[{result.omitted:,} characters not kept]")
        body = "\n".join([body, *notes])
        first, _, rest = body.partition("\n")
        code = _RED if result.is_error else None
        self._write(first, code, "  → ")
        if rest:
            self._write(rest, code, "    ")

    def ask_head(self, m: ClineMessage) -> None:
        """What ask `m` wants (the lines above how it was answered): printed by a
        prompt before it asks, so that the screen holds the ask once."""
        text = m.text or ""
        data = json_object(text)
        kind = m.ask or ""
        if kind == "command":
            where = f" in {m.cwd}" if m.cwd else ""
            self._write(f"ask: run a command{where}", _YELLOW)
            self._write(text, None, "  $ ")
        elif kind == "followup" and data is not None:
            self._write("ask: " + str(data.get("question", text)), _YELLOW)
            for s in data.get("suggest", []):
                if isinstance(s, dict):
                    self._write(f"  - {s.get('answer', '')}", _DIM)
        elif kind == "use_mcp_server" and data is not None and "serverName" in data:
            # What an MCP server is asked: server, tool (or resource) and arguments,
            # all of them written by the model or the server: shown escaped.
            server = str(data.get("serverName"))
            if data.get("type") == "access_mcp_resource":
                self._write(f"ask: read {data.get('uri')} from the MCP server {server}?", _YELLOW)
            else:
                self._write(
                    f"ask: call {data.get('toolName')} on the MCP server {server}?", _YELLOW
                )
                self._write(str(data.get("arguments", "")), None, "    ")
        elif data is not None and data.get("tool") == "replay_kernel":
            # The code a person approves here runs again: every line of it, shown.
            self._write(
                f"ask: restore checkpoint {data.get('checkpoint')} with the kernel?", _YELLOW
            )
            for line in replay_lines(data):
                self._write(line, None, "  ")
        elif data is not None and "tool" in data:
            self._write(
                "ask: allow this?" + (" (protected path)" if m.is_protected else ""), _YELLOW
            )
            self._tool(text, None)
        elif kind == "api_req_failed":
            self._write(f"ask: the model request failed; retry? {text}".rstrip(), _YELLOW)
        elif kind in ("resume_task", "resume_completed_task"):
            self._write("ask: resume the task?", _YELLOW)
        else:
            self._write(f"ask ({kind}): {text}".rstrip(), _YELLOW)

    def _verdict(self, m: ClineMessage, task_id: str, *, waiting: bool) -> None:
        """The line under an ask: how it was answered and by whom, or that it waits."""
        if waiting:
            short = task_id[:8]
            self._write(
                f"  waiting for an answer: `hdsp answer {short} --yes` or "
                f"`hdsp answer {short} --no WHY` (or `hdsp attach {short}`)",
                _BOLD + ";" + _YELLOW,
            )
        elif m.is_answered:
            verdict, code = _VERDICTS.get(m.answer or "", ("answered", _CYAN))
            by = f" by {m.answered_by}" if m.answered_by else ""
            if m.answered_by == "timeout":
                by = " (no answer in time)"
            self._write(f"  {verdict}{by}", code)
        elif not m.partial:
            self._write("  (never answered)", _DIM)

    def _cell(self, text: str) -> None:
        try:
            cell = _cell_decoder.decode(text)
        except msgspec.DecodeError:
            self._write(self._fold(text))
            return
        count = cell.execution_count if cell.execution_count is not None else " "
        self._write(f"In [{count}]:", _DIM)
        self._write(cell.code, _DIM, "    ")
        for output in cell.outputs:
            shown = self._fold(kernel_output_text(output))
            bad = output.output_type == "error" or output.name == "stderr"
            self._write(shown, _RED if bad else None)
        if cell.omitted:
            self._write(f"[{cell.omitted:,} characters not kept]", _DIM)
        if cell.status not in ("ok", "running", "error"):
            self._write(f"[{cell.status}]", _DIM)
