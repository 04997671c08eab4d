"""The tool-call state machine of a turn: each :class:`~.turn.CallState` goes
pending -> (asking ->) approved -> running -> done, saved at every step, so that
a restart finds it where it stood. A call is checked (a known tool, JSON
arguments that match its schema, not the same call again and again), decided by
the approval policy (deny, ask a person, or run), run, and its result recorded.

:class:`ToolCalls` owns the counters that guard the turn: tool usage, consecutive
mistakes, and the last call with its repetitions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import msgspec
import structlog

from hdsp.daemon.approvals import Decision
from hdsp.daemon.bounded_text import BoundedText
from hdsp.daemon.checkpoints import CheckpointService, GitFailed, WorkspaceRefused
from hdsp.daemon.conversation import ImageBlock, TextBlock
from hdsp.daemon.memory import give_back
from hdsp.daemon.modes import Mode
from hdsp.daemon.scrubber import scrubber
from hdsp.daemon.tools import (
    AskAnswer,
    Tool,
    ToolCategory,
    ToolContext,
    ToolContextBase,
    ToolError,
    ToolRegistry,
    ToolResult,
)
from hdsp.daemon.tools.registry import validator_ready
from hdsp.protocol import (
    Ask,
    AskResponse,
    ClineMessage,
    Say,
    TaskToolFailed,
    ToolResultText,
    ToolUsageEntry,
    encode,
)

from .asks import AskBox
from .call_limits import not_run
from .deps import TaskDeps, TaskKernels
from .messages import TaskMessages
from .parallel import EVERYTHING, Resources, run_concurrently
from .turn import CallState, encodable_result
from .turn_saves import CoalescedSaves

__all__ = [
    "RAW_ARGUMENTS_SHOWN",
    "REPETITION_LIMIT",
    "RESULT_SHOWN_CHARS",
    "CallContext",
    "ToolCalls",
    "command_cwd",
]

log = structlog.get_logger("hdsp.tasks")

#: The same call with the same arguments this many times in a row is refused.
REPETITION_LIMIT = 3
#: How much of arguments that are not valid JSON a message quotes (characters).
RAW_ARGUMENTS_SHOWN = 1000

#: How much of a tool result its `tool_result` message keeps (characters: the
#: head and the tail; the model got all of it).
RESULT_SHOWN_CHARS = 64_000

#: Tools whose result people see already: the question's answer, the result.
_RESULT_SHOWN_BY_TOOL = frozenset({ToolCategory.COMPLETION, ToolCategory.FOLLOWUP})

#: Tools whose only effects are messages of their own task, which the journal
#: commits after the saved turn state anyway: they need no flush before they run.
_EFFECTS_IN_HISTORY = frozenset({ToolCategory.COMPLETION, ToolCategory.FOLLOWUP})

#: Tools whose calls wait for a person or a child task, not for the daemon: they
#: hold no slot of the concurrency limits (:mod:`.call_limits`), or a slot held
#: by a wait could starve every other call.
_UNBOUNDED = frozenset(
    {
        ToolCategory.SUBTASK,
        ToolCategory.FOLLOWUP,
        ToolCategory.COMPLETION,
        ToolCategory.MODE,
        ToolCategory.TODO,
    }
)

#: A reply with more calls than this gives its memory back once they are done.
_GIVE_BACK_AFTER = 32

#: Tools that change the workspace or a kernel: a checkpoint comes before each call.
_CHANGES = frozenset({ToolCategory.WRITE, ToolCategory.EXECUTE, ToolCategory.COMMAND})

#: The running call's key (CallState.key), per context: calls run concurrently.
_running_key: ContextVar[str | None] = ContextVar("running_call_key", default=None)


def command_cwd(workspace: Path, given: Any) -> str:
    """The directory a command ask names, as the model asked for it (absolute,
    normalised but not resolved: a way out of the workspace shows as one)."""
    return os.path.normpath(os.path.join(workspace, str(given or ".")))


class CallContext(ToolContextBase):
    """What a running tool sees of its task (a :class:`ToolContext`): its messages,
    its asks, its workspace and the daemon's kernels."""

    def __init__(
        self,
        task_id: str,
        workspace: Path,
        messages: TaskMessages,
        asks: AskBox,
        kernels: TaskKernels | None,
        checkpoints: CheckpointService | None = None,
        services: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(task_id, workspace)
        self._services = dict(services or {})
        self._messages = messages
        self._asks = asks
        self._kernels = kernels
        self._checkpoints = checkpoints

    async def say(
        self, say: str, text: str | None = None, *, partial: bool = False, **fields: Any
    ) -> ClineMessage:
        return await self._messages.say(say, text, partial=partial, **fields)

    async def update(self, message: ClineMessage, **changes: Any) -> ClineMessage:
        return await self._messages.update(message, **changes)

    async def ask(self, ask: str, text: str | None = None, **fields: Any) -> AskAnswer:
        return await self._asks.ask(ask, text, **fields)

    def service(self, name: str) -> Any:
        if name == "kernels" and self._kernels is not None:
            return self._kernels
        if name == "call_key":
            # The running call's lasting key (per context: calls run concurrently).
            return _running_key.get()
        if name == "execution_log" and self._checkpoints is not None:
            # The task's kernel execution log (issue 20): what ran where, in order.
            return functools.partial(self._checkpoints.record_execution, self._task_id)
        return self._services[name]


class ToolCalls:
    def __init__(
        self,
        deps: TaskDeps,
        messages: TaskMessages,
        asks: AskBox,
        workspace: Path,
        save_turn: Callable[[], Awaitable[None]],
        *,
        mode: Callable[[], Mode] | None = None,
        services: Mapping[str, Any] | None = None,
        approvals_key: Callable[[], str] | None = None,
    ) -> None:
        #: Whose approval settings and counts a call uses: a tree of agents
        #: shares its root's (its caps count the whole tree).
        self._approvals_key = approvals_key or (lambda: messages.task_id)
        #: What the tools this task runs see of it.
        self.context: ToolContext = CallContext(
            messages.task_id,
            workspace,
            messages,
            asks,
            deps.kernels,
            deps.checkpoints,
            services,
        )
        #: The task's current mode: a call outside it is refused (None: no modes).
        self._mode = mode
        self._ctx = self.context
        self._deps = deps
        self._messages = messages
        self._asks = asks
        #: Saves of the turn's state, shared among the concurrent calls of a reply.
        self._saves = CoalescedSaves(save_turn, deps.journal.flush)
        self._save_turn = self._saves.save
        #: This task's slots of the daemon's concurrency limits on tool calls.
        self._slots = deps.call_limits.for_task()
        self.tool_usage: dict[str, ToolUsageEntry] = {}
        #: Consecutive tool errors.
        self.mistakes = 0
        #: The last call (its name and a digest of its arguments), and how many
        #: times in a row it came.
        self.last_call: tuple[str, bytes] | None = None
        self.repeats = 0

    @property
    def _tools(self) -> ToolRegistry:
        """The tools of this task's workspace (its MCP servers' among them, and
        those a client offered it)."""
        return self._deps.tools.scoped(self._ctx.workspace, self._messages.task_id)

    async def run_all(self, calls: list[CallState]) -> None:
        """Take every call of one reply to done, concurrently (:mod:`.parallel`):
        calls that change the same thing keep their order. Past the cap on calls
        per reply (`tool_calls.max_per_reply`) a call is not run: its result says
        so, for the model to ask again later (issue 32)."""
        cap = self._deps.call_limits.per_reply
        over = [c for c in calls[cap:] if c.status != "done"]
        if over:
            for call in over:
                not_run(call, cap, len(calls))
            await self._messages.say(
                Say.ERROR,
                f"The model asked for {len(calls)} tool calls in one reply: the first {cap} "
                "run (the setting tool_calls.max_per_reply), and the model is told to ask "
                "for the others in a later reply.",
            )
            await self._save_turn()
        self._saves.concurrent = sum(c.status != "done" for c in calls) > 1
        try:
            await run_concurrently(calls, self.run, self.resources, self._failed)
        finally:
            self._saves.concurrent = False
        if len(calls) > _GIVE_BACK_AFTER:
            # What the burst's results and saves took is garbage now: hand it back
            # to the system rather than keep the high-water mark (issue 32).
            await give_back()

    def resources(self, call: CallState) -> Resources:
        """What `call` changes, for the order of concurrent calls: a file it
        writes, the kernel it runs code in; a shell command may change anything,
        and a call that ends the turn or switches mode keeps its place among all."""
        tool = self._tools.get(call.name)
        if tool is None or call.arguments is None:
            return Resources()  # refused at once
        category = tool.category
        if category in (ToolCategory.COMPLETION, ToolCategory.MODE):
            return Resources(names=frozenset({EVERYTHING}))
        if category is ToolCategory.WRITE:
            paths = tool.written_paths(call.arguments)
            if not paths:
                return Resources(exclusive=True)
            return Resources(names=frozenset(f"path:{os.path.normpath(p)}" for p in paths))
        if category is ToolCategory.EXECUTE:
            return Resources(names=frozenset({"kernel"}))
        if category in (ToolCategory.COMMAND, ToolCategory.MCP):
            return Resources(exclusive=True)
        if category in (ToolCategory.FOLLOWUP, ToolCategory.TODO):
            return Resources(names=frozenset({category.value}))
        return Resources()  # reads, agents: independent

    async def _failed(self, call: CallState, exc: Exception) -> None:
        """A call whose handling raised: an error result, the others go on."""
        if call.status != "done":
            await self.finish(
                call,
                ToolResult.text(
                    f"Error: the tool {call.name} failed inside hdsp ({type(exc).__name__}).",
                    is_error=True,
                ),
            )

    async def run(self, call: CallState) -> None:
        """Take `call` from where it stands to done."""
        tool = self._tools.get(call.name)
        if call.status == "running" and tool is not None and tool.category is ToolCategory.SUBTASK:
            # An agent call attaches again to the child task it started (which
            # resumes), so the caller gets its return once.
            call.status = "approved"
        if call.status == "running":
            # It was running when the daemon stopped: what it did is unknown.
            output = await self._messages.tool_output(call.id)
            await self.finish(
                call,
                ToolResult.text(
                    "The tool call was interrupted by a restart of hdsp before it finished; "
                    "check its effects before repeating it. Output seen so far:\n"
                    + (output or "(none)"),
                    is_error=True,
                ),
            )
            return
        if call.status == "pending":
            # Deciding holds a slot too (validation, the policy, the preview, the
            # messages): a reply of many calls makes progress a few at a time, and
            # every other client gets the loop between them.
            async with self._slots.slot():
                if await self._decide(call, tool):
                    return
        if call.status == "asking":
            assert call.ask_ts is not None
            ask_message = await self._messages.saved(call.ask_ts)
            if ask_message is None:
                call.status = "pending"
                return await self.run(call)
            timed_out = AskAnswer(
                AskResponse.YES if call.approve_on_timeout else AskResponse.NO,
                "(no answer in time)",
                by="timeout",
            )
            answer = await self._asks.wait(
                ask_message, deadline_ms=call.ask_deadline, on_timeout=timed_out
            )
            if not answer.approved:
                feedback = f" The user said: {answer.text}" if answer.text else ""
                if answer is timed_out:
                    feedback = " Nobody answered the approval request in time."
                # (The answered ask shows the denial.)
                await self.finish(
                    call,
                    ToolResult.text(f"The user denied this operation.{feedback}"),
                    shown=False,
                )
                return
            if call.cap_reached:
                self._deps.approvals.reset_count(self._approvals_key())
            call.status = "approved"
        assert call.status == "approved" and tool is not None and call.arguments is not None
        if tool.category in _UNBOUNDED:
            await self._execute(call, tool)
        else:
            # Waits for a slot of the task's and of the daemon's (back-pressure).
            async with self._slots.slot():
                await self._execute(call, tool)

    async def _decide(self, call: CallState, tool: Tool | None) -> bool:
        """A pending call: checked, then denied (done), asked (asking) or approved;
        whether it is done."""
        self._count(call.name, attempts=1)
        if tool is not None:
            await validator_ready(tool)  # (the first of a tool: off the loop)
        problem = self.check_call(call) or self.check_mode(call) or self.check_repetition(call)
        if problem is not None:
            # Every client sees why the call did not run, as the model does.
            text = " ".join(b.text for b in problem.content if isinstance(b, TextBlock))
            await self._messages.say(Say.ERROR, text.removeprefix("Error: "), tool_use_id=call.id)
            await self.finish(call, problem, shown=False)
            return True
        assert tool is not None and call.arguments is not None
        ctx = self._ctx
        verdict = self._deps.approvals.decide(
            tool, call.arguments, task_id=self._approvals_key(), workspace=ctx.workspace
        )
        if verdict.decision is Decision.DENY:
            await self.finish(call, ToolResult.text(f"Denied: {verdict.reason}", is_error=True))
            return True
        text = await tool.preview(ctx, call.arguments)
        if verdict.decision is Decision.ASK:
            extra: dict[str, Any] = {}
            if verdict.cap_reached:
                kind, text = Ask.AUTO_APPROVAL_MAX_REQ_REACHED, verdict.reason
            elif tool.category is ToolCategory.COMMAND:
                kind, text = Ask.COMMAND, str(call.arguments.get("command", text))
                # Where it runs, as asked for: a cwd outside the workspace shows
                # as such here, and the tool refuses it.
                extra["cwd"] = command_cwd(ctx.workspace, call.arguments.get("cwd"))
            elif tool.category is ToolCategory.MCP:
                kind = Ask.USE_MCP_SERVER
            else:
                kind = Ask.TOOL
            ask = await self._asks.post(
                kind, text, tool_use_id=call.id, is_protected=verdict.protected or None, **extra
            )
            call.status, call.ask_ts = "asking", ask.ts
            call.cap_reached = verdict.cap_reached
            if verdict.timeout is not None:
                call.ask_deadline = ask.ts + int(verdict.timeout * 1000)
                call.approve_on_timeout = verdict.on_timeout is Decision.APPROVE
            await self._save_turn()
        else:
            if tool.category not in (ToolCategory.COMPLETION, ToolCategory.FOLLOWUP):
                await self._messages.say(Say.TOOL, text, tool_use_id=call.id)
            if verdict.timeout is not None:
                on_timeout = (
                    AskAnswer(AskResponse.MESSAGE, verdict.default_answer, by="timeout")
                    if verdict.on_timeout is Decision.APPROVE
                    else None
                )
                self._asks.timeout = (verdict.timeout, on_timeout)
            call.status = "approved"
        return False

    async def _execute(self, call: CallState, tool: Tool) -> None:
        """Run an approved call's tool and record its result."""
        assert call.arguments is not None
        call.status = "running"
        await self._save_turn()
        await self._checkpoint(tool)
        if tool.category not in _EFFECTS_IN_HISTORY:
            # Durable before the tool acts: after a crash, "running" means it may
            # have, and the checkpoint of the files before it is in the store.
            await self._deps.journal.flush()
        self._messages.tool_use_id = call.id
        _running_key.set(call.key)
        try:
            result = await tool.execute(self._ctx, call.arguments)
        except ToolError as exc:
            result = ToolResult.text(f"Error: {exc}", is_error=True)
        except Exception as exc:
            log.exception("tool failed", tool=tool.name)
            result = ToolResult.text(
                f"Error: the tool {tool.name} failed inside hdsp ({type(exc).__name__}).",
                is_error=True,
            )
        finally:
            self._messages.tool_use_id = None
            self._asks.timeout = None
        await self.finish(call, result)

    async def _checkpoint(self, tool: Tool) -> None:
        """A checkpoint of the workspace before a call that may change it (issue
        20), shown as a `checkpoint_saved` message. A workspace that cannot have
        one is said once per task; a failed checkpoint is said, and the call runs."""
        service = self._deps.checkpoints
        if service is None or tool.category not in _CHANGES or not service.enabled:
            return
        task_id, workspace = self._ctx.task_id, self._ctx.workspace
        why = service.refusal(workspace)
        if why is not None:
            if task_id not in service.refused_told:
                service.refused_told.add(task_id)
                await self._messages.say(Say.ERROR, why)
            return

        async def announce(text: str, checkpoint: dict[str, Any]) -> int:
            message = await self._messages.say(Say.CHECKPOINT_SAVED, text, checkpoint=checkpoint)
            return message.ts

        try:
            await service.save(task_id, workspace, f"before {tool.name}", announce)
        except (GitFailed, WorkspaceRefused, TimeoutError) as exc:
            log.warning("checkpoint failed", error=str(exc))
            await self._messages.say(Say.ERROR, f"No checkpoint before {tool.name}: {exc}")

    async def finish(self, call: CallState, result: ToolResult, *, shown: bool = True) -> None:
        """Record `result` as the call's, and count a mistake if it is an error;
        with `shown`, tell people what it was (a `tool_result` message)."""
        result = encodable_result(result)
        self.mistakes = self.mistakes + 1 if result.is_error else 0
        call.status = "done"
        call.ask_ts = None
        # Tool and kernel output is foreign text: no known key or key-shaped string
        # reaches the model or the history (hdsp.daemon.scrubber).
        call.result = [
            TextBlock(text=scrubber.scrub(b.text)) if isinstance(b, TextBlock) else b
            for b in result.content
        ]
        call.is_error = result.is_error
        call.completes_task = result.completes_task
        await self._save_turn()
        tool = self._tools.get(call.name)
        if shown and (tool is None or tool.category not in _RESULT_SHOWN_BY_TOOL):
            await self._say_result(call, result)
        if result.is_error:
            self._count(call.name, failures=1)
            text = " ".join(b.text for b in call.result if isinstance(b, TextBlock))
            await self._messages.emit(TaskToolFailed(payload=(self._ctx.task_id, call.name, text)))

    async def _say_result(self, call: CallState, result: ToolResult) -> None:
        """The `tool_result` message of `call`: its result as people see it, the
        head and tail of a long one, scrubbed as the model's copy is."""
        if result.summary is not None:
            text = scrubber.scrub(result.summary)
        else:
            text = "\n".join(b.text for b in call.result or [] if isinstance(b, TextBlock))
        kept = BoundedText(RESULT_SHOWN_CHARS)
        kept.append(text)
        record = ToolResultText(
            tool=call.name,
            text=kept.text(),
            is_error=result.is_error,
            images=sum(isinstance(b, ImageBlock) for b in result.content),
            omitted=kept.dropped,
            output_shown=result.summary is not None,
        )
        await self._messages.say(Say.TOOL_RESULT, encode(record).decode(), tool_use_id=call.id)

    def _count(self, name: str, *, attempts: int = 0, failures: int = 0) -> None:
        entry = self.tool_usage.get(name, ToolUsageEntry(attempts=0, failures=0))
        self.tool_usage[name] = msgspec.structs.replace(
            entry, attempts=entry.attempts + attempts, failures=entry.failures + failures
        )

    def check_repetition(self, call: CallState) -> ToolResult | None:
        """Stop the same call with the same arguments from looping."""
        arguments = json.dumps(call.arguments, sort_keys=True).encode()
        signature = (call.name, hashlib.blake2b(arguments, digest_size=16).digest())
        self.repeats = self.repeats + 1 if signature == self.last_call else 1
        self.last_call = signature
        if self.repeats < REPETITION_LIMIT:
            return None
        return ToolResult.text(
            f"Error: {call.name} was called with the same arguments {self.repeats} times in "
            "a row. It will not run again like this: use what it returned, change the "
            "arguments, or try another approach.",
            is_error=True,
        )

    def check_mode(self, call: CallState) -> ToolResult | None:
        """An error result for a call its task's mode does not allow (a tool
        outside the mode's groups, a write outside its `file_regex`): the model
        may call a tool it was not offered, so the list is not the guard."""
        tool = self._tools.get(call.name)
        if self._mode is None or tool is None:
            return None
        refusal = self._mode().refusal(tool, call.arguments)
        return None if refusal is None else ToolResult.text(f"Error: {refusal}", is_error=True)

    def check_call(self, call: CallState) -> ToolResult | None:
        """An error result for a call that cannot run as the model sent it."""
        registry = self._tools
        if registry.get(call.name) is None:
            return ToolResult.text(
                f"Error: there is no tool named {call.name!r}. "
                f"The tools are: {', '.join(registry.names())}.",
                is_error=True,
            )
        if call.arguments is None:
            raw = call.raw_arguments
            shown = raw if len(raw) <= RAW_ARGUMENTS_SHOWN else raw[:RAW_ARGUMENTS_SHOWN] + "..."
            return ToolResult.text(
                f"Error: the arguments of {call.name} are not valid JSON, or not a JSON "
                f"object: {shown!r}. The call did not run. Send one JSON object that "
                "matches the tool's schema.",
                is_error=True,
            )
        if problems := registry.validate(call.name, call.arguments):
            return ToolResult.text(
                f"Error: invalid arguments for {call.name}:\n"
                + "\n".join(f"- {p}" for p in problems),
                is_error=True,
            )
        return None
