"""Rendering task events for a person at a terminal as they stream: assistant
text as it arrives, reasoning dimmed, errors red, a usage line at the end. The
live view of `hdsp run` draws its changing tail with it (and asks its prompts);
what is printed there for good is rendered by :mod:`hdsp.client.history_view`, as
`hdsp show` renders it.

Every string that came from a model, a tool, a kernel or a file goes through
:func:`~.escape.escape_controls` before it is written, so escape sequences in it
show as text (`\\x1b[2K`) instead of acting on the terminal; the renderer's own
colour codes are added afterwards.
"""

from __future__ import annotations

import json
import re
import sys
from typing import TextIO

import msgspec

from hdsp.protocol import (
    CellOutput,
    ClineMessage,
    MessageEvent,
    TaskCompleted,
    TaskEvent,
)

from ..context_line import context_line
from ..escape import escape_controls
from ..history_view import HistoryView, json_object, kernel_output_text, usage_line
from .console import use_color

__all__ = ["Renderer"]

_cell_decoder = msgspec.json.Decoder(CellOutput)

#: Colour codes of IPython's tracebacks: dropped, not shown as escapes.
_SGR = re.compile("\x1b\\[[0-9;]*m")

#: Asks that show what they ask for (the others are a note, or nothing).
_SHOWN_ASKS = ("command", "tool", "use_mcp_server", "followup", "auto_approval_max_req_reached")


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


class Renderer:
    """Turns a task's messages into terminal output, printing each streamed message
    incrementally (only what was not printed yet)."""

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        first_text_is_prompt: bool = True,
    ) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._color = use_color(self.out)
        self._printed: dict[int, str] = {}  # ts -> the raw text printed so far
        self._open_ts: int | None = None  # message whose line is not finished yet
        # Roo's first text message of a task is the user's prompt; a renderer that
        # starts mid-conversation must not take the agent's text for it.
        self._seen_first_text = not first_text_is_prompt

    def _style(self, text: str, code: str) -> str:
        """`text`, escaped, in colour `code` (on a terminal that wants colour)."""
        safe = escape_controls(text)
        return f"\x1b[{code}m{safe}\x1b[0m" if self._color else safe

    def _finish_line(self) -> None:
        if self._open_ts is not None:
            self.out.write("\n")
            self._open_ts = None

    def line_end(self) -> None:
        """End the line a streamed message left open, if any."""
        self._finish_line()
        self.out.flush()

    def note(self, text: str) -> None:
        """A status line on stderr (not part of the conversation)."""
        self._finish_line()
        self.out.flush()
        self.err.write(self._style(text, "2") + "\n")
        self.err.flush()

    def error(self, text: str) -> None:
        """An error line on stderr."""
        self._finish_line()
        self.out.flush()
        self.err.write(self._style(text, "1;31") + "\n")
        self.err.flush()

    def event(self, event: TaskEvent) -> None:
        data = event.data
        if isinstance(data, MessageEvent):
            self.message(data.payload[0].message)
        elif isinstance(data, TaskCompleted):
            usage = data.payload[1]
            self.note(
                usage_line(
                    usage.total_tokens_in,
                    usage.total_tokens_out,
                    usage.total_cost,
                    usage.total_cache_reads,
                )
            )

    def _stream(self, m: ClineMessage, text: str, code: str | None, label: str = "") -> None:
        """Print what `m` added to its text since last time; all of it again,
        under the label, if the text changed before that point (output cut)."""
        done = self._printed.get(m.ts)
        if done is not None and text.startswith(done):
            new = text[len(done) :]
        else:
            new = text
            if done is not None or self._open_ts != m.ts:
                self._finish_line()
                if label:
                    self.out.write(self._style(label, "2;3"))
        if new:
            self.out.write(self._style(new, code) if code else escape_controls(new))
        self._printed[m.ts] = text
        self._open_ts = m.ts

    def message(self, m: ClineMessage) -> None:
        if m.type == "ask":
            if m.ask == "api_req_failed":
                self.note("The model request failed; answering the ask retries it.")
            elif m.ask in _SHOWN_ASKS and not m.partial:
                self.ask(m)
            return
        text = m.text or ""
        if m.say in ("text", "reasoning", "user_feedback"):
            if m.say == "user_feedback" or (m.say == "text" and not self._seen_first_text):
                # Roo's first text message is the user's task; user_feedback is a
                # later message from the user.
                self._seen_first_text = True
                if m.ts not in self._printed:
                    self._finish_line()
                    about = context_line(m.context)
                    if about is not None:
                        self.out.write(self._style(about, "2") + "\n")
                    self.out.write(self._style("> " + text, "1;36") + "\n\n")
                    self._printed[m.ts] = text
                return
            if m.say == "reasoning":
                self._stream(m, text, "2;3", "thinking: ")
            else:
                self._stream(m, text, None)
            if not m.partial:
                self._finish_line()
                if m.say == "text":
                    self.out.write("\n")
            self.out.flush()
        elif m.say == "command_output":
            self._stream(m, text, None)
            if not m.partial:
                self._finish_line()
            self.out.flush()
        elif m.say == "cell_output" and not m.partial and m.ts not in self._printed:
            self._printed[m.ts] = text
            self.cell(text)
        elif m.say == "tool" and m.ts not in self._printed:
            self._printed[m.ts] = text
            self._finish_line()
            self.out.write(self._style(self._tool_line(text), "2") + "\n")
            self.out.flush()
        elif m.say == "tool_result" and m.ts not in self._printed:
            # What a tool call gave back, as `hdsp show` prints it.
            self._printed[m.ts] = text
            self._finish_line()
            HistoryView(self.out, color=self._color).message(m)
            self.out.flush()
        elif m.say == "completion_result" and m.ts not in self._printed:
            self._finish_line()
            self.out.write(self._style("Result: ", "1;32") + escape_controls(text) + "\n")
            self._printed[m.ts] = text
            self.out.flush()
        elif m.say == "error":
            self.error(f"error: {text}")
        elif m.say == "api_req_retry_delayed":
            # Its final text says the retry happened; api_req_retried (a JSON
            # record of the same) shows nothing more.
            self.note(m.text or m.say)
        elif m.say == "api_req_waiting" and m.partial:
            # Every few seconds while the model is silent; its final text comes
            # as the reply begins, and would break the reply's line.
            self.note(m.text or m.say)

    def cell(self, text: str) -> None:
        """Code a tool runs or ran in a kernel, and its outputs (so far)."""
        self._finish_line()
        try:
            cell = _cell_decoder.decode(text)
        except msgspec.DecodeError:
            self.out.write(escape_controls(text) + "\n")
            self.out.flush()
            return
        count = cell.execution_count if cell.execution_count is not None else " "
        self.out.write(self._style(f"In [{count}]: ", "2") + "\n")
        self.out.write(self._style(_indent(cell.code, "    "), "2") + "\n")
        for output in cell.outputs:
            shown = kernel_output_text(output).rstrip("\n")
            if output.output_type == "error" or output.name == "stderr":
                self.out.write(self._style(shown, "31") + "\n")
            else:
                self.out.write(escape_controls(shown) + "\n")
        if cell.omitted:
            self.out.write(self._style(f"[{cell.omitted:,} characters not shown]", "2") + "\n")
        if cell.status not in ("ok", "running", "error"):
            self.out.write(self._style(f"[{cell.status}]", "2") + "\n")
        self.out.flush()

    @staticmethod
    def _tool_line(text: str) -> str:
        data = json_object(text)
        if data is None or "tool" not in data:
            return f"tool: {text}"
        shown = {k: v for k, v in data.items() if k not in ("tool", "diff", "content")}
        line = f"tool: {data['tool']} {json.dumps(shown)}"
        if data.get("diff"):
            line += "\n" + str(data["diff"]).rstrip("\n")
        return line

    def ask(self, m: ClineMessage) -> None:
        """Show what an ask wants: the command and where it runs, the file change
        (its diff), the question with its suggestions. Once per ask."""
        if m.ts in self._printed:
            return
        self._printed[m.ts] = m.text or ""
        self._finish_line()
        text = m.text or ""
        data = json_object(text)
        if m.ask == "command":
            where = f" in {m.cwd}" if m.cwd else ""
            body = f"Run this command{where}?\n" + _indent(text, "  $ ").replace("\n  $ ", "\n    ")
        elif m.ask == "followup" and data is not None:
            suggest = [s.get("answer", "") for s in data.get("suggest", []) if isinstance(s, dict)]
            body = str(data.get("question", text)) + "".join(f"\n  - {s}" for s in suggest)
        elif data is not None and "tool" in data:
            shown = {k: v for k, v in data.items() if k not in ("tool", "diff", "content")}
            body = f"Allow {data['tool']} {json.dumps(shown)}?"
            if data.get("diff"):
                body += "\n" + str(data["diff"])
            if m.is_protected:
                body += "\n(this path is protected)"
        else:
            body = f"{m.ask}: {text}" if text else str(m.ask)
        self.out.write(self._style(body, "1;33") + "\n")
        self.out.flush()

    @staticmethod
    def needs_explicit_yes(m: ClineMessage) -> bool:
        """Whether a bare Enter must not answer `m`: every ask but a question."""
        return m.ask != "followup"

    def ask_prompt(self, m: ClineMessage) -> str:
        if m.ask == "followup":
            return "answer> "
        return "[y]es / [n]o (or `no <why>`), or type a message> "
