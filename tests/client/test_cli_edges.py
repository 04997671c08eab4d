"""Rough edges of the CLI (issue 33), each as a user meets it: the real `hdsp`
against a real `hdspd` with the scripted model, on a terminal (a pty) where
the edge is about one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from hdsp.client import Client
from hdsp.client.errors import CommandFailed
from hdsp.client.exit_codes import ExitCode
from hdsp.client.sync import connect
from hdsp.daemon.llm.demo import DEMO_NOTE, demo_tool_call
from hdsp.protocol import MAX_PROMPT_BYTES, ErrorCode, TaskAborted, TaskIdle, TaskState
from tests.client.test_cli_pty import lead_calls_a_writer, write_call
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import cli_env, run_hdsp, run_hdsp_sync
from tests.support.cli_pty import PROMPT, chat_at_prompt, finish, say, spawn
from tests.support.daemon_process import DaemonProcess
from tests.support.events import ENDINGS, collect_turn


def refused() -> FakeReply:
    """A request the model server refuses for good (not retried by itself)."""
    return FakeReply.status(400, "The request is not valid.")


def hdsp(daemon: DaemonProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """`hdsp ARGS` off a terminal, from a test that is not async."""
    return run_hdsp_sync(cli_env(daemon.runtime_dir), *args)


async def until(client: Client, task_id: str, since: int, kinds: tuple[type, ...]) -> type:
    with anyio.fail_after(30):
        return type((await collect_turn(client, task_id, since, until=kinds))[-1].data)


# ---- the failed request's ask ---------------------------------------------------


async def test_answering_no_to_a_failed_request_stops_retrying(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(refused(), refused(), refused())
    head = (await client.status()).head_seq
    task_id = (await client.start_task("hello", workspace=tmp_path)).task_id
    await until(client, task_id, head, (TaskIdle,))
    assert (await client.get_task(task_id)).pending_ask.ask == "api_req_failed"  # type: ignore[union-attr]

    head = (await client.status()).head_seq
    r = await run_hdsp(daemon.runtime_dir, "answer", task_id[:8], "--no")
    assert r.returncode == ExitCode.OK, r.stderr
    assert await until(client, task_id, head, (TaskAborted, TaskIdle)) is TaskAborted
    snap = await client.get_task(task_id)
    assert snap.pending_ask is None and snap.state == TaskState.ABORTED
    assert len(fake_openai.requests) == 1  # not one request more


async def test_run_off_a_terminal_exits_4_at_the_retry_ask_and_status_agrees_with_tasks(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(refused(), FakeReply.text("second time lucky"))
    r = await run_hdsp(daemon.runtime_dir, "run", "--workspace", str(tmp_path), "hello")
    assert r.returncode == ExitCode.WAITING, r.stderr
    assert "--yes` retries it, --no ends the turn" in r.stderr
    (item,) = (await client.list_tasks()).tasks
    r = await run_hdsp(daemon.runtime_dir, "tasks")
    assert f"{item.id[:8]}  #1    idle " in r.stdout
    status = await client.status()
    assert status.tasks_running == 0  # not working: it waits, as `hdsp tasks` says

    head = (await client.status()).head_seq
    r = await run_hdsp(daemon.runtime_dir, "answer", item.id[:8], "--yes")
    assert r.returncode == ExitCode.OK, r.stderr
    await until(client, item.id, head, ENDINGS)
    r = await run_hdsp(daemon.runtime_dir, "show", item.id[:8])
    assert "second time lucky" in r.stdout


# ---- an agent's ask, off a terminal ---------------------------------------------


async def test_run_off_a_terminal_exits_4_when_an_agent_it_calls_waits_on_an_approval(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    for name, groups in (("lead", "read,agents"), ("writer", "read,edit")):
        r = await run_hdsp(
            daemon.runtime_dir, "agent", "add", name, f"The {name}.", "--groups", groups
        )
        assert r.returncode == ExitCode.OK, r.stderr
    fake_openai.responder = lead_calls_a_writer
    args = ("run", "--agent", "lead", "--auto-approve", "subtasks", "--workspace", str(tmp_path))
    r = await run_hdsp(daemon.runtime_dir, *args, "Write a.txt")
    assert r.returncode == ExitCode.WAITING, r.stderr
    assert "The agent writer (task " in r.stderr and "waits for an answer" in r.stderr
    # The same with --json: NDJSON events, then exit 4.
    r = await run_hdsp(daemon.runtime_dir, "--json", *args, "Write a.txt again")
    assert r.returncode == ExitCode.WAITING, r.stderr
    assert all(json.loads(line) for line in r.stdout.splitlines())
    assert not (tmp_path / "a.txt").exists()


# ---- on a terminal: chat's Ctrl-C, and a daemon that stops at a prompt ---------


@pytest.mark.timeout(180)
def test_chat_ctrl_c_at_an_approval_prompt_cancels_the_turn_and_stays(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(write_call("n.txt"), FakeReply.text("still here"))
    child = chat_at_prompt(daemon, "--workspace", str(tmp_path))
    say(child, "write n.txt", "[y]es")
    child.sendintr()
    child.expect_exact("nothing was approved")
    child.expect_exact(PROMPT)
    with connect(daemon.runtime_dir, name="test") as client:
        (item,) = client.list_tasks().tasks
        assert item.state == TaskState.ABORTED
    assert not (tmp_path / "n.txt").exists()
    say(child, "go on", "still here", PROMPT)  # the chat goes on with the same task
    child.sendeof()
    assert finish(child) == ExitCode.OK


@pytest.mark.timeout(180)
def test_a_daemon_stopped_at_a_prompt_is_followed_by_advice_that_works(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(write_call("n.txt"), FakeReply.text("done"))
    child = spawn(daemon, "run", "--workspace", str(tmp_path), "write n.txt")
    child.expect_exact("[y]es")
    assert hdsp(daemon, "daemon", "stop").returncode == ExitCode.OK
    child.expect_exact("the ask waits again once hdspd is back")
    assert finish(child) == ExitCode.FAILED
    said = str(child.before)
    assert "hdsp resume" not in said
    daemon.wait()
    daemon.start()
    with connect(daemon.runtime_dir, name="test") as client:
        (item,) = client.list_tasks().tasks
    assert hdsp(daemon, "answer", item.id[:8], "--yes").returncode == ExitCode.OK
    assert hdsp(daemon, "attach", item.id[:8]).returncode == ExitCode.OK  # it completed
    assert (tmp_path / "n.txt").read_text() == "a note\n"


# ---- prompts: from stdin or a file, their size limit, folded in `show` ----------


async def test_run_takes_the_prompt_from_stdin_or_a_file(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("one"), FakeReply.text("two"), FakeReply.text("three"))
    where = ("--workspace", str(tmp_path))
    r = await run_hdsp(daemon.runtime_dir, "run", *where, "-", stdin="from 'stdin'\nline 2\n")
    assert r.returncode == ExitCode.OK, r.stderr
    (prompt_file := tmp_path / "prompt.txt").write_text("from a file: $HOME `x`\n")
    r = await run_hdsp(daemon.runtime_dir, "run", *where, "--file", str(prompt_file))
    assert r.returncode == ExitCode.OK, r.stderr
    titles = [t.task for t in (await client.list_tasks()).tasks]
    assert titles == ["from a file: $HOME `x`", "from 'stdin'\nline 2"]
    # `send` too.
    last = (await client.list_tasks()).tasks[0].id
    r = await run_hdsp(daemon.runtime_dir, "send", last[:8], "-", stdin="more")
    assert r.returncode == ExitCode.OK, r.stderr
    assert "> more" in r.stdout

    for args, said in (
        (("--file", str(tmp_path / "missing.txt")), "Cannot read the prompt from "),
        (("--file", str(prompt_file), "also this"), "Give the prompt once"),
        ((), "No prompt: give it as an argument, as - (stdin) or with --file PATH."),
    ):
        r = await run_hdsp(daemon.runtime_dir, "run", *where, *args)
        assert r.returncode == ExitCode.USAGE and said in r.stderr, r.stderr
    (binary := tmp_path / "b.bin").write_bytes(b"\xff\xfe\x00")
    r = await run_hdsp(daemon.runtime_dir, "run", *where, "--file", str(binary))
    assert r.returncode == ExitCode.USAGE and "is not UTF-8 text" in r.stderr
    assert len((await client.list_tasks()).tasks) == 2


async def test_a_prompt_past_the_limit_is_refused_by_the_daemon_naming_the_model_context(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    huge = "x" * 10_000_000
    with pytest.raises(CommandFailed) as refused:
        await client.start_task(huge, workspace=tmp_path)
    message = refused.value.message
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert "The prompt is 10.0 MB" in message and "up to 1 MiB (1,048,576 bytes)" in message
    assert "gpt-test reads at most 128,000 tokens" in message
    assert (await client.list_tasks()).tasks == [] and fake_openai.requests == []

    # Through the CLI (a file), and for a message sent to a task: the same.
    (big := tmp_path / "big.txt").write_text(huge[: MAX_PROMPT_BYTES + 1])
    r = await run_hdsp(daemon.runtime_dir, "run", "--workspace", str(tmp_path), "--file", str(big))
    assert r.returncode == ExitCode.USAGE and "hdsp takes prompts of up to 1 MiB" in r.stderr
    fake_openai.script(FakeReply.text("fine"))
    head = (await client.status()).head_seq
    task_id = (await client.start_task("x" * MAX_PROMPT_BYTES, workspace=tmp_path)).task_id
    await until(client, task_id, head, ENDINGS)
    with pytest.raises(CommandFailed) as refused:
        await client.send_message(task_id, "é" * MAX_PROMPT_BYTES)
    assert "128,000 tokens" in refused.value.message
    assert len(fake_openai.requests) == 1


async def test_show_folds_a_long_prompt_and_full_shows_it_whole(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("read it"))
    prompt = "start " + "y" * 200_000 + " end"
    head = (await client.status()).head_seq
    task_id = (await client.start_task(prompt, workspace=tmp_path)).task_id
    await until(client, task_id, head, ENDINGS)
    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:8])
    assert r.returncode == ExitCode.OK, r.stderr
    assert len(r.stdout) < 5000
    assert "> start yyy" in r.stdout and "yyy end" in r.stdout
    assert "[... 197,510 more characters; --full shows them ...]" in r.stdout
    r = await run_hdsp(daemon.runtime_dir, "show", task_id[:8], "--full")
    assert prompt in r.stdout


# ---- what commands say, and how it lines up ---------------------------------------


def test_the_demo_model_never_offers_to_overwrite_a_file_the_prompt_reads() -> None:
    tools = [{"function": {"name": "write_to_file"}}]

    def path(text: str) -> str | None:
        call = demo_tool_call({"tools": tools, "messages": [{"role": "user", "content": text}]})
        return None if call is None else json.loads(call[1])["path"]

    assert path("Load sales.csv and tell me which region grew fastest") == DEMO_NOTE
    assert path("Summarise notes.md") == DEMO_NOTE
    assert path("Write a short note about this project to notes.md") == "notes.md"
    assert path("Write a summary of notes.md to summary.md") == "summary.md"
    assert path("Say hello") is None


async def test_the_demo_run_on_a_data_file_asks_to_write_its_own_note(
    daemon: DaemonProcess, client: Client, tmp_path: Path
) -> None:
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,10\n")
    args = ("run", "--profile", "demo", "--workspace", str(tmp_path))
    r = await run_hdsp(daemon.runtime_dir, *args, "Load sales.csv and tell me which region grew")
    assert r.returncode == ExitCode.WAITING, r.stderr
    r = await run_hdsp(daemon.runtime_dir, "asks")
    assert f"write_to_file {DEMO_NOTE}" in r.stdout and "sales.csv  " not in r.stdout, r.stdout
    (item,) = (await client.list_tasks()).tasks
    head = (await client.status()).head_seq
    r = await run_hdsp(daemon.runtime_dir, "answer", item.id[:8], "--yes")
    assert r.returncode == ExitCode.OK, r.stderr
    await until(client, item.id, head, ENDINGS)
    assert (tmp_path / "sales.csv").read_text() == "region,amount\nnorth,10\n"
    assert "demo model" in (tmp_path / DEMO_NOTE).read_text()


async def test_cancel_of_a_completed_task_says_nothing_ran(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    fake_openai.script(FakeReply.text("done"))
    r = await run_hdsp(daemon.runtime_dir, "run", "--workspace", str(tmp_path), "hi")
    assert r.returncode == ExitCode.OK, r.stderr
    (item,) = (await client.list_tasks()).tasks
    r = await run_hdsp(daemon.runtime_dir, "cancel", item.id[:8])
    assert r.returncode == ExitCode.OK, r.stderr
    assert f"{item.id}: completed; it had completed, nothing ran, the task stays open" in r.stdout
    assert "stopped" not in r.stdout


async def test_secret_rm_of_a_secret_that_is_not_there_says_so(
    daemon: DaemonProcess, client: Client
) -> None:
    r = await run_hdsp(daemon.runtime_dir, "secret", "rm", "nosuch")
    assert r.returncode == ExitCode.USAGE, r.stdout
    assert "No secret 'nosuch' in the keyring; nothing was removed" in r.stderr
    assert "removed" not in r.stdout
    r = await run_hdsp(daemon.runtime_dir, "secret", "set", "there", stdin="v\n")
    assert r.returncode == ExitCode.OK, r.stderr
    r = await run_hdsp(daemon.runtime_dir, "secret", "rm", "there")
    assert r.returncode == ExitCode.OK and "secret there removed" in r.stdout, r.stderr


async def test_profile_list_and_asks_line_up_their_columns(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    for name, model in (("a-rather-long-profile-name", "m"), ("w", "a-long-model-name-here")):
        r = await run_hdsp(
            daemon.runtime_dir,
            *("profile", "add", name, "--provider", "openai", "--model", model),
            *("--secret", "k"),
        )
        assert r.returncode == ExitCode.OK, r.stderr
    r = await run_hdsp(daemon.runtime_dir, "profile", "list")
    lines = r.stdout.splitlines()[:4]
    assert len(lines) == 4 and len({line.index("[") for line in lines}) == 1, r.stdout

    fake_openai.script(write_call("a.txt"), refused())
    where = ("run", "--workspace", str(tmp_path))
    assert (await run_hdsp(daemon.runtime_dir, *where, "one")).returncode == ExitCode.WAITING
    assert (await run_hdsp(daemon.runtime_dir, *where, "two")).returncode == ExitCode.WAITING
    r = await run_hdsp(daemon.runtime_dir, "asks")
    lines = r.stdout.splitlines()[:2]
    assert {line.split()[1] for line in lines} == {"tool", "api_req_failed"}, r.stdout
    assert len({line.rindex(" [") for line in lines}) == 1, r.stdout
    assert len({line.index(line.split()[2]) for line in lines}) == 1, r.stdout


async def test_tasks_limit_has_its_help(tmp_path: Path) -> None:
    r = await run_hdsp(tmp_path, "tasks", "--help")
    assert r.returncode == ExitCode.OK
    assert "--limit LIMIT" in r.stdout and "list this many, 1 to 1000 (default: 20)" in r.stdout


async def test_kernels_shutdown_of_a_kernel_hdsp_started_says_shut_down(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    r = await run_hdsp(daemon.runtime_dir, "--json", "kernels", "start", "--cwd", str(tmp_path))
    assert r.returncode == ExitCode.OK, r.stderr
    kernel_id = json.loads(r.stdout)["kernelId"]
    r = await run_hdsp(daemon.runtime_dir, "kernels", "shutdown", kernel_id[:8])
    assert r.returncode == ExitCode.OK, r.stderr
    assert r.stdout.startswith(f"{kernel_id}: shut down; now ") and "attached" not in r.stdout
