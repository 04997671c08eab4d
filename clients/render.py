"""Rendering task events for a person at a terminal: assistant text streams as it
arrives, reasoning dimmed, errors red, a usage line at the end."""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from hdsp.protocol import (
    ClineMessage,
    HistoryItem,
    MessageEvent,
    TaskCompleted,
    TaskEvent,
    TokenUsage,
)

__all__ = ["Renderer", "format_usage"]


def _use_color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def format_usage(usage: TokenUsage) -> str:
    parts = [f"{usage.total_tokens_in:,} in", f"{usage.total_tokens_out:,} out"]
    if usage.total_cache_reads:
        parts.append(f"{usage.total_cache_reads:,} cache reads")
    return f"tokens: {', '.join(parts)}; cost ${usage.total_cost:.4f}"


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
        self._color = _use_color(self.out)
        self._printed: dict[int, int] = {}  # ts -> characters printed
        self._open_ts: int | None = None  # message whose line is not finished yet
        # Roo's first text message of a task is the user's prompt; a renderer that
        # starts mid-conversation must not take the agent's text for it.
        self._seen_first_text = not first_text_is_prompt

    def _style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self._color else text

    def _finish_line(self) -> None:
        if self._open_ts is not None:
            self.out.write("\n")
            self._open_ts = None

    def note(self, text: str) -> None:
        """A status line on stderr (not part of the conversation)."""
        self._finish_line()
        self.out.flush()
        self.err.write(self._style(text, "2") + "\n")
        self.err.flush()

    def event(self, event: TaskEvent) -> None:
        data = event.data
        if isinstance(data, MessageEvent):
            self.message(data.payload[0].message)
        elif isinstance(data, TaskCompleted):
            self.note(format_usage(data.payload[1]))

    def snapshot(self, item: HistoryItem, messages: list[ClineMessage]) -> None:
        for message in messages:
            self.message(message)
        self._finish_line()

    def message(self, m: ClineMessage) -> None:
        if m.type == "say" and m.say in ("text", "reasoning", "user_feedback"):
            text = m.text or ""
            if m.say == "user_feedback" or (m.say == "text" and not self._seen_first_text):
                # Roo's first text message is the user's task; user_feedback is a
                # later message from the user.
                self._seen_first_text = True
                if m.ts not in self._printed:
                    self._finish_line()
                    self.out.write(self._style("> " + text, "1;36") + "\n\n")
                    self._printed[m.ts] = len(text)
                return
            done = self._printed.get(m.ts, 0)
            if done == 0 and self._open_ts != m.ts:
                self._finish_line()
                if m.say == "reasoning":
                    self.out.write(self._style("thinking: ", "2;3"))
            new = text[done:]
            if new:
                self.out.write(self._style(new, "2;3") if m.say == "reasoning" else new)
                self._printed[m.ts] = len(text)
            self._open_ts = m.ts
            if not m.partial:
                self._finish_line()
                if m.say == "text":
                    self.out.write("\n")
            self.out.flush()
        elif m.type == "say" and m.say == "completion_result" and m.ts not in self._printed:
            self._finish_line()
            self.out.write(self._style("Result: ", "1;32") + (m.text or "") + "\n")
            self._printed[m.ts] = len(m.text or "")
            self.out.flush()
        elif m.type == "say" and m.say == "error":
            self._finish_line()
            self.err.write(self._style(f"error: {m.text}", "1;31") + "\n")
            self.err.flush()
        elif m.type == "say" and m.say in ("api_req_retry_delayed", "api_req_retried"):
            self.note(m.text or m.say)
        elif m.type == "say" and m.say == "api_req_waiting" and m.partial:
            # Every few seconds while the model is silent; its final text comes
            # as the reply begins, and would break the reply's line.
            self.note(m.text or m.say)
        elif m.type == "ask" and m.ask == "api_req_failed":
            self.note("The model request failed; answering the ask retries it.")

    def ask(self, m: ClineMessage) -> None:
        """Show what an ask wants: the command, the file change (its diff), the
        question with its suggestions."""
        self._finish_line()
        text = m.text or ""
        try:
            data = json.loads(text) if text.startswith("{") else None
        except ValueError:
            data = None
        if m.ask == "command":
            body = f"Run this command?\n  $ {text}"
        elif m.ask == "followup" and isinstance(data, dict):
            suggest = [s.get("answer", "") for s in data.get("suggest", []) if isinstance(s, dict)]
            body = str(data.get("question", text)) + "".join(f"\n  - {s}" for s in suggest)
        elif isinstance(data, dict) and "tool" in data:
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

    def ask_prompt(self, m: ClineMessage) -> str:
        if m.ask == "followup":
            return "answer> "
        return "[Y]es / [n]o (or `no <why>`), or type a message> "
