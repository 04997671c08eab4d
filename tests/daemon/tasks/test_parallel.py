"""The scheduling of one reply's tool calls (hdsp.daemon.tasks.parallel):
independent calls overlap, conflicting ones keep their order, a failing one is
given to `failed` and the others finish."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hdsp.daemon.tasks.parallel import EVERYTHING, Resources, conflicts, run_concurrently
from hdsp.daemon.tasks.turn import CallState

pytestmark = pytest.mark.anyio

PATH_A = Resources(names=frozenset({"path:a"}))
PATH_B = Resources(names=frozenset({"path:b"}))
SHELL = Resources(exclusive=True)
READ = Resources()
BARRIER = Resources(names=frozenset({EVERYTHING}))


def test_what_conflicts() -> None:
    assert conflicts(PATH_A, PATH_A)
    assert not conflicts(PATH_A, PATH_B)
    assert conflicts(SHELL, PATH_A) and conflicts(PATH_B, SHELL)
    assert not conflicts(SHELL, READ) and not conflicts(READ, READ)
    assert conflicts(BARRIER, READ) and conflicts(READ, BARRIER)


def _calls(*names: str) -> list[CallState]:
    return [CallState(id=f"c{i}", name=n, arguments={}) for i, n in enumerate(names)]


async def test_independent_calls_overlap_and_a_failure_disturbs_none() -> None:
    calls = _calls("first", "second", "broken")
    second_started = anyio.Event()
    done: list[str] = []
    failed: list[tuple[str, str]] = []

    async def run(call: CallState) -> None:
        if call.name == "first":
            # Finishes only once the second has started: it never could if the
            # calls ran one after the other.
            await second_started.wait()
        elif call.name == "second":
            second_started.set()
        else:
            raise RuntimeError("boom")
        call.status = "done"
        done.append(call.name)

    async def on_failure(call: CallState, exc: Exception) -> None:
        failed.append((call.name, str(exc)))

    with anyio.fail_after(5):
        await run_concurrently(calls, run, lambda c: READ, on_failure)
    assert sorted(done) == ["first", "second"]
    assert failed == [("broken", "boom")]


async def test_conflicting_calls_keep_their_order() -> None:
    calls = _calls("write a 1", "write b", "write a 2", "shell")
    needs = {
        "write a 1": PATH_A,
        "write b": PATH_B,
        "write a 2": PATH_A,
        "shell": SHELL,
    }
    started: list[str] = []
    release_first = anyio.Event()

    async def run(call: CallState) -> None:
        started.append(call.name)
        if call.name == "write a 1":
            await release_first.wait()
        call.status = "done"

    async def on_failure(call: CallState, exc: Exception) -> None:
        raise AssertionError(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_concurrently, calls, run, lambda c: needs[c.name], on_failure)
        await anyio.wait_all_tasks_blocked()
        # b ran beside the first write to a; the second write to a and the shell
        # command wait for it.
        assert started == ["write a 1", "write b"]
        release_first.set()
    assert started == ["write a 1", "write b", "write a 2", "shell"]


async def test_calls_already_done_are_not_run_again() -> None:
    calls = _calls("done before", "to do")
    calls[0].status = "done"
    ran: list[str] = []

    async def run(call: CallState) -> None:
        ran.append(call.name)

    async def on_failure(call: CallState, exc: Exception) -> None:
        raise AssertionError(exc)

    await run_concurrently(calls, run, lambda c: PATH_A, on_failure)
    assert ran == ["to do"]


_KINDS = {"read": READ, "a": PATH_A, "b": PATH_B, "shell": SHELL, "barrier": BARRIER}


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(_KINDS)), st.integers(min_value=0, max_value=3)),
        min_size=1,
        max_size=12,
    )
)
def test_every_conflicting_pair_keeps_its_order(plan: list[tuple[str, int]]) -> None:
    """Whatever the mix, a call starts only after every earlier call it conflicts
    with has finished (the scheduler checks reads against barriers alone)."""
    calls = _calls(*(kind for kind, _ in plan))
    steps = {c.id: pause for c, (_, pause) in zip(calls, plan, strict=True)}
    log: list[tuple[str, str]] = []

    async def run(call: CallState) -> None:
        log.append(("start", call.id))
        for _ in range(steps[call.id]):
            await anyio.lowlevel.checkpoint()
        log.append(("end", call.id))
        call.status = "done"

    async def on_failure(call: CallState, exc: Exception) -> None:
        raise AssertionError(exc)

    anyio.run(run_concurrently, calls, run, lambda c: _KINDS[c.name], on_failure)
    at = {event: i for i, event in enumerate(log)}
    for i, first in enumerate(calls):
        for later in calls[i + 1 :]:
            if conflicts(_KINDS[first.name], _KINDS[later.name]):
                assert at[("end", first.id)] < at[("start", later.id)]
