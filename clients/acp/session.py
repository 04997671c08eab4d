"""One ACP session: a hdsp task seen from an ACP host.

The session follows its task's events from the moment it knows the task (its
first prompt, or `session/load`) for as long as the adapter runs, and sends the
host what each event shows. A prompt turn waits on that same stream for the
end of the turn its message started: the task completed (`end_turn`), was
cancelled (`cancelled`), or waits for the user's words (a follow-up question,
a failed request: `end_turn`, the next prompt answers it). An approval the task
waits on becomes a `session/request_permission`; whoever answers first, the
host or any other hdsp client, wins, and a request the host still shows when
someone else answered is withdrawn (its tool call's status moves on, and the
adapter stops waiting for it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import anyio
from acp import Client as AcpClient
from acp import RequestError, update_agent_message_text
from acp.schema import (
    AllowedOutcome,
    CurrentModeUpdate,
    StopReason,
)

from hdsp.protocol import (
    ClineMessage,
    ErrorCode,
    MessageEvent,
    OfferedMcpServer,
    TaskAborted,
    TaskActive,
    TaskClosed,
    TaskCompleted,
    TaskEvent,
    TaskIdle,
    TaskInteractive,
    TaskModeSwitched,
    TaskResumable,
    TaskTodoListUpdated,
)

from ..client import Client
from ..errors import ClientError, CommandFailed
from .permissions import ALLOW_ALWAYS, always_scope, answer_of_option, permission_options
from .session_records import SessionRecord, SessionRecords
from .updates import PERMISSION_ASKS, SessionUpdate, UpdateTranslator, plan_update

__all__ = ["AcpSession"]

#: hdsp's stop reasons of a reply that did not end by itself, as ACP's.
_CUTS: dict[str, StopReason] = {
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "content_filter": "refusal",
}

_log = logging.getLogger("hdsp.client.acp")


@dataclass
class _Turn:
    """A prompt waiting for the end of the turn its message started."""

    #: Events up to this seq came before the message was sent.
    after_seq: int
    text: str
    #: The message waits in the task's queue: its turn starts when it shows.
    queued: bool = False
    #: How the model's last reply ended, if not by itself (max_tokens, refusal).
    cut: StopReason | None = None
    stop: StopReason | None = None
    done: anyio.Event = field(default_factory=anyio.Event)

    def end(self, stop: StopReason) -> None:
        if self.stop is None:
            self.stop = stop
            self.done.set()


class AcpSession:
    def __init__(
        self,
        host: AcpClient,
        client: Client,
        record: SessionRecord,
        records: SessionRecords,
        tg: anyio.abc.TaskGroup,
        *,
        workspace: str,
    ) -> None:
        self.host = host
        self.client = client
        self.record = record
        self._records = records
        self._tg = tg
        self.translator = UpdateTranslator(workspace)
        self._turn: _Turn | None = None
        self._following = False
        #: Permission requests the host has open, by the ts of their ask.
        self._asking: dict[int, anyio.CancelScope] = {}
        self._sending = anyio.Lock()
        #: Asks answered on an "allow always" since a person last answered one.
        self._answered_alone = 0
        #: The host's MCP servers, offered to the task with each prompt (in this
        #: process's and hdspd's memory only: their env and headers may hold keys).
        self.offered: list[OfferedMcpServer] = []

    @property
    def session_id(self) -> str:
        return self.record.session_id

    def save(self) -> None:
        if self.record.session_id.startswith("acp-"):
            self._records.save(self.record)

    async def send(self, updates: list[SessionUpdate]) -> None:
        """Send updates to the host, in order (one sender at a time)."""
        if not updates:
            return
        async with self._sending:
            for update in updates:
                await self.host.session_update(session_id=self.session_id, update=update)

    # ---- following the task -----------------------------------------------------

    async def follow(self, since_seq: int) -> None:
        """Follow the task's events after `since_seq` (once: later calls keep the
        stream that runs); returns once the stream is subscribed."""
        if self._following:
            return
        self._following = True
        await self._tg.start(self._follow, since_seq)

    async def _follow(
        self, since_seq: int, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_id = self.record.task_id
        assert task_id is not None
        try:
            async with self.client.events(task_id, since_seq=since_seq) as events:
                task_status.started()
                async for event in events:
                    await self._on_event(event)
        except ClientError as exc:
            _log.warning("lost the task's events: %s", exc)
            if self._turn is not None:
                await self.send(self.translator_note(f"Lost hdspd: {exc}"))
                self._turn.end("end_turn")
        finally:
            self._following = False

    def translator_note(self, text: str) -> list[SessionUpdate]:
        """A line of the adapter's own (not the model's) in the agent's message."""
        return [update_agent_message_text(f"\n\n[{text}]")]

    async def _on_event(self, event: TaskEvent) -> None:
        data = event.data
        turn = self._turn
        if isinstance(data, MessageEvent):
            m = data.payload[0].message
            if turn is not None and turn.queued and event.seq is not None:
                if event.seq > turn.after_seq and m.say == "user_feedback" and m.text == turn.text:
                    turn.queued = False
            if turn is not None and m.say == "text" and not m.partial:
                turn.cut = _CUTS.get(m.stop_reason or "")
            if m.type == "ask" and m.is_answered:
                self._withdraw(m.ts)
            await self.send(self.translator.message(m))
            return
        if isinstance(data, TaskTodoListUpdated):
            await self.send([plan_update(data.payload[1])])
            return
        if isinstance(data, TaskModeSwitched):
            self.record.mode = data.payload[1]
            await self.send(
                [
                    CurrentModeUpdate(
                        session_update="current_mode_update", current_mode_id=data.payload[1]
                    )
                ]
            )
            return
        if isinstance(data, TaskActive):
            self._withdraw_all()
            return
        if isinstance(data, (TaskInteractive, TaskIdle)):
            await self._on_waiting(event)
            return
        if isinstance(data, (TaskCompleted, TaskAborted, TaskResumable, TaskClosed)):
            self._withdraw_all()
            if not self._ends_turn(event, turn):
                return
            assert turn is not None
            if isinstance(data, TaskResumable):
                await self.send(
                    self.translator_note(
                        "hdspd stopped the task (it is shutting down or restarting); "
                        "your next message resumes it"
                    )
                )
            elif isinstance(data, TaskClosed):
                await self.send(
                    self.translator_note("The task was closed; your next message reopens it")
                )
            if isinstance(data, TaskAborted):
                turn.end("cancelled")
            else:
                turn.end(turn.cut if isinstance(data, TaskCompleted) and turn.cut else "end_turn")

    @staticmethod
    def _ends_turn(event: TaskEvent, turn: _Turn | None) -> bool:
        return (
            turn is not None
            and not turn.queued
            and event.seq is not None
            and event.seq > turn.after_seq
        )

    async def _on_waiting(self, event: TaskEvent) -> None:
        """The task waits for an answer: ask the host, or end the turn on a
        question for the user (the next prompt answers it)."""
        task_id = self.record.task_id
        assert task_id is not None
        try:
            ask = (await self.client.get_task(task_id)).pending_ask
        except ClientError as exc:
            _log.warning("could not read the task's ask: %s", exc)
            return
        if ask is None:
            return
        if ask.ask in PERMISSION_ASKS:
            self.ask_host(ask)
        elif self._ends_turn(event, self._turn):
            assert self._turn is not None
            self._turn.end("end_turn")

    # ---- permissions -------------------------------------------------------------

    def ask_host(self, ask: ClineMessage) -> None:
        """Ask the host about `ask` (once per ask), or answer it at once if the
        user allowed its scope always in this session."""
        if ask.ts in self._asking:
            return
        self._asking[ask.ts] = anyio.CancelScope()
        self._tg.start_soon(self._ask_host, ask, self._asking[ask.ts])

    async def _may_answer_alone(self) -> bool:
        """Whether the adapter may answer one more ask on an "allow always"
        without asking: hdsp's cap on automatic approvals in a row
        (`approvals.max_auto_approved_requests`) holds for these answers too."""
        try:
            view = await self.client.get_settings()
        except ClientError as exc:
            _log.warning("could not read the approval settings: %s", exc)
            return False
        approvals = view.settings.get("approvals")
        cap = approvals.get("max_auto_approved_requests") if isinstance(approvals, dict) else None
        return not isinstance(cap, int) or self._answered_alone < cap

    def _withdraw(self, ask_ts: int) -> None:
        scope = self._asking.pop(ask_ts, None)
        if scope is not None:
            scope.cancel()

    def _withdraw_all(self) -> None:
        for ts in list(self._asking):
            self._withdraw(ts)

    async def _ask_host(self, ask: ClineMessage, scope: anyio.CancelScope) -> None:
        task_id = self.record.task_id
        assert task_id is not None
        scope_key = always_scope(ask)
        chosen: str | None = None
        with scope:
            if (
                scope_key is not None
                and scope_key in self.record.always_allowed
                and await self._may_answer_alone()
            ):
                chosen = ALLOW_ALWAYS
                self._answered_alone += 1
            else:
                # The tool call is shown (pending) before the host is asked about it.
                await self.send(self.translator.message(ask))
                try:
                    response = await self.host.request_permission(
                        session_id=self.session_id,
                        tool_call=self.translator.permission_call(ask),
                        options=permission_options(ask),
                    )
                except (RequestError, ConnectionError) as exc:
                    _log.warning("the host did not answer the permission request: %s", exc)
                    return
                self._answered_alone = 0  # a person answered: counted afresh
                outcome = response.outcome
                if isinstance(outcome, AllowedOutcome):
                    chosen = outcome.option_id
        if self._asking.get(ask.ts) is scope:
            del self._asking[ask.ts]
        if scope.cancelled_caught or chosen is None:
            return  # answered elsewhere, withdrawn, or the host cancelled
        answer = answer_of_option(chosen)
        if answer is None:
            _log.warning("the host chose an option that was not offered: %r", chosen)
            return
        if chosen == ALLOW_ALWAYS and scope_key is not None:
            if scope_key not in self.record.always_allowed:
                self.record.always_allowed.append(scope_key)
                self.save()
        try:
            await self.client.respond_to_ask(task_id, ask.ts, answer.value)
        except CommandFailed as exc:
            if exc.code not in (ErrorCode.ALREADY_ANSWERED, ErrorCode.INVALID_STATE):
                _log.warning("could not answer the ask: %s", exc.message)
        except ClientError as exc:
            _log.warning("could not answer the ask: %s", exc)

    # ---- prompts -----------------------------------------------------------------

    async def prompt(self, text: str, images: list[str]) -> StopReason:
        """Send the user's message and wait for the end of its turn."""
        if self._turn is not None:
            raise RequestError.invalid_request({"details": "A prompt of this session is running."})
        head = (await self.client.status()).head_seq
        turn = self._turn = _Turn(after_seq=head, text=text)
        self.translator.own_prompts.append(text)
        try:
            try:
                if self.record.task_id is None:
                    ref = await self.client.start_task(
                        text,
                        workspace=self.record.cwd,
                        mode=self.record.mode,
                        profile=self.record.profile,
                        images=images or None,
                        mcp_servers=self.offered,
                    )
                    self.record.task_id = ref.task_id
                    self.save()
                else:
                    ref = await self.client.send_message(
                        self.record.task_id,
                        text,
                        images=images or None,
                        mcp_servers=self.offered,
                    )
                    turn.queued = bool(ref.queued)
            except CommandFailed as exc:
                raise RequestError.invalid_params({"details": exc.message}) from None
            await self.follow(head)
            await turn.done.wait()
            assert turn.stop is not None
            return turn.stop
        finally:
            self._turn = None

    async def cancel(self) -> None:
        """session/cancel: stop the task's work (its kernel is interrupted); the
        prompt that waits ends with `cancelled`."""
        turn, task_id = self._turn, self.record.task_id
        self._withdraw_all()
        if turn is None or task_id is None:
            return
        try:
            if turn.queued:
                # The message still waits for someone else's turn: take it back.
                snapshot = await self.client.get_task(task_id)
                ours = [q for q in snapshot.queue if q.text == turn.text]
                if ours:
                    await self.client.delete_queued_message(task_id, ours[-1].id)
                    turn.end("cancelled")
                    return
            ref = await self.client.cancel_task(task_id)
        except ClientError as exc:
            _log.warning("could not cancel the task: %s", exc)
            turn.end("cancelled")
            return
        if ref.state is not None and ref.state.value not in ("running", "interactive"):
            turn.end("cancelled")  # nothing was running: no abort will come

    # ---- load ----------------------------------------------------------------------

    async def replay(self) -> None:
        """Show the host the task's whole history, then follow it from there (a
        turn still running goes on showing; an ask that waits is asked)."""
        task_id = self.record.task_id
        assert task_id is not None
        snapshot = await self.client.get_task(task_id)
        updates: list[Any] = []
        for m in snapshot.messages:
            if m.ts == (snapshot.pending_ask.ts if snapshot.pending_ask else None):
                continue  # asked below, as a permission request or a question
            updates.extend(self.translator.message(m, replay=True))
        if snapshot.item.todos:
            updates.append(plan_update(snapshot.item.todos))
        await self.send(updates)
        await self.follow(snapshot.head_seq)
        ask = snapshot.pending_ask
        if ask is not None:
            if ask.ask in PERMISSION_ASKS:
                self.ask_host(ask)
            else:
                await self.send(self.translator.message(ask, replay=True))
