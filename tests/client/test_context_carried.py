"""The prompt context (issue 17) goes with every message of the user's, not only
StartNewTask and SendMessage: an answer in words to a followup question
(RespondToAsk, or a SendMessage that answers the waiting ask) and an edited
message (EditMessage) carry it to the model and keep it on the user's message;
`hdsp chat --notebook/--cell` sends it with each message, as `hdsp run/send` do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hdsp.client import connect
from hdsp.protocol import ActiveCell, PromptContext, TaskInteractive
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_pty import PROMPT, chat_at_prompt, finish, say, spawn
from tests.support.daemon_process import DaemonProcess
from tests.support.scripted_turns import call

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


#: A cell's id in the context's JSON, as json.dumps of the content shows it.
PLOT = '\\"id\\":\\"plot\\"'
LOAD = '\\"id\\":\\"load\\"'


@pytest.fixture
def ws(workspace: Path) -> Path:
    cells = [
        {"cell_type": "code", "id": "load", "metadata": {}, "execution_count": None,
         "source": "df = load()", "outputs": []},
        {"cell_type": "code", "id": "plot", "metadata": {}, "execution_count": None,
         "source": "df.plot()", "outputs": []},
    ]  # fmt: skip
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (workspace / "sales.ipynb").write_text(json.dumps(nb))
    return workspace


def context(ws: Path, cell: int) -> PromptContext:
    return PromptContext(
        notebook=str(ws / "sales.ipynb"), cell=ActiveCell(index=cell), outline_from_file=True
    )


def tool_result(fake: FakeOpenAI, request: int) -> str:
    messages = fake.requests[request]["messages"]
    return json.dumps([m["content"] for m in messages if m["role"] == "tool"][-1])


def last_user(fake: FakeOpenAI, request: int) -> str:
    return json.dumps([m for m in fake.requests[request]["messages"] if m["role"] == "user"][-1])


async def wait_interactive(client: Any, task_id: str, since: int) -> int:
    """Until the task waits on an ask; the ask's ts."""
    async with client.events(task_id, since_seq=since) as events:
        async for event in events:
            if isinstance(event.data, TaskInteractive):
                break
    snapshot = await client.get_task(task_id)
    assert snapshot.pending_ask is not None
    return int(snapshot.pending_ask.ts)


async def test_a_followup_answer_and_an_edited_message_carry_their_context(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, ws: Path
) -> None:
    question = call("ask_followup_question", question="Which cell?", suggestions=["the plot"])
    fake_openai.script(
        question,
        FakeReply.text("ok, the plot"),
        question,
        FakeReply.text("the plot again"),
        FakeReply.text("edited"),
    )
    async with connect(daemon.runtime_dir) as client:
        head = (await client.status()).head_seq
        ref = await client.start_task("fix my notebook", workspace=str(ws))
        ask = await wait_interactive(client, ref.task_id, head)

        # An answer in words (RespondToAsk) about cell 1.
        head = (await client.status()).head_seq
        await client.respond_to_ask(
            ref.task_id, ask, "messageResponse", "this one", context=context(ws, 1)
        )
        fake_openai.wait_for_requests(2, timeout=60)
        result = tool_result(fake_openai, 1)
        assert "notebook_context" in result and PLOT in result, result
        assert result.index("notebook_context") < result.index("this one")

        # A SendMessage that answers the waiting ask carries its context too.
        await client.send_message(ref.task_id, "again")
        ask = await wait_interactive(client, ref.task_id, head)
        await client.send_message(ref.task_id, "that one", context=context(ws, 0))
        fake_openai.wait_for_requests(4, timeout=60)
        result = tool_result(fake_openai, 3)
        assert LOAD in result and "that one" in result, result

        snapshot = await client.get_task(ref.task_id)
        feedback = [m for m in snapshot.messages if m.say == "user_feedback"]
        answers = {m.text: m.context for m in feedback}
        assert answers["this one"] is not None and answers["this one"].cell is not None
        assert answers["this one"].cell.id == "plot"
        assert answers["that one"] is not None and answers["that one"].notebook == "sales.ipynb"

        # An edited message goes with the context it is sent with.
        again = next(m for m in feedback if m.text == "again")
        assert again.context is None
        await client.edit_message(ref.task_id, again.ts, "again, cell 1", context=context(ws, 1))
        fake_openai.wait_for_requests(5, timeout=60)
        resent = last_user(fake_openai, 4)
        assert "again, cell 1" in resent and "notebook_context" in resent, resent
        assert PLOT in resent


def test_chat_sends_its_notebook_and_cell_with_each_message_and_answer(
    daemon: DaemonProcess, fake_openai: FakeOpenAI, ws: Path
) -> None:
    fake_openai.script(
        FakeReply.text("first reply"),
        call("ask_followup_question", question="Which column?"),
        FakeReply.text("noted"),
    )
    child = chat_at_prompt(daemon, "--notebook", "sales.ipynb", "--cell", "1", cwd=ws)
    say(child, "why is it slow?", "first reply", PROMPT)
    say(child, "plot it", "Which column?")
    say(child, "the x column", "noted", PROMPT)
    child.sendeof()
    assert finish(child) == 0

    for request in (0, 1):
        text = last_user(fake_openai, request)
        assert "notebook_context" in text and "sales.ipynb" in text, text
        assert PLOT in text
    answer = tool_result(fake_openai, 2)
    assert "notebook_context" in answer and "the x column" in answer, answer


def test_chat_refuses_a_cell_without_a_notebook(daemon: DaemonProcess, ws: Path) -> None:
    child = spawn(daemon, "chat", "--cell", "1", cwd=ws)
    child.expect_exact("--cell needs --notebook PATH.")
    assert finish(child) != 0
