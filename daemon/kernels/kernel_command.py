"""The command line of an ipykernel hdsp starts: its output queue unbounded.

ipykernel publishes outputs on a PUB socket whose queue holds 1,000 messages
(ZeroMQ's default); what does not fit is dropped, and silently: the protocol
has no sequence numbers. The daemon's subscription queues deep
(:data:`.connection.IOPUB_QUEUE`), but when the daemon's ZeroMQ I/O thread is
starved (a loaded machine) it stops taking messages off the wire, and a kernel
printing line by line fills its own queue in a moment: the rest of the output,
and the idle status that ends the execution, were lost.

So a kernel started by the standard launcher (`python -m ipykernel_launcher`)
is started by a few lines that give its iopub socket an unbounded queue (a
string run with `-c`: nothing of hdsp needs to be importable in the kernel's
Python). The queue lives in the kernel process, the user's own code's process:
it holds what that code printed and the daemon has not read yet, no more than
the code could have kept in memory itself, and it drains as soon as the daemon
reads again. Losing the output instead would be worse. Any other kernel command
is left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["KERNEL_MAIN", "with_unbounded_iopub"]

#: What `python -m ipykernel_launcher` does, with an iopub socket that drops nothing.
KERNEL_MAIN = """\
import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]
import zmq
from ipykernel import kernelapp
init_iopub = getattr(kernelapp.IPKernelApp, "init_iopub", None)
if init_iopub is not None:
    def unbounded_init_iopub(self, context):
        context.setsockopt(zmq.SNDHWM, 0)
        try:
            init_iopub(self, context)
        finally:
            context.sockopts.pop(zmq.SNDHWM, None)
    kernelapp.IPKernelApp.init_iopub = unbounded_init_iopub
kernelapp.launch_new_instance()
"""

_LAUNCHERS = ("ipykernel_launcher", "ipykernel")


def with_unbounded_iopub(argv: Sequence[str]) -> list[str]:
    """`argv` with `-m ipykernel_launcher` replaced by :data:`KERNEL_MAIN`."""
    command = list(argv)
    for i in range(1, len(command) - 1):
        if command[i] == "-m" and command[i + 1] in _LAUNCHERS:
            return [*command[:i], "-c", KERNEL_MAIN, *command[i + 2 :]]
        if not command[i].startswith("-"):
            break  # a script, or the module's own arguments: not the launcher
    return command
