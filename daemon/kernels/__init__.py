"""Jupyter kernels: started or attached, executions queued per kernel, outputs
streamed and rendered for clients and for the model."""

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
from .outputs import IMAGE_TYPES, OutputList, cut_text, render_for_model, strip_ansi
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
    "cut_text",
    "render_for_model",
    "strip_ansi",
]
