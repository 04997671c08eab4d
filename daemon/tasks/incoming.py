"""What a person sends a task (a message, an answer to an ask), made ready for
it: the notebook context it came with checked against the task's workspace and
its kernel bound to the task, and an answer with the block the model reads of
that context (:mod:`.notebook_context`)."""

from __future__ import annotations

from pathlib import Path

from hdsp.daemon.kernels import KernelNotFound
from hdsp.daemon.tools import AskAnswer
from hdsp.protocol import AskResponse, PromptContext

from .deps import TaskKernels
from .notebook_context import context_block, resolve_context

__all__ = ["answer_with_context", "bound_context"]


async def bound_context(
    context: PromptContext, task_id: str, workspace: Path, kernels: TaskKernels | None
) -> PromptContext | None:
    """A message's context checked against the task's workspace (an outline read
    from the file if it came without one, see `resolve_context`); the task's code
    runs in the kernel the context names from now on."""
    resolved = await resolve_context(context, workspace)
    kernel_id = resolved.kernel_id if resolved else None
    if kernel_id is not None:
        if kernels is None or not kernels.has_kernel(kernel_id):
            raise KernelNotFound(
                f"No kernel {kernel_id!r}; ListKernels lists the kernels.",
            )
        kernels.bind_task(task_id, kernel_id)
    return resolved


def answer_with_context(
    response: AskResponse,
    text: str | None,
    images: list[str] | None,
    context: PromptContext | None,
    by: str | None,
    sender: str | None,
) -> AskAnswer:
    """A person's answer to an ask, with the notebook context it came with
    (`context`, checked already) and the block the model reads of it."""
    return AskAnswer(
        response,
        text,
        list(images or []),
        by=by,
        context=context,
        context_block=None if context is None else context_block(context),
        sent_by=sender,
    )
