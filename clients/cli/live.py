"""The live view of a task in `hdsp run`, `send` and `attach`: drawn from the same
message versions the daemon stores, never from deltas, so that what it shows
in the end is what `hdsp show` shows.

A :class:`Transcript` keeps the latest version of every message, in order, and
knows which of them are *settled*: final, and (for the model's text and
reasoning, which a retried request replaces) followed by something that is not
bookkeeping of the request, so that no retry can change them any more. The
settled messages are printed for good, through the same
:class:`~.history_view.HistoryView` that `hdsp show` renders its body with, one
message at a time and in order: what a live command prints for good on stdout
is `hdsp show`'s body. (The header and the usage footer of `hdsp show` are
notes on stderr here: the task's line when it starts, its usage when it
completes.) An ask is settled once it is answered or the task moved past it;
when the view closes on an ask the task still waits on, it says how to answer
it, as `hdsp show` does. What is not settled yet is the *tail*:

- on a terminal that can redraw (a TTY whose TERM is not dumb), the tail and a
  status line (:mod:`.status_line`) are drawn below the printed messages and
  redrawn in place as they change (rich's live display; the tail is drawn by
  :class:`~.render.Renderer`, which shows text as it streams); a retry that replaces
  a partial answer redraws it, and the status line goes away when the view
  closes;
- elsewhere (a pipe, a file, a dumb terminal) the tail is not shown until it
  is settled, and the status comes as a plain line when the task begins
  something new (never the same line twice).

A message that was printed and then changes all the same (a retry after an ask
was answered, say) is printed again, after a line that says the text above it
was replaced; what is printed is always what the daemon holds.
"""

from __future__ import annotations

import bisect
import io
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO, cast

import anyio
from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.text import Text

from hdsp.protocol import (
    ClineMessage,
    ExecutionOutput,
    MessageEvent,
    TaskAborted,
    TaskClosed,
    TaskCompleted,
    TaskEvent,
    TaskModeSwitched,
    TaskResumable,
    TaskTodoListUpdated,
    TaskTokenUsageUpdated,
)

from ..history_view import FOLDED_NOTE, HistoryView
from ..todo_view import todo_markdown
from .console import use_color
from .render import Renderer
from .status_line import TaskActivity

__all__ = ["LiveView", "Transcript", "can_redraw"]

#: Messages about a model request, not part of what the model said: a text or
#: reasoning message followed only by these may still be replaced by a retry.
_REQUEST_BOOKKEEPING = frozenset(
    {
        "api_req_started",
        "api_req_finished",
        "api_req_retried",
        "api_req_retry_delayed",
        "api_req_rate_limit_wait",
        "api_req_deleted",
        "api_req_waiting",
        "error",
        "sliding_window_truncation",
        "condense_context",
        "condense_context_error",
        "text",
        "reasoning",
    }
)

#: Messages a retry may replace.
_REPLACEABLE = ("text", "reasoning")

#: Partial messages the status line shows instead of the tail.
_STATUS_ONLY = ("api_req_waiting", "api_req_retry_delayed")

#: Seconds between two frames of the live region, at least.
_FRAME = 0.1

REPLACED_NOTE = "(retrying: the partial answer above is replaced by the one below)"


def can_redraw(stream: TextIO) -> bool:
    """Whether `stream` is a terminal that takes cursor movements."""
    term = os.environ.get("TERM", "")
    return stream.isatty() and term not in ("", "dumb", "unknown")


def _moves_on(m: ClineMessage) -> bool:
    """Whether `m` shows that the request before it is over (it is neither the
    model's text nor bookkeeping of the request)."""
    if m.type == "ask":
        return m.ask != "api_req_failed"
    return m.say not in _REQUEST_BOOKKEEPING


class Transcript:
    """The latest version of each message of a task, in order, and how many of
    them are printed for good."""

    def __init__(self, *, first_text_is_prompt: bool = True) -> None:
        #: Roo's first text message of a task is the user's prompt, not the model's.
        self._expect_prompt = first_text_is_prompt
        self._prompt_ts: int | None = None
        self._order: list[int] = []
        self._messages: dict[int, ClineMessage] = {}
        self._printed = 0
        self._late: list[int] = []
        #: What each printed replaceable message said when it was printed.
        self._printed_text: dict[int, str] = {}

    def update(self, m: ClineMessage) -> None:
        if m.ts not in self._messages:
            if self._expect_prompt and m.type == "say" and m.say == "text":
                self._expect_prompt = False
                self._prompt_ts = m.ts
            index = bisect.bisect(self._order, m.ts)
            self._order.insert(index, m.ts)
            if index < self._printed:
                # Older than messages printed already (never seen: ts only grow
                # within a task): printed next, out of place rather than lost.
                self._printed += 1
                self._late.append(m.ts)
        self._messages[m.ts] = m

    def _settled(self, index: int) -> bool:
        m = self._messages[self._order[index]]
        if m.partial:
            return False
        if m.type == "ask":
            # Its answer is part of it: settled once answered, or passed by.
            return m.is_answered or index + 1 < len(self._order)
        if m.type == "say" and m.say in _REPLACEABLE and m.ts != self._prompt_ts:
            return any(_moves_on(self._messages[ts]) for ts in self._order[index + 1 :])
        return True

    def take_settled(
        self, *, everything: bool = False, before: int | None = None
    ) -> list[ClineMessage]:
        """Messages to print for good now, in order (with `everything`: all of
        them, as they stand: the view is closing, or a prompt needs the screen;
        `before`: none from message `before` on, the ask a prompt asks)."""
        taken = [self._messages[ts] for ts in self._late]
        self._late.clear()
        while self._printed < len(self._order) and (everything or self._settled(self._printed)):
            m = self._messages[self._order[self._printed]]
            if before is not None and m.ts >= before:
                break
            taken.append(m)
            if m.type == "say" and m.say in _REPLACEABLE:
                self._printed_text[m.ts] = m.text or ""
            self._printed += 1
        return taken

    def replaced(self, m: ClineMessage) -> bool:
        """Whether `m` (an update) changes a message printed already into other text
        than it had (not only a continuation of it)."""
        before = self._printed_text.get(m.ts)
        return before is not None and before != (m.text or "")

    def reopen(self, ts: int) -> None:
        """Print message `ts` again once it settles (it was replaced)."""
        index = self._order.index(ts)
        self._printed = min(self._printed, index)
        self._printed_text.pop(ts, None)

    def get(self, ts: int) -> ClineMessage | None:
        return self._messages.get(ts)

    def printed(self, ts: int) -> bool:
        """Whether message `ts` is printed for good."""
        index = bisect.bisect_left(self._order, ts)
        return index < self._printed and self._order[index] == ts

    def tail(self) -> list[ClineMessage]:
        """The messages not printed for good yet."""
        return [self._messages[ts] for ts in self._order[self._printed :]]


class _ConsoleWriter(io.TextIOBase):
    """A text stream whose whole lines are printed above rich's live display (the
    renderer's own colour codes become rich styles; everything else it writes is
    escaped already)."""

    def __init__(self, view: LiveView, color: bool) -> None:
        self._view = view
        self._color = color
        self._pending = ""

    def isatty(self) -> bool:
        return self._color  # what decides the renderer's colours

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            lines, self._pending = self._pending.rsplit("\n", 1)
            self._view.print_above(lines)
        return len(text)

    def flush(self) -> None:
        pass

    def finish(self) -> None:
        if self._pending:
            lines, self._pending = self._pending, ""
            self._view.print_above(lines)


class LiveView:
    """What a person sees of a task while a command follows it; see the module's
    docstring. Use as a context manager; feed it with :meth:`event` and
    :meth:`seed`."""

    def __init__(
        self,
        *,
        first_text_is_prompt: bool = True,
        redraw: bool | None = None,
        task_id: str = "",
    ) -> None:
        self.redraw = can_redraw(sys.stdout) if redraw is None else redraw
        self.transcript = Transcript(first_text_is_prompt=first_text_is_prompt)
        self.activity = TaskActivity()
        self._live: Live | None = None
        self._console: Console | None = None
        self._writers: list[_ConsoleWriter] = []
        self._paused = 0
        self._dirty = False
        self._drawn_at = 0.0
        #: Per message: the seq of the durable event its latest version came with.
        self._durable_seq: dict[int, int] = {}
        #: The ask the task waits on, as far as this view knows (its follower says).
        self.pending_ask: int | None = None
        self._footer_said = False
        #: Asks whose head a prompt printed (their answer is printed under it).
        self._asked: set[int] = set()
        self._prompt_rows = 0
        if self.redraw:
            self._console = Console(file=sys.stdout, highlight=False, emoji=False, markup=False)
            color = use_color(sys.stdout)
            out = _ConsoleWriter(self, color)
            err = _ConsoleWriter(self, color) if sys.stderr.isatty() else None
            self._writers = [out] + ([err] if err is not None else [])
            #: Notes, errors and the prompt's ask.
            self.renderer = Renderer(
                cast(TextIO, out), cast(TextIO, err) if err is not None else sys.stderr
            )
            printed: TextIO = cast(TextIO, out)
        else:
            self.renderer = Renderer()
            printed, color = sys.stdout, use_color(sys.stdout)
        #: What prints settled messages for good: `hdsp show`'s body.
        self.history = HistoryView(
            printed, color=color, first_text_is_prompt=first_text_is_prompt, task_id=task_id
        )

    # ---- lifetime -----------------------------------------------------------

    def __enter__(self) -> LiveView:
        self._start_live()
        return self

    def _start_live(self) -> None:
        if self._console is not None:
            # A new one each time: nothing of the region drawn before a pause
            # (and erased by it) may be taken for what is on the screen now.
            self._live = Live(
                console=self._console,
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
                vertical_overflow="visible",
            )
            self._live.start()
            self._draw(now=True)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Print what is left as it stands, and take the status line away."""
        self.activity.ended()
        self._print(self.transcript.take_settled(everything=True))
        if self.history.folded and not self._footer_said:
            self.renderer.note(FOLDED_NOTE)  # (the footer says it when the task completes)
        self._stop_live()

    def _stop_live(self) -> None:
        for writer in self._writers:
            writer.finish()
        if self._live is not None:
            live, self._live = self._live, None
            live.update(Text(""))
            live.stop()

    @contextmanager
    def asking(self, ask: ClineMessage) -> Iterator[None]:
        """The screen for a prompt of `ask`: everything before it printed, then
        the ask as `hdsp show` prints it (how it is answered comes under it once
        it is), and no live region below. What the prompt writes is counted
        (:meth:`prompt_wrote`) so that :meth:`erase_prompt` can take it away."""
        self._print(self.transcript.take_settled(everything=True, before=ask.ts))
        self._paused += 1
        was_live = self._live is not None
        self._stop_live()
        if ask.ts not in self._asked and not self.transcript.printed(ask.ts):
            self._asked.add(ask.ts)
            self.history.ask_head(ask)
            self.history.out.flush()
        self._prompt_rows = 0
        try:
            yield
        finally:
            self._paused -= 1
            if was_live and not self._paused:
                self._start_live()

    def _rows(self, text: str) -> int:
        """Screen rows that `text` takes, lines wrapped."""
        width = max(1, self._console.width if self._console is not None else 80)
        return sum(max(1, -(-cell_len(line) // width)) for line in text.split("\n"))

    def prompt_wrote(self, text: str, *, replacing: str = "") -> None:
        """A prompt's line is `text` now (its question and what was typed), where
        it was `replacing`."""
        self._prompt_rows += self._rows(text) - (self._rows(replacing) if replacing else 0)

    def prompt_note(self, text: str) -> None:
        """A note under a prompt (taken away with it, where it is on the screen)."""
        self.renderer.note(text)
        if len(self._writers) > 1:  # (notes go to the screen: stderr is the terminal)
            self._prompt_rows += self._rows(text)

    def erase_prompt(self) -> None:
        """Take away the prompt's lines (on a terminal that redraws): what stays
        is the ask, and how it was answered once the daemon says so."""
        rows, self._prompt_rows = self._prompt_rows, 0
        if self._console is None or not 0 < rows < self._console.height:
            return
        sys.stdout.write(f"\x1b[{rows}A\r\x1b[J")
        sys.stdout.flush()

    async def tick(self) -> None:
        """Redraw what changed since the last frame, and the status line every
        second (its clocks move), for ever."""
        while True:
            await anyio.sleep(_FRAME)
            if self._dirty or time.monotonic() - self._drawn_at >= 1:
                self._draw(now=True)

    # ---- input --------------------------------------------------------------

    def seed(self, messages: list[ClineMessage], head_seq: int) -> None:
        """Messages the task had at `head_seq`, before this view follows it (a
        snapshot)."""
        for m in messages:
            self._durable_seq[m.ts] = head_seq
            self.transcript.update(m)
            self.activity.message(m)
        self._refresh()

    def event(self, event: TaskEvent) -> None:
        data = event.data
        if isinstance(data, MessageEvent):
            m = data.payload[0].message
            if event.seq is not None:
                self._durable_seq[m.ts] = event.seq
            elif self._stale(event, m):
                return
            self.message(m)
        elif isinstance(data, TaskTokenUsageUpdated):
            self.activity.token_usage(data.payload[1])
            self._draw()
        elif isinstance(data, TaskCompleted):
            usage = data.payload[1]
            self.activity.token_usage(usage)
            self.pending_ask = None
            self.close_tail()
            # `hdsp show`'s footer.
            self._footer_said = True
            for line in self.history.footer(
                usage.total_tokens_in,
                usage.total_tokens_out,
                usage.total_cost,
                usage.total_cache_reads,
            ):
                self.renderer.note(line)
        elif isinstance(data, (TaskAborted, TaskClosed, TaskResumable)):
            self.pending_ask = None  # (no ask waits once the task stopped)
        elif isinstance(data, ExecutionOutput):
            self._draw()
        elif isinstance(data, TaskTodoListUpdated):
            who = "you" if data.payload[2] == "user" else "the agent"
            self.renderer.note(f"todo list (updated by {who}):")
            for line in todo_markdown(data.payload[1]).splitlines():
                self.renderer.note(line)
        elif isinstance(data, TaskModeSwitched):
            self.renderer.note(f"mode: {data.payload[1]}")

    def _stale(self, event: TaskEvent, m: ClineMessage) -> bool:
        """Whether a live-only update is older than the version of its message
        this view has (from the log, which a replay delivers first)."""
        known = self._durable_seq.get(m.ts)
        if known is None:
            return False
        if event.prev_seq is not None:
            return event.prev_seq < known
        # A daemon that does not say: no partial version takes back a final one,
        # but a retry's (which says something else) reopens the model's text.
        current = self.transcript.get(m.ts)
        if current is None or current.partial:
            return False
        return current.say not in _REPLACEABLE or (current.text or "").startswith(m.text or "")

    def message(self, m: ClineMessage) -> None:
        if self.transcript.replaced(m):
            self.transcript.reopen(m.ts)
            self.renderer.note(REPLACED_NOTE)
        self.transcript.update(m)
        self.activity.message(m)
        self._refresh()

    def close_tail(self) -> None:
        """The turn is over: print the tail as it stands."""
        self._print(self.transcript.take_settled(everything=True))
        self._draw(now=True)

    def note(self, text: str) -> None:
        self.renderer.note(text)

    # ---- output -------------------------------------------------------------

    def _refresh(self) -> None:
        printed = self._print(self.transcript.take_settled())
        if self.redraw:
            # What was printed leaves the region at once, not a frame later.
            self._draw(now=printed)
        else:
            news = self.activity.take_news()
            if news is not None:
                self.renderer.note(news)

    def _print(self, messages: list[ClineMessage]) -> bool:
        """Print `messages` for good; whether there were any."""
        if messages and self._live is not None:
            self._live.update(Text(""))  # (the region is drawn again below them)
        for m in messages:
            self.history.message(
                m,
                waiting=m.ts == self.pending_ask and not m.is_answered,
                asked=m.ts in self._asked,
            )
        if messages:
            self.history.out.flush()
        return bool(messages)

    def print_above(self, text: str) -> None:
        """Lines printed for good (by the renderer, through a writer)."""
        assert self._console is not None
        self._console.print(Text.from_ansi(text), soft_wrap=True)

    def _draw(self, *, now: bool = False) -> None:
        """Redraw the live region; at most one frame per _FRAME seconds (a
        streaming reply updates many times a second), the rest by :meth:`tick`."""
        if self._live is None or self._paused or self._console is None:
            return
        if not now and time.monotonic() - self._drawn_at < _FRAME:
            self._dirty = True
            return
        self._dirty = False
        self._drawn_at = time.monotonic()
        buffer = io.StringIO()
        # The tail as it streams, from where the printed messages end.
        preview = Renderer(buffer, buffer, first_text_is_prompt=self.history.expects_prompt)
        for m in self.transcript.tail():
            if (m.partial and m.say in _STATUS_ONLY) or m.ts in self._asked:
                continue  # (the status line says it; a prompt printed the ask)
            if m.partial and m.say == "cell_output":
                preview.cell(m.text or "")  # its code and its outputs so far
                continue
            preview.message(m)
        preview.line_end()
        shown = Text(buffer.getvalue().rstrip("\n"))
        # Keep the region within the screen: rich cannot redraw lines that have
        # scrolled away. The whole of it is printed once it settles.
        room = max(3, self._console.height - 3)
        lines = shown.wrap(self._console, self._console.width, overflow="fold")
        if len(lines) > room:
            cut = len(lines) - room + 1
            head = Text(f"… {cut} more line{'s' if cut != 1 else ''} above", style="dim")
            shown = Text("\n").join([head, *lines[cut:]])
        status = Text(self.activity.line(), style="dim", no_wrap=True, overflow="ellipsis")
        status.truncate(self._console.width - 1, overflow="ellipsis")
        region = Text("\n").join([shown, status]) if shown.plain else status
        self._live.update(region, refresh=True)
