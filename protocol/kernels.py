"""Kernel commands, their results, and the records they carry: a kernel, one
output of an execution (Jupyter's iopub output messages), an execution's result.

Kernel commands run concurrently (their ordering key is None): the daemon queues
executions per kernel itself, and an `InterruptKernel` must not wait behind the
execution it is meant to stop.

A kernel runs on this machine (`provider` "local": started by hdspd in its
sandbox, or a notebook's kernel attached by its connection file) or on a Jupyter
server (`provider` "gateway": Jupyter Server, a JupyterHub single-user server,
Kernel Gateway or Enterprise Gateway, through its REST and WebSocket kernel
API); `ListRemoteKernels` lists what that server runs.

Outputs keep Jupyter's message content (mime bundles, stream text, tracebacks as
the kernel sent them, ANSI colours included) so that a client renders them as
JupyterLab would; only field names are camelCase, as everywhere on the wire.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

from msgspec import Meta

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
    "ListRemoteKernels",
    "RemoteKernel",
    "RemoteKernelList",
    "RemoteSession",
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
    kernel_name: Annotated[
        str,
        Meta(
            description=(
                'Kernelspec name ("python3"); for an attached kernel, its language if known.'
            )
        ),
    ]
    status: KernelState
    owned: Annotated[
        bool,
        Meta(
            description=(
                "True when hdsp started the kernel: it shuts it down when the daemon stops. An "
                "attached kernel (a notebook's) is only ever detached from."
            )
        ),
    ]
    cwd: Annotated[
        str | None,
        Meta(description="Working directory of the kernel process, when hdsp started it."),
    ] = None
    connection_file: str | None = None
    task_ids: Annotated[list[str], Meta(description="Tasks whose code runs in this kernel.")] = []
    provider: Annotated[
        Literal["local", "gateway"],
        Meta(
            description=(
                "local: on this machine; gateway: on the Jupyter server `serverUrl`, as the "
                "kernel `remoteId` there."
            )
        ),
    ] = "local"
    server_url: Annotated[
        str | None,
        Meta(description="gateway: the Jupyter server's URL (without credentials)."),
    ] = None
    remote_id: Annotated[
        str | None,
        Meta(description="gateway: the kernel's id on its Jupyter server."),
    ] = None


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
    name: Annotated[str | None, Meta(description='stream: "stdout" or "stderr".')] = None
    text: Annotated[str | None, Meta(description="stream: the text.")] = None
    data: Annotated[
        dict[str, Any] | None,
        Meta(description="display_data, update_display_data, execute_result: the mime bundle."),
    ] = None
    metadata: dict[str, Any] | None = None
    display_id: Annotated[
        str | None,
        Meta(
            description=(
                "display_data, execute_result, update_display_data: the display this output "
                "shows or updates (the message's transient display_id)."
            )
        ),
    ] = None
    execution_count: int | None = None
    ename: Annotated[
        str | None,
        Meta(
            description=(
                "error: exception name, value and the traceback lines as the kernel sent them."
            )
        ),
    ] = None
    evalue: str | None = None
    traceback: list[str] | None = None
    wait: Annotated[
        bool | None,
        Meta(description="clear_output: clear when the next output arrives instead of now."),
    ] = None


class ExecutionResult(WireStruct, frozen=True):
    kernel_id: str
    execution_id: str
    status: Annotated[
        Literal["ok", "error", "timeout", "cancelled", "died", "restarted"],
        Meta(
            description=(
                "ok, error (the code raised), timeout (stopped after its time limit), cancelled"
                " (stopped by a cancel), died (the kernel died), restarted (the kernel was "
                "restarted while the code ran)."
            )
        ),
    ]
    execution_count: int | None = None
    outputs: Annotated[
        list[KernelOutput],
        Meta(
            description=(
                "Every output, as a notebook keeps them: clear_output and update_display_data "
                "applied, consecutive stream text of one name merged."
            )
        ),
    ] = []
    kernel_restarted: Annotated[
        bool,
        Meta(
            description=(
                "The kernel did not stop after an interrupt and was restarted: its state is gone."
            )
        ),
    ] = False
    connection_dropped: Annotated[
        bool,
        Meta(
            description=(
                "A kernel on a Jupyter server: the connection to the server dropped while the "
                "code ran, and came back. What the server published after it saw the drop was "
                "replayed; what it had sent at that moment may be missing from `outputs`."
            )
        ),
    ] = False
    display_updates: Annotated[
        list[KernelOutput],
        Meta(
            description=(
                "For each display id the execution's messages carried, the last data it got "
                "(as update_display_data outputs): outputs of earlier cells that show one of "
                "these display ids now show this data, as Jupyter updates a display wherever "
                "it is shown."
            )
        ),
    ] = []


class ExecutionOutputData(WireStruct, frozen=True):
    kernel_id: str
    execution_id: str
    task_id: Annotated[
        str | None,
        Meta(description="The task whose tool call runs the code, if any (the event's topic)."),
    ] = None
    outputs: Annotated[
        list[KernelOutput],
        Meta(description="The output messages that arrived since the previous event, in order."),
    ] = []


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
    omitted: Annotated[
        int,
        Meta(description="Characters of stream text and outputs left out of `outputs`."),
    ] = 0
    kernel_restarted: bool = False


class KernelList(WireStruct, frozen=True):
    kernels: list[KernelInfo]


class KernelRef(WireStruct, frozen=True):
    kernel_id: str
    status: KernelState


class RemoteKernel(WireStruct, frozen=True):
    """A kernel a Jupyter server runs, as its REST API describes it (the
    server's text: untrusted)."""

    remote_id: str
    name: str | None = None
    execution_state: str | None = None
    last_activity: str | None = None
    connections: int | None = None
    kernel_id: Annotated[
        str | None,
        Meta(description="hdsp's id for this kernel (ListKernels), when hdsp uses it."),
    ] = None


class RemoteSession(WireStruct, frozen=True):
    """A Jupyter server's session: which notebook (or console) uses which kernel."""

    session_id: str
    path: str | None = None
    name: str | None = None
    type: str | None = None
    remote_kernel_id: str | None = None


class RemoteKernelList(WireStruct, frozen=True):
    server_url: Annotated[str, Meta(description="The server's URL (without credentials).")]
    kernels: list[RemoteKernel] = []
    sessions: list[RemoteSession] = []
    sessions_error: Annotated[
        str | None,
        Meta(
            description=(
                "Why the server's sessions are not listed (Kernel Gateway lists them only "
                "with list_kernels on), if they are not."
            )
        ),
    ] = None


# ---- commands -------------------------------------------------------------------


class ListKernels(CommandBase[KernelList], tag="ListKernels", frozen=True):
    pass


_PROVIDER = Meta(
    description=(
        "Where the kernel runs: local (this machine, in hdspd's sandbox) or gateway (the "
        "Jupyter server of the settings' kernels.gateway, or of the profile's). None: as "
        "the profile's or the settings' kernels.provider says."
    )
)
_PROFILE = Meta(
    description=(
        "The profile whose kernels settings (provider, gateway) apply; the current one by default."
    )
)


class StartKernel(CommandBase[KernelInfo], tag="StartKernel", frozen=True):
    kernel_name: Annotated[
        str | None,
        Meta(
            description=(
                'Kernelspec name; "python3" by default (on a Jupyter server: its '
                "kernels.gateway.kernelName, else the server's default)."
            )
        ),
    ] = None
    cwd: Annotated[
        str | None,
        Meta(
            description=(
                "Working directory of a local kernel, an absolute path (the client's "
                "directory; clients send their own by default). The daemon refuses none, a "
                "relative one, `/`, its user's home itself and its own directories, as for "
                "a workspace. Not used by a kernel on a Jupyter server."
            )
        ),
    ] = None
    provider: Annotated[Literal["local", "gateway"] | None, _PROVIDER] = None
    profile: Annotated[str | None, _PROFILE] = None


class AttachKernel(CommandBase[KernelInfo], tag="AttachKernel", frozen=True):
    """Use a kernel that runs already: a notebook's on this machine, by its
    connection file (from Jupyter's runtime dir), or one a Jupyter server runs,
    by its id there (ListRemoteKernels). Exactly one of the two."""

    connection_file: str | None = None
    remote_kernel_id: Annotated[
        str | None,
        Meta(description="The kernel's id on the Jupyter server (ListRemoteKernels)."),
    ] = None
    profile: Annotated[str | None, _PROFILE] = None


class ListRemoteKernels(CommandBase[RemoteKernelList], tag="ListRemoteKernels", frozen=True):
    """The kernels and sessions of the Jupyter server of the kernels.gateway
    setting (or of the profile's)."""

    profile: Annotated[str | None, _PROFILE] = None


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
    timeout: Annotated[
        float | None,
        Meta(
            description=(
                "Seconds before the kernel is interrupted (and restarted if it does not stop); "
                "the daemon's default when absent."
            )
        ),
    ] = None
