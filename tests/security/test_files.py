"""Confinement and privacy through the real daemon: a scripted model names files
that are not UTF-8, paths with NUL bytes and protected notebooks; the daemon
stays up, the model gets tool errors, a person is asked; the data dir, the
database and what the agent creates get the modes they should."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client, connect
from hdsp.protocol import Ask, TaskCompleted
from tests.fakes.openai_server import FakeOpenAI
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.model_requests import tool_results
from tests.support.scripted_turns import call, done, next_ask, start


def write_raw(path: bytes, data: bytes) -> None:
    """Write a file whose name is given as bytes (it may not be UTF-8)."""
    with open(path, "wb") as f:
        f.write(data)


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_077() -> Iterator[None]:
    """The test process's umask, which a daemon started now inherits, is 077."""
    saved = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(saved)


async def test_a_name_that_is_not_utf8_is_shown_escaped_and_can_be_read(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    write_raw(os.fsencode(workspace) + b"/report\xff.csv", b"region,amount\nnorth,\xe9\n")
    fake_openai.script(
        call("list_files", path="."),
        call("search_files", regex="north"),
        call("read_file", path="report\\xff.csv"),
        done("read it"),
    )
    task_id, head = await start(client, "look", workspace)
    events = await collect_turn(client, task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    assert "report\\xff.csv" in tool_results(fake_openai, 1)[-1]
    assert "report\\xff.csv" in tool_results(fake_openai, 2)[-1]
    read = tool_results(fake_openai, 3)[-1]
    assert "north," in read and "Error" not in read
    assert daemon.proc is not None and daemon.proc.poll() is None
    await client.status()  # still answering


async def test_text_that_is_not_unicode_in_a_notebook_cannot_stop_the_daemon(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    # JSON may escape a lone surrogate, which no encoder of the daemon accepts.
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {"cell_type": "markdown", "id": "a1", "metadata": {}, "source": "bad \udcff here"}
        ],
    }
    (workspace / "odd.ipynb").write_text(json.dumps(notebook))
    fake_openai.script(
        call("read_notebook", path="odd.ipynb"),
        call("insert_cell", path="odd.ipynb", source="print(2)"),
        done("read it"),
    )
    task_id, head = await start(client, "look", workspace, always_allow_write=True)
    events = await collect_turn(client, task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    assert "bad \\xff here" in tool_results(fake_openai, 1)[-1]
    assert "Inserted" in tool_results(fake_openai, 2)[-1]
    saved = json.loads((workspace / "odd.ipynb").read_text())
    assert "".join(saved["cells"][0]["source"]) == "bad \udcff here"
    assert len(saved["cells"]) == 2
    assert daemon.proc is not None and daemon.proc.poll() is None


async def test_a_nul_byte_in_a_path_is_a_tool_error_and_the_task_goes_on(
    daemon: DaemonProcess, client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    fake_openai.script(
        call("read_file", path="data\x00.csv"),
        call("write_to_file", path="out\x00.txt", content="x"),
        call("read_file", path="data.csv"),
        done("went on"),
    )
    task_id, head = await start(client, "nul", workspace, always_allow_write=True)
    events = await collect_turn(client, task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    assert "NUL" in tool_results(fake_openai, 1)[-1]
    assert "NUL" in tool_results(fake_openai, 2)[-1]
    assert "1,2" in tool_results(fake_openai, 3)[-1]
    assert names_in(workspace) == ["data.csv"]
    assert daemon.proc is not None and daemon.proc.poll() is None


async def test_a_notebook_in_git_asks_even_when_writes_are_allowed(
    client: Client, fake_openai: FakeOpenAI, workspace: Path
) -> None:
    (workspace / ".git").mkdir()
    fake_openai.script(call("insert_cell", path=".git/x.ipynb", source="print(1)"), done())
    task_id, head = await start(client, "notebook", workspace, always_allow_write=True)
    with anyio.fail_after(30):  # without the ask, the task would just complete
        ask = await next_ask(client, task_id, head)
    assert ask.ask == Ask.TOOL and ask.is_protected
    await client.respond_to_ask(task_id, ask.ts, "noButtonClicked")
    await collect_turn(client, task_id, head, until=(TaskCompleted,))
    assert not (workspace / ".git" / "x.ipynb").exists()
    assert "denied" in tool_results(fake_openai, 1)[-1]


async def test_a_fresh_data_dir_and_its_database_are_private(
    daemon_process: DaemonProcess,
) -> None:
    saved = os.umask(0o022)
    try:
        daemon_process.start()
    finally:
        os.umask(saved)
    async with connect(daemon_process.runtime_dir) as client:
        await client.status()
        data = daemon_process.data_dir
        assert _mode(data) == 0o700
        files = [p for p in data.iterdir() if p.name.startswith("hdsp.sqlite3")]
        assert {p.name for p in files} >= {"hdsp.sqlite3", "hdsp.sqlite3-wal"}
        for path in files:
            assert _mode(path) == 0o600, path.name


async def test_an_open_data_dir_is_tightened_and_new_files_follow_the_umask(
    daemon_process: DaemonProcess, fake_openai: FakeOpenAI, workspace: Path, umask_077: None
) -> None:
    daemon_process.data_dir.mkdir()
    os.chmod(daemon_process.data_dir, 0o755)
    daemon_process.start()
    assert _mode(daemon_process.data_dir) == 0o700
    assert "data dir made private" in daemon_process.stderr()
    fake_openai.script(
        call("write_to_file", path="out/new.txt", content="x\n"),
        call("insert_cell", path="new.ipynb", source="1"),
        done(),
    )
    async with connect(daemon_process.runtime_dir) as client:
        task_id, head = await start(client, "create", workspace, always_allow_write=True)
        events = await collect_turn(client, task_id, head)
    assert isinstance(events[-1].data, TaskCompleted)
    assert _mode(workspace / "out" / "new.txt") == 0o600
    assert _mode(workspace / "new.ipynb") == 0o600
    assert _mode(workspace / "out") == 0o700
