"""What a task is doing right now, in one line: waiting for the model (and for
how long), a retry's countdown, a cell or a command running (for how long, and
how many lines of output so far), an ask waiting for an answer; and the tokens
and cost of the task so far.

:class:`TaskActivity` follows a task's messages and events. A terminal that
can redraw shows :meth:`TaskActivity.line` in place, refreshed every second; a
pipe or a dumb terminal gets :meth:`TaskActivity.take_news`, a plain line only
when the task starts doing something new, never the same thing twice.

Texts that come from the daemon (a model server's error, a tool's name) are
untrusted: both methods return them escaped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import msgspec

from hdsp.protocol import CellOutput, ClineMessage, TokenUsage

from ..escape import escape_controls

__all__ = ["Activity", "TaskActivity"]

_cell_decoder = msgspec.json.Decoder(CellOutput)

Kind = Literal["idle", "model", "answering", "retry", "cell", "command", "ask"]


@dataclass(frozen=True)
class Activity:
    """One thing the task does: what, since when (monotonic seconds), and the
    message it is about (a new message is a new activity, even of the same kind)."""

    kind: Kind
    since: float
    ts: int = 0
    #: For a retry: the server's error (first line) and the countdown line.
    detail: str = ""
    #: Output lines of a running cell or command so far.
    lines: int = 0


def _first_line(text: str, width: int = 100) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def _last_line(text: str) -> str:
    return text.strip().rsplit("\n", 1)[-1]


def _cell_lines(text: str) -> int:
    try:
        cell = _cell_decoder.decode(text)
    except msgspec.DecodeError:
        return 0
    lines = 0
    for output in cell.outputs:
        if output.output_type == "stream":
            lines += (output.text or "").count("\n")
        else:
            lines += 1
    return lines


class TaskActivity:
    """The status of one task, from the messages and usage a client sees."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.current = Activity("idle", clock())
        self.usage: TokenUsage | None = None
        self._told: tuple[Kind, int, str] | None = None

    # ---- what happens -------------------------------------------------------

    def _set(self, kind: Kind, ts: int, *, detail: str = "", lines: int = 0) -> None:
        same = self.current.kind == kind and self.current.ts == ts
        since = self.current.since if same else self._clock()
        self.current = Activity(kind, since, ts, detail, lines)

    def message(self, m: ClineMessage) -> None:
        """A message was created or updated (its latest version)."""
        text = m.text or ""
        if m.type == "ask":
            if not m.partial and not m.is_answered:
                self._set("ask", m.ts, detail=str(m.ask or ""))
            elif m.is_answered and self.current.kind == "ask":
                self._set("idle", m.ts)
            return
        say = m.say
        if say == "api_req_started":
            try:
                info = json.loads(text) if text.startswith("{") else {}
            except ValueError:
                info = {}
            if not isinstance(info, dict) or not ({"error", "cost", "tokensIn"} & info.keys()):
                self._set("model", m.ts)
            elif self.current.kind in ("model", "answering") and "error" not in info:
                self._set("idle", m.ts)
        elif say == "api_req_waiting" and m.partial:
            # The daemon says so once the server has been silent for a while.
            ts = self.current.ts if self.current.kind == "model" else m.ts
            self._set("model", ts, detail="silent")
        elif say in ("text", "reasoning") and m.partial:
            if self.current.kind in ("model", "answering", "idle"):
                self._set("answering", self.current.ts if self.current.kind != "idle" else m.ts)
        elif say == "api_req_retry_delayed":
            if m.partial:
                # The daemon's countdown ("Retry 1 in 3 s."), then why.
                self._set("retry", m.ts, detail=f"{_last_line(text)} · {_first_line(text)}")
            elif self.current.kind == "retry":
                self._set("idle", m.ts)
        elif say == "cell_output":
            if m.partial:
                self._set("cell", m.ts, lines=_cell_lines(text))
            elif self.current.ts == m.ts:
                self._set("idle", m.ts)
        elif say == "command_output":
            if m.partial:
                self._set("command", m.ts, lines=text.count("\n"))
            elif self.current.ts == m.ts:
                self._set("idle", m.ts)

    def token_usage(self, usage: TokenUsage) -> None:
        self.usage = usage

    def ended(self) -> None:
        """The task's turn is over (or this client stops following it)."""
        self._set("idle", 0)

    # ---- what to show -------------------------------------------------------

    def _what(self, now: float) -> str:
        a = self.current
        seconds = f"{max(0.0, now - a.since):.0f}s"
        lines = f", {a.lines:,} output line{'s' if a.lines != 1 else ''}" if a.lines else ""
        if a.kind == "model":
            return f"waiting for the model ({seconds})"
        if a.kind == "answering":
            return f"the model is answering ({seconds})"
        if a.kind == "retry":
            return a.detail
        if a.kind == "cell":
            return f"running a cell ({seconds}{lines})"
        if a.kind == "command":
            return f"running a command ({seconds}{lines})"
        if a.kind == "ask":
            return "waiting for an answer" if a.detail == "followup" else "waiting for approval"
        return "working"

    def _usage(self) -> str:
        u = self.usage
        if u is None:
            return ""
        return f"{u.total_tokens_in:,} in · {u.total_tokens_out:,} out · ${u.total_cost:.4f}"

    def line(self) -> str:
        """The status line of a terminal that redraws it, escaped."""
        usage = self._usage()
        text = self._what(self._clock()) + (f" · {usage}" if usage else "")
        return escape_controls(text)

    def take_news(self) -> str | None:
        """For a terminal that cannot redraw (or a pipe): a line when the task began
        something worth saying since the last one (waiting for a silent model, a
        retry, a cell or command running), else None. Escaped."""
        a = self.current
        if a.kind not in ("model", "retry", "cell", "command"):
            return None
        key = (a.kind, a.ts, "")
        if key == self._told:
            return None
        if a.kind == "model" and a.detail != "silent":
            return None  # a model that answers at once is not news
        self._told = key
        if a.kind == "retry":
            # Once per retry: the error and the delay, not a line per second.
            return escape_controls(a.detail)
        return escape_controls(self._what(self._clock()))
