"""Errors of the kernel service (a root of the forest in :mod:`hdsp.daemon.errors`).
Each carries the wire error code a command that meets it answers with; tools turn
them into text the model can act on.

    KernelError
    ├── KernelNotFound      no kernel has that id (or it was shut down)
    ├── KernelStartFailed   no such kernelspec, bad working directory, no handshake
    ├── KernelDead          the kernel died; restart it (if hdsp started it)
    ├── KernelNotOwned      restart of a kernel hdsp only attached to
    ├── KernelBusy          a silent inspection found the kernel running code
    ├── KernelOverloaded    too many executions wait for one kernel
    └── KernelServerUnreachable  a Jupyter server (remote kernels) cannot be reached

jupyter_client's and zmq's exceptions are translated to these where they are met.
"""

from __future__ import annotations

from hdsp.daemon.errors import HdspError
from hdsp.protocol import ErrorCode

__all__ = [
    "KernelBusy",
    "KernelDead",
    "KernelError",
    "KernelNotFound",
    "KernelNotOwned",
    "KernelOverloaded",
    "KernelServerUnreachable",
    "KernelStartFailed",
]


class KernelError(HdspError):
    code = ErrorCode.INTERNAL


class KernelNotFound(KernelError):
    code = ErrorCode.KERNEL_NOT_FOUND


class KernelStartFailed(KernelError):
    code = ErrorCode.INVALID_REQUEST


class KernelDead(KernelError):
    code = ErrorCode.INVALID_STATE


class KernelNotOwned(KernelError):
    code = ErrorCode.INVALID_STATE


class KernelBusy(KernelError):
    code = ErrorCode.INVALID_STATE


class KernelOverloaded(KernelError):
    code = ErrorCode.OVERLOADED


class KernelServerUnreachable(KernelError):
    code = ErrorCode.UNAVAILABLE
