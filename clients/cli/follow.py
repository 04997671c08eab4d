"""Following one task from the CLI until its turn ends: the live view, the asks
it waits on, Ctrl-C, and a daemon that goes away.

What Ctrl-C means:

- in `hdsp run` and `hdsp send` (``on_interrupt="cancel"``): the first cancels
  the task (at an approval prompt too: the prompt goes, nothing is approved), a
  second detaches at once and says what became of the task;
- in `hdsp send`, while the message sent waits in the queue of a busy task: it
  takes that message back out of the queue (and says so); the task's current
  turn, someone else's, goes on;
- in `hdsp attach` (``on_interrupt="detach"``): it detaches; the task goes on,
  and an ask it waits on stays open for `hdsp answer` or another client.

An ask shown here is answered by a line typed here or by anyone else: when
another client (or `hdsp answer`) answers first, the task is cancelled, or the
daemon goes away, the prompt is taken down at once and the screen says why; when
the daemon comes back and the ask still waits, it is asked again. A bare Enter
answers nothing: approving takes a `y`.

The asks of the agents the task calls (seed 002: each call is a task of its own,
and theirs below them) are asked here too, one at a time, labelled with the
agent; without a terminal, the command says how to answer it and ends with exit
4 (waiting), as it does for the task's own asks (a failed request's included).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import anyio

from hdsp.protocol import (
    ClineMessage,
    ErrorCode,
    MessageEvent,
    TaskAborted,
    TaskActive,
    TaskAskResponded,
    TaskClosed,
    TaskCompleted,
    TaskDelegated,
    TaskDelegationCompleted,
    TaskEvent,
    TaskIdle,
    TaskInteractive,
    TaskResumable,
    TaskState,
    encode,
)

from ..client import Client
from ..errors import ClientError, CommandFailed, NotAuthenticated
from ..escape import escape_controls
from ..exit_codes import ExitCode
from .ask_prompt import read_line, typed_answer
from .live import LiveView

__all__ = ["TaskFollower"]

_ENDING = (TaskCompleted, TaskAborted, TaskIdle, TaskResumable, TaskClosed)


@dataclass
class _Prompt:
    """The ask being asked here, and how to take its prompt down."""

    ask: ClineMessage
    #: The task that asks: the followed one, or an agent's task below it.
    task_id: str = ""
    #: That agent (None: the followed task's own ask).
    agent: str | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    finished: anyio.Event = field(default_factory=anyio.Event)
    #: The person entered an answer: it is on its way, not to be called off.
    answering: bool = False
    #: Why the prompt was taken down (said once it is down).
    reason: str = ""


class TaskFollower:
    """Follows one task for one command; :meth:`run` returns the exit code."""

    def __init__(
        self,
        client: Client,
        task_id: str,
        *,
        json: bool,
        interactive: bool,
        on_interrupt: Literal["cancel", "detach"],
        out_raw: Callable[[str], None],
        our_message: str | None = None,
        first_text_is_prompt: bool = True,
    ) -> None:
        self.client = client
        self.task_id = task_id
        self.short = task_id[:8]
        self.json = json
        self.interactive = interactive
        self.on_interrupt = on_interrupt
        self.out_raw = out_raw
        #: `hdsp send`: the text we sent; what comes before its turn is not ours.
        self.our_message = our_message
        self.waiting_for_our_turn = our_message is not None
        self.view = LiveView(
            first_text_is_prompt=first_text_is_prompt,
            redraw=None if not json else False,
            task_id=task_id,
        )
        self._prompt: _Prompt | None = None
        #: The asks asked here, by task and ts.
        self._asked: set[tuple[str, int]] = set()
        #: The agents' tasks below this one that are watched for asks, with
        #: their agents (those that ended are left out).
        self._agents: dict[str, str] = {}
        self._watched: set[str] = set()
        self._cancel_requested = False
        #: hdspd stopped while an ask was asked here (a restart asks it again).
        self._stopped_at_ask = False
        self._code: int | None = None
        self._following = anyio.CancelScope()
        self._tg: anyio.abc.TaskGroup | None = None

    def note(self, text: str) -> None:
        if not self.json:
            self.view.note(text)

    # ---- the loop -----------------------------------------------------------

    async def run(
        self,
        since_seq: int,
        seed: list[ClineMessage] | None = None,
        pending_ask: ClineMessage | None = None,
        first_note: str | None = None,
    ) -> int:
        """Follow the task from `since_seq` (after `seed`, a snapshot's messages,
        and the ask it waits on); `first_note` is said once Ctrl-C means what
        this command says it means."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await tg.start(self._on_interrupt)
            if first_note is not None:
                self.note(first_note)
            tg.start_soon(self._watch_daemon)
            tg.start_soon(self._watch_children_of, self.task_id, since_seq)
            with self.view:
                if self.view.redraw:
                    tg.start_soon(self.view.tick)
                if seed is not None and not self.json:
                    self.view.seed(seed, since_seq)
                if pending_ask is not None:
                    code = self._on_pending_ask(pending_ask)
                    if code is not None:
                        tg.cancel_scope.cancel()
                        return code
                with self._following:
                    try:
                        self._code = await self._events(since_seq)
                    except NotAuthenticated:
                        raise  # (said once, as any command's refused key)
                    except ClientError as exc:
                        self.note(f"Lost hdspd: {exc}")
                        self._code = ExitCode.UNREACHABLE
                    self._following.cancel()  # (what watches it stops saying things)
                await self._take_down_prompt("")
            tg.cancel_scope.cancel()
        return self._code if self._code is not None else ExitCode.FAILED

    async def _events(self, since_seq: int) -> int | None:
        async with self.client.events(self.task_id, since_seq=since_seq) as events:
            async for event in events:
                code = await self._on_event(event)
                if code is not None:
                    return code
        return None

    async def _on_event(self, event: TaskEvent) -> int | None:
        data = event.data
        message = data.payload[0].message if isinstance(data, MessageEvent) else None
        if self.waiting_for_our_turn:
            if message is not None and message.say == "user_feedback":
                self.waiting_for_our_turn = False
            elif isinstance(data, (TaskAborted, TaskResumable, TaskClosed)):
                return self._ended_before_our_turn(data)
            else:
                return None  # the turn before ours: not the answer to our message
        prompt = self._prompt
        if prompt is not None and not prompt.answering and prompt.task_id == self.task_id:
            if message is not None and message.ts == prompt.ask.ts and message.is_answered:
                await self._take_down_prompt("The ask was answered elsewhere.")
            elif isinstance(data, (TaskAskResponded, TaskActive)):
                await self._take_down_prompt("The ask was answered elsewhere.")
            elif isinstance(data, _ENDING):
                await self._take_down_prompt("The ask is gone: the task stopped.")
        if isinstance(data, TaskResumable) and prompt is not None and not prompt.answering:
            self._stopped_at_ask = True  # (the ask waits again once hdspd is back)
        if self.json:
            self.out_raw(encode(event).decode())
        else:
            self.view.event(event)
        if isinstance(data, TaskDelegated):
            child = escape_controls(data.payload[1][:8])
            self.note(f"an agent works on a part: task {child} (`hdsp attach {child}`)")
            self._watch(data.payload[1], event.seq)
        elif isinstance(data, TaskDelegationCompleted):
            self.note(f"agent task {escape_controls(data.payload[1][:8])} returned")
        if isinstance(data, (TaskInteractive, TaskIdle)):
            ask = (await self.client.get_task(self.task_id)).pending_ask
            if ask is not None:
                return self._on_pending_ask(ask)
        if isinstance(data, _ENDING):
            return self._ending(data)
        return None

    def _on_pending_ask(self, ask: ClineMessage) -> int | None:
        """An ask waits: ask it here, or say how to answer it and stop."""
        self.view.pending_ask = ask.ts
        if not self.interactive:
            if not self.json:
                self.view.close_tail()
                if ask.ask == "api_req_failed":
                    # (Why is in the history above, on stdout, as `hdsp show` has it.)
                    self.note(
                        f"The model request failed; `hdsp answer {self.short} --yes` retries "
                        "it, --no ends the turn."
                    )
                else:
                    self._tell_unanswered()
            # The task waits for a person, whatever the ask (a failed request too).
            return ExitCode.WAITING
        if (self.task_id, ask.ts) not in self._asked and self._prompt is None and self._tg:
            self._asked.add((self.task_id, ask.ts))
            self._prompt = _Prompt(ask, task_id=self.task_id)
            self._tg.start_soon(self._ask, self._prompt)
        return None

    # ---- the agents' asks -----------------------------------------------------

    def _watch(self, task_id: str, since_seq: int | None) -> None:
        """Watch the agent's task `task_id` (below the followed one) for asks."""
        if task_id in self._watched or self._tg is None:
            return
        self._watched.add(task_id)
        self._tg.start_soon(self._follow_agent, task_id, since_seq)

    async def _watch_children_of(self, task_id: str, since_seq: int | None) -> None:
        """Watch the children of `task_id` that still work (they started before
        this command followed it)."""
        try:
            item = (await self.client.get_task(task_id)).item
            for child_id in item.child_ids or []:
                if child_id not in self._watched:
                    child = (await self.client.get_task(child_id)).item
                    if child.state not in (TaskState.COMPLETED, TaskState.ABORTED):
                        self._watch(child_id, since_seq)
        except ClientError:
            return

    async def _follow_agent(self, task_id: str, since_seq: int | None) -> None:
        """Follow an agent's task below the followed one until it ends: its
        asks are asked here (labelled with the agent), and so are its own
        agents'."""
        try:
            snapshot = await self.client.get_task(task_id)
            self._agents[task_id] = snapshot.item.agent or "an agent"
            await self._watch_children_of(task_id, since_seq)
            async with self.client.events(task_id, since_seq=since_seq) as events:
                if snapshot.pending_ask is not None:
                    self._on_agent_ask(task_id, snapshot.pending_ask)
                async for event in events:
                    data = event.data
                    if isinstance(data, TaskDelegated):
                        self._watch(data.payload[1], event.seq)
                    prompt = self._prompt
                    ended = isinstance(
                        data, (TaskCompleted, TaskAborted, TaskClosed, TaskResumable)
                    )
                    if prompt is not None and prompt.task_id == task_id and not prompt.answering:
                        if isinstance(data, (TaskAskResponded, TaskActive)):
                            await self._take_down_prompt("The agent's ask was answered elsewhere.")
                        elif ended:
                            await self._take_down_prompt("The agent's ask is gone: it stopped.")
                    if ended:
                        return
                    if isinstance(data, (TaskInteractive, TaskIdle)):
                        ask = (await self.client.get_task(task_id)).pending_ask
                        if ask is not None:
                            self._on_agent_ask(task_id, ask)
        except ClientError:
            return
        finally:
            self._agents.pop(task_id, None)

    def _on_agent_ask(self, task_id: str, ask: ClineMessage) -> None:
        """An ask waits in an agent's task: ask it here when nothing else is, or
        (without a terminal) say once how to answer it."""
        key = (task_id, ask.ts)
        agent = escape_controls(self._agents.get(task_id, "an agent"))
        short = escape_controls(task_id[:8])
        if not self.interactive:
            if key not in self._asked:
                self._asked.add(key)
                self.note(
                    f"The agent {agent} (task {short}) waits for an answer: "
                    f"`hdsp answer {short} --yes|--no [TEXT]`, or `hdsp attach {short}`."
                )
            # The task waits on its agent's ask: nobody here can answer it.
            self._detach(ExitCode.WAITING, "")
            return
        if key not in self._asked and self._prompt is None and self._tg is not None:
            self._asked.add(key)
            self._prompt = _Prompt(ask, task_id=task_id, agent=agent)
            self._tg.start_soon(self._ask, self._prompt)

    def _tell_unanswered(self) -> None:
        self.note(
            f"The task waits for an answer: `hdsp attach {self.short}` on a terminal, "
            f"or `hdsp answer {self.short} --yes|--no [TEXT]`."
        )

    def _ending(self, data: object) -> int:
        if isinstance(data, TaskCompleted):
            return ExitCode.OK
        if isinstance(data, TaskAborted):
            self.note(f"Task aborted. `hdsp send {self.short} TEXT` continues it.")
        elif isinstance(data, TaskResumable) and self._stopped_at_ask:
            self.note(
                "The daemon stopped while the task waited for an answer; the ask waits "
                f"again once hdspd is back: `hdsp attach {self.short}`, or "
                f"`hdsp answer {self.short} --yes|--no [TEXT]`."
            )
        elif isinstance(data, TaskResumable):
            self.note(f"The daemon stopped the task; `hdsp resume {self.short}` resumes it.")
        elif isinstance(data, TaskClosed):
            self.note(f"The task was closed; `hdsp resume {self.short}` resumes it.")
        else:
            self.note(f"The task is waiting; `hdsp send {self.short} TEXT` answers it.")
        return ExitCode.FAILED

    def _ended_before_our_turn(self, data: object) -> int:
        what = (
            "closed"
            if isinstance(data, TaskClosed)
            else ("stopped by the daemon" if isinstance(data, TaskResumable) else "aborted")
        )
        self.note(
            f"The task was {what} before your message's turn; the message is still in "
            f"its queue and goes once a turn of the task completes (`hdsp show {self.short}`)."
        )
        return ExitCode.FAILED

    # ---- asks ---------------------------------------------------------------

    async def _ask(self, prompt: _Prompt) -> None:
        """Ask `prompt.ask` here until a line answers it or the prompt is taken down."""
        ask = prompt.ask
        renderer = self.view.renderer
        view = self.view
        if prompt.agent is not None:
            self.note(
                f"The agent {prompt.agent} (task {escape_controls(prompt.task_id[:8])}) asks:"
            )
        try:
            with view.asking(ask):
                line = ""
                with prompt.scope:
                    while not line:
                        question = renderer.ask_prompt(ask)
                        view.prompt_wrote(question)  # (a prompt taken down: its line)
                        try:
                            typed = await read_line(question)
                        except EOFError:
                            prompt.reason = "No answer: input ended."
                            self._detach(ExitCode.WAITING, "")
                            self._tell_unanswered()
                            return
                        view.prompt_wrote(question + typed, replacing=question)
                        line = typed.strip()
                        if not line:
                            view.prompt_note(
                                "Type y to approve or n to deny (Enter alone does neither)."
                                if renderer.needs_explicit_yes(ask)
                                else "Type your answer (Enter alone answers nothing)."
                            )
                view.erase_prompt()
                if prompt.scope.cancelled_caught or not line:
                    if prompt.reason:
                        renderer.note(prompt.reason)
                    return
                prompt.answering = True
                await self._answer(prompt, line)
        finally:
            if self._prompt is prompt:
                self._prompt = None
            prompt.finished.set()
        if prompt.answering and self._tg is not None:
            # The next ask may have come while this answer was on its way.
            self._tg.start_soon(self._ask_what_waits)

    async def _ask_what_waits(self) -> None:
        """Ask the ask the task waits on now, if any (and none is being asked);
        else one its agents wait on."""
        try:
            ask = (await self.client.get_task(self.task_id)).pending_ask
        except ClientError:
            return
        if ask is not None and self._prompt is None and not self._following.cancel_called:
            code = self._on_pending_ask(ask)
            if code is not None:
                self._detach(code, "")
            return
        for task_id in list(self._agents):
            if self._prompt is not None or self._following.cancel_called:
                return
            try:
                ask = (await self.client.get_task(task_id)).pending_ask
            except ClientError:
                return
            if ask is not None:
                self._on_agent_ask(task_id, ask)

    async def _answer(self, prompt: _Prompt, line: str) -> None:
        ask = prompt.ask
        response, text = typed_answer(line)
        try:
            await self.client.respond_to_ask(prompt.task_id, ask.ts, response, text)
            if prompt.agent is not None:  # (its answer shows in its own task's history)
                verdict = {"yesButtonClicked": "Approved", "noButtonClicked": "Denied"}
                self.note(f"{verdict.get(response, 'Answered')}: the ask of {prompt.agent}.")
        except CommandFailed as exc:
            if exc.code in (ErrorCode.ALREADY_ANSWERED, ErrorCode.INVALID_STATE):
                self.note("Another client answered first, or the ask is gone.")
            else:
                self.view.renderer.error(f"Could not answer: {exc.message}")
        except ClientError as exc:
            self.view.renderer.error(f"Could not answer: {exc}")

    async def _take_down_prompt(self, reason: str) -> None:
        prompt = self._prompt
        if prompt is None or prompt.answering:
            return
        prompt.reason = reason
        prompt.scope.cancel()
        await prompt.finished.wait()

    # ---- Ctrl-C and the daemon ------------------------------------------------

    def _detach(self, code: int, text: str) -> None:
        if text:
            self.note(text)
        self._code = code
        self._following.cancel()

    async def _on_interrupt(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                await self._interrupted()

    async def _interrupted(self) -> None:
        if self.on_interrupt == "detach":
            await self._take_down_prompt("")
            waits = " (it waits for an answer)" if self._asked else ""
            self._detach(
                ExitCode.FAILED,
                f"Detached; the task goes on{waits}. `hdsp attach {self.short}` follows it again.",
            )
            return
        if self.waiting_for_our_turn and not self._cancel_requested:
            if await self._withdraw_our_message():
                return
        if self._cancel_requested:
            self._detach(
                ExitCode.FAILED,
                f"Detached while the task stops. `hdsp show {self.short}` shows where it ended.",
            )
            return
        self._cancel_requested = True
        await self._take_down_prompt("Cancelling: nothing was approved.")
        self.note("Cancelling the task (Ctrl-C again to detach)...")
        try:
            await self.client.cancel_task(self.task_id)
        except ClientError as exc:
            self.note(f"Could not cancel the task: {exc}")

    async def _withdraw_our_message(self) -> bool:
        """Take the message `hdsp send` queued back out of the queue; whether it was."""
        try:
            snapshot = await self.client.get_task(self.task_id)
            queued = [q for q in snapshot.queue if q.text == self.our_message]
            if not queued:
                return False
            await self.client.delete_queued_message(self.task_id, queued[-1].id)
        except ClientError:
            return False
        self._detach(
            ExitCode.FAILED,
            "Your message was taken out of the task's queue before its turn, unsent; "
            "the task's current turn goes on.",
        )
        return True

    async def _watch_daemon(self) -> None:
        while True:
            await self.client.wait_connection_lost()
            if self._following.cancel_called:
                return
            await self._take_down_prompt("")
            self.note("hdspd went away; waiting for it to come back (Ctrl-C to leave).")
            await self.client.wait_connected()
            self.note("hdspd is back.")
            self._asked.clear()  # what was asked before is asked again if it waits
            await self._ask_what_waits()
