"""Kernel state by replay: restart the task's kernel and run again, in order, the
code it ran up to a checkpoint; stop at the first error and say which cell;
then list the kernel's variables so that the user sees the state.

The executions run in the kernel like the agent's own (sandboxed, with the
kernel's time limit), and are written to the task's execution log after a
`session_start` marker, so that later checkpoints replay from here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

from hdsp.daemon.kernels import KernelError, KernelService
from hdsp.protocol import KernelReplay, KernelState, KernelVariable, ReplayedExecution

from .executions import ExecutionRecord

__all__ = ["VARIABLES_CODE", "Record", "replay_kernel", "skip_reason"]

#: Writes one execution to the task's log: (kernel id, code, status,
#: execution count, kernel restarted).
Record = Callable[..., Awaitable[Any]]

#: Lists the kernel's user variables as JSON on stdout: [[name, type, repr], ...].
VARIABLES_CODE = """\
def __hdsp_variables():
    import json, types
    hidden = {"In", "Out", "exit", "quit", "get_ipython"}
    found = []
    for name, value in list(globals().items()):
        if name.startswith("_") or name in hidden:
            continue
        if isinstance(value, (types.ModuleType, types.FunctionType, type)):
            continue
        try:
            text = repr(value)
        except Exception as exc:
            text = f"<repr failed: {type(exc).__name__}>"
        found.append([name, type(value).__name__, text[:300]])
    print(json.dumps(found))
__hdsp_variables()
del __hdsp_variables
"""


def _variables(stdout: str) -> list[KernelVariable]:
    for line in reversed(stdout.strip().splitlines()):
        try:
            rows = json.loads(line)
        except ValueError:
            continue
        if isinstance(rows, list):
            return [
                KernelVariable(name=str(r[0]), type=str(r[1]), summary=str(r[2]))
                for r in rows
                if isinstance(r, list) and len(r) == 3
            ]
    return []


def skip_reason(record: ExecutionRecord, skip: Collection[int]) -> str | None:
    """Why `record` is not replayed, or None."""
    if record.seq in skip:
        return "skipped: the user marked it not to be replayed"
    if not record.replayable:
        return "skipped: marked `# hdsp: no-replay`"
    if record.status != "ok":
        return f"skipped: it ended with {record.status} when it first ran"
    return None


async def replay_kernel(
    record_execution: Record,
    kernels: KernelService,
    task_id: str,
    workspace: Path,
    plan: list[ExecutionRecord],
    skip: Collection[int],
) -> KernelReplay:
    """Restart the task's kernel and replay `plan`; the caller got approval."""
    # A task with no kernel now (a daemon restarted since, or it was shut down)
    # gets a new one: nothing to restart.
    had_kernel = any(
        task_id in (k.task_ids or []) and k.status is not KernelState.DEAD
        for k in kernels.list_kernels()
    )
    try:
        kernel = await kernels.kernel_for_task(task_id, workspace)
        if had_kernel:
            await kernels.restart_kernel(kernel.kernel_id)
    except KernelError as exc:
        return KernelReplay(approved=True, error=f"The kernel could not restart: {exc.message}")
    await record_execution(kernel.kernel_id, "", "session_start")
    done: list[ReplayedExecution] = []
    failed_at: int | None = None
    error: str | None = None
    for record in plan:
        if failed_at is not None:
            done.append(ReplayedExecution(seq=record.seq, code=record.code, status="not_run"))
            continue
        reason = skip_reason(record, skip)
        if reason is not None:
            done.append(
                ReplayedExecution(seq=record.seq, code=record.code, status="skipped", note=reason)
            )
            continue
        try:
            result = await kernels.execute(kernel.kernel_id, record.code, task_id=task_id)
        except KernelError as exc:
            failed_at, error = record.seq, exc.message
            done.append(ReplayedExecution(seq=record.seq, code=record.code, status="error"))
            continue
        await record_execution(
            kernel.kernel_id,
            record.code,
            result.status,
            result.execution_count,
            result.kernel_restarted,
        )
        if result.status == "ok":
            done.append(ReplayedExecution(seq=record.seq, code=record.code, status="ok"))
            continue
        failed_at = record.seq
        errors = [o for o in result.outputs if o.output_type == "error"]
        error = f"{errors[0].ename}: {errors[0].evalue}" if errors else f"status {result.status}"
        done.append(ReplayedExecution(seq=record.seq, code=record.code, status="error", note=error))
    variables: list[KernelVariable] = []
    try:
        listing = await kernels.execute(kernel.kernel_id, VARIABLES_CODE, task_id=task_id)
        stdout = "".join(
            o.text or ""
            for o in listing.outputs
            if o.output_type == "stream" and o.name == "stdout"
        )
        variables = _variables(stdout)
    except KernelError:
        pass
    return KernelReplay(
        approved=True, executions=done, failed_at=failed_at, error=error, variables=variables
    )
