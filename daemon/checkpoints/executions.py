"""A task's kernel execution log: which code ran in which kernel, in order, as
the store keeps it (table `kernel_executions`), and which part of it a replay
runs: the executions of the kernel session a checkpoint saw (since the kernel
started, was restarted or was last restored), up to the checkpoint.
"""

from __future__ import annotations

import re

import msgspec

__all__ = ["NO_REPLAY_MARK", "ExecutionRecord", "replay_plan"]

#: A line in a cell that marks it as not to be replayed (it wrote outside the
#: workspace, called the network, ...): `# hdsp: no-replay`.
NO_REPLAY_MARK = re.compile(r"^\s*#\s*hdsp:\s*no-replay\b", re.MULTILINE)

#: Statuses after which the kernel's state is gone: a new session starts.
_SESSION_ENDS = frozenset({"died", "restarted", "session_start"})


class ExecutionRecord(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    kernel_id: str
    code: str
    #: ExecutionResult.status ("ok", "error", "timeout", "died", ...), or
    #: "session_start" for the marker a replay writes when it restarts the kernel.
    status: str
    execution_count: int | None = None
    kernel_restarted: bool = False
    ts: int = 0

    @property
    def replayable(self) -> bool:
        return NO_REPLAY_MARK.search(self.code) is None


def replay_plan(records: list[ExecutionRecord]) -> list[ExecutionRecord]:
    """The executions to replay to reach the kernel state after `records` (the
    log up to a checkpoint, in order): those of the last kernel session."""
    session: list[ExecutionRecord] = []
    for r in records:
        ended = r.status in _SESSION_ENDS or r.kernel_restarted
        previous = session[-1] if session else None
        if ended or (
            previous is not None
            and (
                previous.kernel_id != r.kernel_id
                or (
                    r.execution_count is not None
                    and previous.execution_count is not None
                    and r.execution_count <= previous.execution_count
                )
            )
        ):
            session = []
        if not ended:
            session.append(r)
    return session
