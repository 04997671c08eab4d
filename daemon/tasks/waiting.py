"""What a model request shows while it waits, so that no one stares at silence:
an `api_req_waiting` message while the reply has not begun, and a countdown
(`api_req_retry_delayed`, then `api_req_retried`) before a retry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import anyio

from hdsp.protocol import Say

from .messages import TaskMessages

__all__ = ["WAIT_NOTICE_AFTER", "WAIT_UPDATE_INTERVAL", "ReplyWait", "count_down", "show_wait"]

#: A model request whose reply has not begun after this long (seconds) gets an
#: `api_req_waiting` message...
WAIT_NOTICE_AFTER = 2.0
#: ...updated this often (seconds) with the time waited, until the reply begins.
WAIT_UPDATE_INTERVAL = 5.0


@dataclass
class ReplyWait:
    """How long the current model request has waited for its reply to begin."""

    started: float
    #: Not a request yet: the request is being prepared (its tokens counted,
    #: which may first wait for the provider's SDK to load).
    preparing: bool = False
    #: The server's response began (the provider's stream was entered).
    accepted: bool = False
    #: How the wait ended: "began" (a first chunk), "failed", "stopped", and for
    #: a request being prepared "ready".
    outcome: str | None = None
    over: anyio.Event = field(default_factory=anyio.Event)

    def end(self, outcome: str) -> None:
        if self.outcome is None:
            self.outcome = outcome
            self.over.set()

    def text(self) -> str:
        waited = anyio.current_time() - self.started
        if self.preparing:
            if self.outcome == "ready":
                return f"The request was ready after {waited:.0f} s."
            if self.outcome is not None:
                return f"Stopped preparing the request after {waited:.0f} s."
            return f"Preparing the request (loading the model provider): {waited:.0f} s so far."
        if self.outcome == "began":
            return f"The model began its reply after {waited:.0f} s."
        if self.outcome == "failed":
            return f"The request ended after {waited:.0f} s without a reply."
        if self.outcome == "stopped":
            return f"Stopped waiting for the model after {waited:.0f} s."
        if self.accepted:
            return f"The model server answered; waiting {waited:.0f} s for the reply to begin."
        return f"Waiting for the model server to answer: {waited:.0f} s so far."


async def show_wait(messages: TaskMessages, wait: ReplyWait) -> None:
    """An `api_req_waiting` message every client sees, once the reply has not
    begun for WAIT_NOTICE_AFTER s: updated every WAIT_UPDATE_INTERVAL s with
    the time waited, final when the wait ends (or the task is cancelled)."""
    with anyio.move_on_after(WAIT_NOTICE_AFTER):
        await wait.over.wait()
    if wait.outcome is not None:
        return
    message = await messages.say(Say.API_REQ_WAITING, wait.text(), partial=True)
    try:
        while wait.outcome is None:
            with anyio.move_on_after(WAIT_UPDATE_INTERVAL):
                await wait.over.wait()
            if wait.outcome is None:
                message = await messages.update(message, text=wait.text())
    finally:
        wait.end("stopped")
        with anyio.move_on_after(5, shield=True):
            await messages.update(message, text=wait.text(), partial=False)


async def count_down(messages: TaskMessages, problem: str, attempt: int, delay: float) -> None:
    """Wait `delay` seconds (cancellable: the task's scope), counting down in a
    message every client sees."""
    deadline = anyio.current_time() + delay
    msg = await messages.say(
        Say.API_REQ_RETRY_DELAYED, f"{problem}\nRetry {attempt} in {delay:.0f} s.", partial=True
    )
    while (left := deadline - anyio.current_time()) > 0:
        await anyio.sleep(min(1.0, left))
        remaining = max(0.0, deadline - anyio.current_time())
        msg = await messages.update(msg, text=f"{problem}\nRetry {attempt} in {remaining:.0f} s.")
    await messages.update(msg, text=f"{problem}\nRetried (attempt {attempt}).", partial=False)
    await messages.say(Say.API_REQ_RETRIED, json.dumps({"attempt": attempt, "delay": delay}))
