"""What every kind of kernel (local, or on a kernel server) must do: checks the
tests of each kind run on a kernel of theirs; and code left executing while a
test does something else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from hdsp.daemon.kernels import KernelService
from hdsp.protocol import ExecutionResult
from tests.support.kernel_helpers import Collected

__all__ = [
    "Executing",
    "check_a_loop_is_interrupted_at_its_time_limit",
    "check_input_is_answered_by_the_callback",
    "executing",
]


@dataclass
class Executing:
    """An execution in a task of its own: its outputs so far, its result once it
    ended (`results`: none or one), and the scope that cancels it."""

    output: Collected
    scope: anyio.CancelScope
    results: list[ExecutionResult] = field(default_factory=list)


@asynccontextmanager
async def executing(svc: KernelService, kernel_id: str, code: str) -> AsyncIterator[Executing]:
    """`code` executing on `kernel_id` in a task of its own, once its first output
    has come; the end of the block waits for the execution to end."""
    output = Collected()
    async with anyio.create_task_group() as tg:
        run = Executing(output, tg.cancel_scope)

        async def execute() -> None:
            run.results.append(await svc.execute(kernel_id, code, on_output=output))

        tg.start_soon(execute)
        await output.first.wait()
        yield run


async def check_input_is_answered_by_the_callback(svc: KernelService, kernel_id: str) -> None:
    """Code that reads input gets the callback's answer; without a callback it
    cannot read input, and says so."""
    prompts: list[tuple[str, bool]] = []

    async def answer(prompt: str, password: bool) -> str:
        prompts.append((prompt, password))
        return "Ada"

    r = await svc.execute(
        kernel_id, "name = input('Your name? ')\nprint('hello', name)", on_input=answer
    )
    no_input = await svc.execute(kernel_id, "input()")
    assert prompts == [("Your name? ", False)]
    assert r.outputs[-1].text == "hello Ada\n"
    assert no_input.status == "error" and no_input.outputs[-1].ename == "StdinNotImplementedError"


async def check_a_loop_is_interrupted_at_its_time_limit(svc: KernelService, kernel_id: str) -> None:
    """Code that runs past its time limit is interrupted, and the kernel keeps
    its state (it was not restarted)."""
    await svc.execute(kernel_id, "x = 41")
    r = await svc.execute(kernel_id, "while True:\n    pass", time_limit=1)
    assert (r.status, r.kernel_restarted) == ("timeout", False)
    assert r.outputs[-1].ename == "KeyboardInterrupt"
    after = await svc.execute(kernel_id, "x + 1")
    assert after.outputs[0].data == {"text/plain": "42"}  # interrupted, not restarted
