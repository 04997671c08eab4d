"""Jupyter kernels: started or attached, executions queued per kernel, outputs
collected (bounded) and streamed to clients. What a model reads of them is the
kernel tools' business (`hdsp.daemon.tools.kernel_output`)."""

from __future__ import annotations

from .bindings import TaskBindings
from .connection import KernelConnection, Routes, ZmqKernelConnection
from .errors import (
    KernelBusy,
    KernelDead,
    KernelError,
    KernelNotFound,
    KernelNotOwned,
    KernelOverloaded,
    KernelStartFailed,
)
from .execution import Emit, Execution, InputCallback, OutputCallback
from .kernel import Kernel, KernelPolicy
from .outputs import IMAGE_TYPES, OutputList
from .service import KernelService, TaskKernel

__all__ = [
    "IMAGE_TYPES",
    "Emit",
    "Execution",
    "InputCallback",
    "Kernel",
    "KernelBusy",
    "KernelConnection",
    "KernelDead",
    "KernelError",
    "KernelNotFound",
    "KernelNotOwned",
    "KernelOverloaded",
    "KernelPolicy",
    "KernelService",
    "KernelStartFailed",
    "OutputCallback",
    "OutputList",
    "Routes",
    "TaskBindings",
    "TaskKernel",
    "ZmqKernelConnection",
]
