"""What every kind of kernel (local, or on a kernel server) must do: checks the
tests of each kind run on a kernel of theirs."""

from __future__ import annotations

from hdsp.daemon.kernels import KernelService

__all__ = [
    "check_a_loop_is_interrupted_at_its_time_limit",
    "check_input_is_answered_by_the_callback",
]


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
