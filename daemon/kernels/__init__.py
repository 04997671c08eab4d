"""Jupyter kernels: started or attached, executions queued per kernel, outputs
collected (bounded) and streamed to clients. What a model reads of them is the
kernel tools' business (`hdsp.daemon.tools.kernel_output`)."""

from __future__ import annotations

from .errors import (
    KernelDead,
    KernelError,
    KernelNotFound,
    KernelNotOwned,
    KernelOverloaded,
    KernelStartFailed,
)
from .execution import Emit, Execution, InputCallback, OutputCallback
from .outputs import IMAGE_TYPES, OutputList
from .service import KernelService, TaskKernel

__all__ = [
    "IMAGE_TYPES",
    "Emit",
    "Execution",
    "InputCallback",
    "KernelDead",
    "KernelError",
    "KernelNotFound",
    "KernelNotOwned",
    "KernelOverloaded",
    "KernelService",
    "KernelStartFailed",
    "OutputCallback",
    "OutputList",
    "TaskKernel",
]
