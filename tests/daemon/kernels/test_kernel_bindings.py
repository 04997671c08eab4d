"""TaskBindings: which kernel runs each task's code, and what a task is told
about its kernel. Pure state and two callbacks: no kernel, no daemon."""

from __future__ import annotations

from hdsp.daemon.kernels.bindings import MAX_NOTES, TaskBindings


def test_a_task_runs_in_one_kernel_and_a_kernel_serves_many() -> None:
    b = TaskBindings()
    b.bind("t1", "k1")
    b.bind("t2", "k1")
    assert b.tasks_of("k1") == {"t1", "t2"}
    b.bind("t1", "k2")  # rebinding moves the task
    assert (b.kernel_of("t1"), b.tasks_of("k1"), b.tasks_of("k2")) == ("k2", {"t2"}, {"t1"})
    assert b.unbind("t2") == "k1" and b.tasks_of("k1") == frozenset()
    assert b.unbind("t2") is None and b.kernel_of("t2") is None


def test_a_binding_is_restored_as_it_was_when_its_kernel_fails_to_start() -> None:
    b = TaskBindings()
    assert b.bind("t", "k1") is None
    previous = b.bind("t", "k2")
    b.restore("t", previous)
    assert (b.kernel_of("t"), b.tasks_of("k1"), b.tasks_of("k2")) == ("k1", {"t"}, frozenset())
    previous = b.bind("new", "k3")
    b.restore("new", previous)
    assert b.kernel_of("new") is None and b.tasks_of("k3") == frozenset()


def test_a_gone_kernel_keeps_its_tasks_bound_so_they_learn_of_it() -> None:
    b = TaskBindings()
    b.bind("t", "k")
    b.kernel_gone("k")
    assert b.kernel_of("t") == "k" and b.tasks_of("k") == frozenset()
    b.bind("t", "k2")
    assert b.tasks_of("k2") == {"t"}


def test_notes_skip_the_task_that_saw_it_are_bounded_and_given_once() -> None:
    b = TaskBindings()
    b.bind("running", "k")
    b.bind("away", "k")
    for n in range(MAX_NOTES + 3):
        b.note("k", f"restart {n}", except_task="running")
    assert b.take_notes("running") == []
    assert b.take_notes("away") == [f"restart {n}" for n in range(MAX_NOTES)]
    assert b.take_notes("away") == []


async def test_culling_replaces_the_notes_and_tells_every_task() -> None:
    told: list[tuple[str, str]] = []

    async def on_culled(task_id: str, note: str) -> None:
        if task_id == "broken":
            raise RuntimeError("the task store is gone")
        told.append((task_id, note))

    b = TaskBindings(task_busy={"b"}.__contains__, on_culled=on_culled)
    for task in ("a", "b", "broken"):
        b.bind(task, "k")
    assert b.any_busy("k") and not b.any_busy("other")
    b.note("k", "restarted")
    tasks = await b.culled("k", "culled")
    # One task's failure to record it does not keep it from the others.
    assert tasks == ["a", "b", "broken"] and told == [("a", "culled"), ("b", "culled")]
    assert b.take_notes("a") == ["culled"]


def test_without_callbacks_no_task_is_busy() -> None:
    b = TaskBindings()
    b.bind("t", "k")
    assert not b.any_busy("k")
