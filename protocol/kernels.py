"""Kernel commands, their results, and the records they carry: a kernel, one
output of an execution (Jupyter's iopub output messages), an execution's result.

Kernel commands run concurrently (their ordering key is None): the daemon queues
executions per kernel itself, and an `InterruptKernel` must not wait behind the
execution it is meant to stop.

Outputs keep Jupyter's message content (mime bundles, stream text, tracebacks as
the kernel sent them, ANSI colours included) so that a client renders them as
JupyterLab would; only field names are camelCase, as everywhere on the wire.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

from ._base import CommandBase, WireStruct

__all__ = [
    "AttachKernel",
    "CellOutput",
    "ExecuteCode",
    "ExecutionOutputData",
    "ExecutionResult",
    "InterruptKernel",
    "KernelInfo",
    "KernelList",
    "KernelOutput",
    "KernelRef",
    "KernelState",
    "ListKernels",
    "RestartKernel",
    "ShutdownKernel",
    "StartKernel",
]


class KernelState(enum.StrEnum):
    """Jupyter's execution states plus what the daemon knows about the process."""

    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    RESTARTING = "restarting"
    #: The process exited or stopped answering heartbeats; `RestartKernel` brings
    #: a kernel the daemon started back.
    DEAD = "dead"


# ---- records ------------------------------------------------------------------


class KernelInfo(WireStruct, frozen=True):
    kernel_id: str
    #: Kernelspec name ("python3"); for an attached kernel, its language if known.
    kernel_name: str
    status: KernelState
    #: True when hdsp started the kernel: it shuts it down when the daemon stops.
    #: An attached kernel (a notebook's) is only ever detached from.
    owned: bool
    #: Working directory of the kernel process, when hdsp started it.
    cwd: str | None = None
    connection_file: str | None = None
    #: Tasks whose code runs in this kernel.
    task_ids: list[str] = []


class KernelOutput(WireStruct, frozen=True):
    """One iopub output message: `outputType` is its msg_type."""

    output_type: Literal[
        "stream",
        "display_data",
        "update_display_data",
        "execute_result",
        "error",
        "clear_output",
    ]
    #: stream: "stdout" or "stderr".
    name: str | None = None
    #: stream: the text.
    text: str | None = None
    #: display_data, update_display_data, execute_result: the mime bundle.
    data: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    #: display_data, update_display_data: the display this output shows or updates.
    display_id: str | None = None
    execution_count: int | None = None
    #: error: exception name, value and the traceback lines as the kernel sent them.
    ename: str | None = None
    evalue: str | None = None
    traceback: list[str] | None = None
    #: clear_output: clear when the next output arrives instead of now.
    wait: bool | None = None


class ExecutionResult(WireStruct, frozen=True):
    kernel_id: str
    execution_id: str
    #: ok, error (the code raised), timeout (stopped after its time limit),
    #: cancelled (stopped by a cancel), died (the kernel died), restarted (the
    #: kernel was restarted while the code ran).
    status: Literal["ok", "error", "timeout", "cancelled", "died", "restarted"]
    execution_count: int | None = None
    #: Every output, as a notebook keeps them: clear_output and
    #: update_display_data applied, consecutive stream text of one name merged.
    outputs: list[KernelOutput] = []
    #: The kernel did not stop after an interrupt and was restarted: its state is gone.
    kernel_restarted: bool = False


class ExecutionOutputData(WireStruct, frozen=True):
    kernel_id: str
    execution_id: str
    #: The task whose tool call runs the code, if any (the event's topic).
    task_id: str | None = None
    #: The output messages that arrived since the previous event, in order.
    outputs: list[KernelOutput] = []


class CellOutput(WireStruct, frozen=True):
    """The text (JSON) of a task's `cell_output` say message: code a tool runs and
    its outputs so far. Partial while the code runs (a few updates a second),
    final and durable when it is done. Long stream text is cut to its head and
    tail here; the task's `executionOutput` events carry all of it."""

    kernel_id: str
    code: str
    status: Literal["running", "ok", "error", "timeout", "cancelled", "died", "restarted"]
    execution_id: str | None = None
    execution_count: int | None = None
    outputs: list[KernelOutput] = []
    #: Characters of stream text and outputs left out of `outputs`.
    omitted: int = 0
    kernel_restarted: bool = False


class KernelList(WireStruct, frozen=True):
    kernels: list[KernelInfo]


class KernelRef(WireStruct, frozen=True):
    kernel_id: str
    status: KernelState


# ---- commands -------------------------------------------------------------------


class ListKernels(CommandBase[KernelList], tag="ListKernels", frozen=True):
    pass


class StartKernel(CommandBase[KernelInfo], tag="StartKernel", frozen=True):
    #: Kernelspec name; "python3" by default.
    kernel_name: str | None = None
    #: Working directory of the kernel; the daemon's by default.
    cwd: str | None = None


class AttachKernel(CommandBase[KernelInfo], tag="AttachKernel", frozen=True):
    """Use a kernel that runs already (a notebook's, from Jupyter's runtime dir)."""

    connection_file: str


class InterruptKernel(CommandBase[KernelRef], tag="InterruptKernel", frozen=True):
    kernel_id: str


class RestartKernel(CommandBase[KernelRef], tag="RestartKernel", frozen=True):
    """Restart a kernel hdsp started (also one that died); its state is lost."""

    kernel_id: str


class ShutdownKernel(CommandBase[KernelRef], tag="ShutdownKernel", frozen=True):
    """Shut down a kernel hdsp started, or detach from an attached one (which
    keeps running)."""

    kernel_id: str


class ExecuteCode(CommandBase[ExecutionResult], tag="ExecuteCode", frozen=True):
    """Run code and answer when it is done, with its outputs. Outputs also stream
    as `executionOutput` events while it runs. Executions of one kernel run one at
    a time in the order they came."""

    kernel_id: str
    code: str
    #: Seconds before the kernel is interrupted (and restarted if it does not
    #: stop); the daemon's default when absent.
    timeout: float | None = None
