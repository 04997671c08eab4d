"""One model reply with 800 tool calls (issue 32, hole 5), through the real daemon:
the first `tool_calls.max_per_reply` run, the others get a result telling the
model to ask for them in a later reply, the task goes on to its end, and
another client is answered throughout. (The figures, Ping latency and memory,
are the benchmark's: bench/bench_burst.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from hdsp.client import Client, connect
from hdsp.protocol import Ask, MessageEvent, Say, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.model_requests import tool_results
from tests.support.scripted_turns import done, start

CALLS = 800


def parts(workspace: Path, count: int) -> list[str]:
    """`count` small files on distinct paths; their names."""
    names = []
    for i in range(count):
        name = f"part_{i:04d}.csv"
        (workspace / name).write_text(f"a,b\n{i},{i * 2}\n")
        names.append(name)
    return names


def read_all(names: list[str]) -> Reply:
    return Reply.tool_calls(
        [ToolCall("read_file", json.dumps({"path": n})) for n in names], fragment=4096
    )


async def burst(
    client: Client, pinger: Client, fake: FakeOpenAI, workspace: Path, calls: int
) -> tuple[list[str], list[str], int]:
    """Run a task whose model asks for `calls` reads in one reply while `pinger`
    pings the daemon; the tool results of that reply (in the calls' order), the
    error texts the task said, and the pings answered."""
    first = len(fake.requests)
    fake.script(read_all(parts(workspace, calls)), done())
    task_id, head = await start(client, "read every part", workspace, always_allow_read_only=True)
    answered = 0
    over = anyio.Event()

    async def ping() -> None:
        nonlocal answered
        while not over.is_set():
            await pinger.ping()  # (fails the test if not answered in its 5 s)
            answered += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(ping)
        with anyio.fail_after(120):
            events = await collect_turn(client, task_id, head, until=(TaskCompleted,))
        over.set()
    errors = [
        e.data.payload[0].message.text or ""
        for e in events
        if isinstance(e.data, MessageEvent) and e.data.payload[0].message.say == Say.ERROR
    ]
    asks = [
        e.data.payload[0].message.ask
        for e in events
        if isinstance(e.data, MessageEvent) and e.data.payload[0].message.type == "ask"
    ]
    # Calls the daemon did not run are not the model's mistakes: no ask for guidance.
    assert Ask.MISTAKE_LIMIT_REACHED not in asks
    return tool_results(fake, first + 1), errors, answered


async def test_a_reply_of_800_calls_runs_the_first_64_and_the_daemon_answers_meanwhile(
    client: Client, daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    async with connect(daemon.runtime_dir, name="pinger") as pinger:
        results, errors, answered = await burst(client, pinger, fake_openai, tmp_path, CALLS)
        assert answered > 0
        # Another client connects and is answered once it is over.
        async with connect(daemon.runtime_dir, name="later") as later:
            await later.ping()
    assert len(results) == CALLS  # every tool_use has its tool_result
    for i, text in enumerate(results[:64]):
        assert f"{i},{i * 2}" in text, text
    for text in results[64:]:
        assert "Not run" in text and "ask for them again in a later reply" in text, text
        assert "64" in text and str(CALLS) in text
    assert any("800 tool calls in one reply" in e and "max_per_reply" in e for e in errors)


async def test_the_cap_on_calls_per_reply_is_a_setting(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    daemon_process.data_dir.mkdir(parents=True, exist_ok=True)
    (daemon_process.data_dir / "settings.json").write_text(
        json.dumps(
            {
                "version": 2,
                "tool_calls": {
                    "max_per_reply": 5,
                    "max_concurrent_per_task": 2,
                    "max_concurrent": 3,
                },
            }
        )
    )
    daemon_process.start()
    async with (
        connect(daemon_process.runtime_dir) as client,
        connect(daemon_process.runtime_dir, name="pinger") as pinger,
    ):
        results, _, _ = await burst(client, pinger, fake_openai, tmp_path, 12)
        assert len(results) == 12
        assert all("Not run" not in r for r in results[:5])
        assert all("only the first 5 tool calls" in r for r in results[5:])
        # Changed while the daemon runs, the cap holds for the next reply.
        await client.update_settings({"tool_calls": {"max_per_reply": 3}})
        again = tmp_path / "again"
        again.mkdir()
        results, _, _ = await burst(client, pinger, fake_openai, again, 6)
    assert all("Not run" not in r for r in results[:3])
    assert all("only the first 3 tool calls" in r for r in results[3:])


async def test_calls_waiting_for_approval_hold_no_slot(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """With one slot in the whole daemon, two writes still ask together, and a
    read of the same reply runs while both wait: a wait for a person holds none."""
    daemon_process.data_dir.mkdir(parents=True, exist_ok=True)
    limits = {"max_concurrent_per_task": 1, "max_concurrent": 1}
    (daemon_process.data_dir / "settings.json").write_text(
        json.dumps({"version": 2, "tool_calls": limits})
    )
    daemon_process.start()
    (tmp_path / "data.csv").write_text("x,y\n1,2\n")
    writes = [
        ToolCall("write_to_file", json.dumps({"path": f"{n}.txt", "content": n}))
        for n in ("a", "b")
    ]
    fake_openai.script(
        Reply.tool_calls([*writes, ToolCall("read_file", json.dumps({"path": "data.csv"}))]),
        done(),
    )
    async with connect(daemon_process.runtime_dir) as client:
        task_id, head = await start(
            client, "write two files", tmp_path, always_allow_read_only=True
        )
        read_shown = False
        with anyio.fail_after(60):
            async with client.events(task_id, since_seq=head) as events:
                async for event in events:
                    if not isinstance(event.data, MessageEvent):
                        continue
                    m = event.data.payload[0].message
                    read_shown = read_shown or (
                        m.say == Say.TOOL_RESULT and "x,y" in (m.text or "")
                    )
                    snap = await client.get_task(task_id)
                    waiting = [
                        a
                        for a in snap.messages
                        if a.type == "ask" and a.ask == Ask.TOOL and not a.is_answered
                    ]
                    if len(waiting) == 2 and read_shown:
                        break
        for ask in waiting:
            await client.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
        await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert (tmp_path / "a.txt").read_text() == "a"
    assert (tmp_path / "b.txt").read_text() == "b"
