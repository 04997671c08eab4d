"""execute_code: the model runs Python in its task's Jupyter kernel.

The code runs in the kernel bound to the task (started on first use in the
task's workspace, or the one named when the task started). While it runs, every
client sees its outputs in a partial `cell_output` message, updated a few times a
second; the message becomes final (durable) when the code is done. The model gets
text (head and tail of long output, with counts of what was left out), the
result, ANSI-free tracebacks and images.

`input()` in the code becomes a `followup` ask of the task; the answer's text is
what `input()` returns. Cancelling the task interrupts the code (the service
does that, shielded); a time limit interrupts it too, and restarts the kernel if
it does not stop, which the result tells the model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import msgspec

from hdsp.daemon.conversation import TextBlock
from hdsp.daemon.kernels import (
    IMAGE_TYPES,
    Execution,
    KernelDead,
    KernelError,
    KernelService,
    TaskKernel,
)
from hdsp.protocol import Ask, CellOutput, ClineMessage, ExecutionResult, KernelOutput, Say

from .base import Tool, ToolCategory, ToolContext, ToolError, ToolResult
from .kernel_output import render_for_model

__all__ = ["TIMEOUT_PARAMETER", "CodeRun", "ExecuteCodeTool", "kernel_service", "run_code"]

#: Stream text kept per output in a cell_output message (head and tail).
MESSAGE_TEXT_LIMIT = 64 * 1024
#: Outputs kept in a cell_output message (the first and the last).
MESSAGE_MAX_OUTPUTS = 200

#: The `timeout` argument of the tools that run code (`run_code`'s time limit).
TIMEOUT_PARAMETER: Mapping[str, Any] = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": 86400,
    "description": "Seconds before the code is interrupted (default 120).",
}

_encoder = msgspec.json.Encoder()


def kernel_service(ctx: ToolContext) -> KernelService:
    try:
        service: KernelService = ctx.service("kernels")
    except KeyError:
        raise ToolError("This hdsp daemon runs no kernels, so code cannot run here.") from None
    return service


@dataclass
class CodeRun:
    """What running code in the task's kernel gave."""

    kernel: TaskKernel
    result: ExecutionResult
    time_limit: float

    async def model_content(self, *, text_limit: int, max_images: int) -> ToolResult:
        """The tool result for the model: what happened, then the outputs. Images
        are fitted to the model's limits in a worker thread (decoding a big one
        takes a while)."""
        render = functools.partial(self._model_content, text_limit, max_images)
        if any(m in (out.data or {}) for out in self.result.outputs for m in IMAGE_TYPES):
            return await anyio.to_thread.run_sync(render)
        return render()

    def _model_content(self, text_limit: int, max_images: int) -> ToolResult:
        r = self.result
        lines = list(self.kernel.notes)
        match r.status:
            case "timeout":
                lines.append(f"The code ran longer than {self.time_limit:g} s and was interrupted.")
            case "cancelled":
                lines.append("The code was interrupted because the task was cancelled.")
            case "died":
                lines.append(
                    "The kernel died while the code ran; its variables are gone. The next "
                    "execute_code call starts it again."
                )
            case "restarted":
                lines.append("The kernel was restarted while the code ran; its variables are gone.")
        if r.kernel_restarted:
            lines.append(
                "The kernel did not stop when interrupted, so it was restarted: every "
                "variable and import is gone."
            )
        if r.connection_dropped:
            lines.append(
                "The connection to the kernel's Jupyter server dropped while the code ran and "
                "came back: output sent at that moment may be missing below."
            )
        blocks = render_for_model(
            r.outputs,
            text_limit=text_limit,
            max_images=max_images,
            display_updates=r.display_updates,
        )
        first = blocks[0]
        assert isinstance(first, TextBlock)
        body = first.text or ("(no output)" if r.status in ("ok", "error") else "")
        header = f"[execution {r.execution_count or '-'} in kernel {self.kernel.name}: {r.status}]"
        text = "\n".join([header, *lines, body]).rstrip()
        return ToolResult(
            content=[TextBlock(text=text), *blocks[1:]],
            is_error=r.status in ("timeout", "died", "restarted") or r.kernel_restarted,
            summary="\n".join([header, *lines]),  # (the outputs are the cell_output's)
        )


def _cell_text(
    kernel_id: str,
    code: str,
    status: Any,
    ex: Execution | None = None,
    result: ExecutionResult | None = None,
) -> str:
    """The cell_output message's text: outputs so far (long text cut), or the
    result's when no output came while it ran."""
    shown: list[KernelOutput] = []
    omitted = 0
    if ex is not None:
        shown, omitted = ex.outputs.preview(
            text_limit=MESSAGE_TEXT_LIMIT, max_outputs=MESSAGE_MAX_OUTPUTS
        )
    elif result is not None:
        shown = list(result.outputs)
    cell = CellOutput(
        kernel_id=kernel_id,
        code=code,
        status=status,
        execution_id=result.execution_id if result else (ex.id if ex else None),
        execution_count=result.execution_count if result else (ex.execution_count if ex else None),
        outputs=shown,
        omitted=omitted,
        kernel_restarted=result.kernel_restarted if result else False,
    )
    return _encoder.encode(cell).decode()


async def run_code(
    ctx: ToolContext,
    code: str,
    *,
    time_limit: float | None = None,
    on_outputs: Callable[[Execution], None] | None = None,
) -> CodeRun:
    """Run `code` in the task's kernel, streaming its outputs to every client as
    a `cell_output` message, with `input()` asked of the user. `on_outputs` is
    told of each new output too (it must not block: it runs in the kernel's
    output path)."""
    service = kernel_service(ctx)
    try:
        kernel = await service.kernel_for_task(ctx.task_id, ctx.workspace)
    except KernelError as exc:
        raise ToolError(exc.message) from None
    limit = service.default_time_limit if time_limit is None else float(time_limit)
    message: ClineMessage = await ctx.say(
        Say.CELL_OUTPUT, _cell_text(kernel.kernel_id, code, "running", None), partial=True
    )
    live: list[Execution] = []

    async def on_output(ex: Execution, new: Sequence[KernelOutput]) -> None:
        nonlocal message
        if not live:
            live.append(ex)
        if on_outputs is not None:
            on_outputs(ex)
        message = await ctx.update(
            message, text=_cell_text(kernel.kernel_id, code, "running", ex), partial=True
        )

    async def on_input(prompt: str, password: bool) -> str:
        text = prompt or "The code asks for input."
        if password:
            text += " (the answer is not hidden from other clients)"
        answer = await ctx.ask(Ask.FOLLOWUP, text)
        return answer.text or ""

    try:
        result = await service.execute(
            kernel.kernel_id,
            code,
            time_limit=limit,
            on_output=on_output,
            on_input=on_input,
            task_id=ctx.task_id,
        )
    except KernelDead as exc:
        with anyio.move_on_after(5, shield=True):
            await ctx.update(
                message, text=_cell_text(kernel.kernel_id, code, "died", None), partial=False
            )
        raise ToolError(f"{exc.message} Call execute_code again to start it anew.") from None
    except KernelError as exc:
        with anyio.move_on_after(5, shield=True):
            await ctx.update(
                message, text=_cell_text(kernel.kernel_id, code, "died", None), partial=False
            )
        raise ToolError(exc.message) from None
    except BaseException:
        # Cancelled (the service interrupted the kernel already): the message
        # still ends final, with what came.
        with anyio.move_on_after(5, shield=True):
            ex = live[0] if live else None
            await ctx.update(
                message,
                text=_cell_text(kernel.kernel_id, code, "cancelled", ex),
                partial=False,
            )
        raise
    final = _cell_text(kernel.kernel_id, code, result.status, live[0] if live else None, result)
    await ctx.update(message, text=final, partial=False)
    try:
        record = ctx.service("execution_log")
    except KeyError:
        pass
    else:  # the task's execution log, for a restore that replays it (issue 20)
        await record(
            kernel.kernel_id,
            code,
            result.status,
            result.execution_count,
            result.kernel_restarted,
        )
    return CodeRun(kernel=kernel, result=result, time_limit=limit)


class ExecuteCodeTool(Tool):
    name: ClassVar[str] = "execute_code"
    description: ClassVar[str] = (
        "Run Python code in your Jupyter kernel (IPython: magics and `!shell` work). "
        "The kernel keeps its state between calls: variables, imports and loaded data "
        "stay. Its working directory is given in the environment section. You get "
        "stdout and stderr, the value of the last expression, errors with their "
        "traceback, and images (plots) as pictures. Long outputs are cut to their head "
        "and tail, so print summaries (df.head(), df.describe()) rather than whole "
        "datasets. Code that runs longer than the timeout is interrupted. `input()` "
        "asks the user. The kernel runs in a sandbox (unless the user turned it off): "
        "it writes only in the workspace and /tmp, has no network, and cannot see "
        "~/.ssh, ~/.config, keyrings or other credentials."
    )
    parameters: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The Python code to run."},
            "timeout": TIMEOUT_PARAMETER,
        },
        "required": ["code"],
        "additionalProperties": False,
    }
    category: ClassVar[ToolCategory] = ToolCategory.EXECUTE

    def __init__(self, *, text_limit: int = 20_000, max_images: int = 4) -> None:
        self.text_limit = text_limit
        self.max_images = max_images

    async def execute(self, ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        run = await run_code(ctx, str(args["code"]), time_limit=args.get("timeout"))
        return await run.model_content(text_limit=self.text_limit, max_images=self.max_images)
