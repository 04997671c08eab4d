"""GetTaskPage against a real hdspd: paging through a task's whole history gives
exactly the messages GetTask gives, in order; bad ranges and limits are refused
with `invalid_request` and the daemon carries on."""

from __future__ import annotations

import msgspec
import pytest

from hdsp.client import Client, CommandFailed
from hdsp.protocol import MAX_TASK_PAGE, ClineMessage, ErrorCode, TaskPage
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.events import collect_turn

pytestmark = pytest.mark.timeout(90)

TURNS = 4


async def _task_with_history(client: Client, fake_openai: FakeOpenAI) -> str:
    """A finished task of several turns: a dozen messages or so."""
    fake_openai.script(*(FakeReply.text(f"answer {i}", chunk_size=4) for i in range(TURNS)))
    head = (await client.status()).head_seq
    ref = await client.start_task("question 0")
    await collect_turn(client, ref.task_id, head)
    for i in range(1, TURNS):
        head = (await client.status()).head_seq
        await client.send_message(ref.task_id, f"question {i}")
        await collect_turn(client, ref.task_id, head)
    return ref.task_id


async def _all_pages(client: Client, task_id: str, limit: int) -> list[TaskPage]:
    pages = [await client.get_task_page(task_id, limit=limit)]
    while pages[-1].next_cursor is not None:
        assert len(pages) <= 1000, "paging does not end"
        pages.append(await client.get_task_page(task_id, cursor=pages[-1].next_cursor, limit=limit))
    return pages


def _wire(messages: list[ClineMessage]) -> list[bytes]:
    return [msgspec.json.encode(m) for m in messages]


async def test_paging_through_a_task_gives_exactly_the_messages_of_get_task(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    task_id = await _task_with_history(client, fake_openai)
    snap = await client.get_task(task_id)
    total = len(snap.messages)
    assert total >= 2 * TURNS
    texts = [m.text for m in snap.messages if m.say in ("text", "user_feedback")]
    assert texts == [t for i in range(TURNS) for t in (f"question {i}", f"answer {i}")]

    for limit in (1, 3, total - 1, total, MAX_TASK_PAGE):
        pages = await _all_pages(client, task_id, limit)
        assert _wire([m for page in pages for m in page.messages]) == _wire(snap.messages)
        # Each page says where it stands; only the last one ends the paging.
        assert [page.start for page in pages] == list(range(0, total, limit))
        assert all(page.total == total for page in pages)
        assert all(len(page.messages) == limit for page in pages[:-1])
        assert pages[-1].next_cursor is None
        assert all(page.head_seq >= snap.head_seq for page in pages)

    # A range from the middle: by index, then on by cursor.
    middle = await client.get_task_page(task_id, start=3, limit=4)
    assert middle.start == 3
    assert _wire(middle.messages) == _wire(snap.messages[3:7])
    assert middle.next_cursor is not None
    rest = await client.get_task_page(task_id, cursor=middle.next_cursor, limit=total)
    assert rest.start == 7 and rest.next_cursor is None
    assert _wire(rest.messages) == _wire(snap.messages[7:])

    # The end of the history is an empty last page, not an error.
    end = await client.get_task_page(task_id, start=total)
    assert (end.messages, end.start, end.total, end.next_cursor) == ([], total, total, None)


async def test_bad_ranges_and_limits_get_invalid_request(
    client: Client, fake_openai: FakeOpenAI
) -> None:
    task_id = await _task_with_history(client, fake_openai)
    total = (await client.get_task_page(task_id)).total

    async def refused(**kwargs: object) -> CommandFailed:
        with pytest.raises(CommandFailed) as caught:
            await client.get_task_page(task_id, **kwargs)  # type: ignore[arg-type]
        assert caught.value.code == ErrorCode.INVALID_REQUEST, caught.value
        return caught.value

    for limit in (0, -1, MAX_TASK_PAGE + 1):
        err = await refused(limit=limit)
        assert "limit" in str(err)
    err = await refused(start=-1)
    assert "start" in str(err)
    err = await refused(start=total + 1)
    assert f"{total} messages" in str(err)
    err = await refused(start=0, cursor="1")
    assert "not both" in str(err)
    for cursor in ("", "abc", "-5", "1e3", "9" * 40, "\x1b[31m"):
        err = await refused(cursor=cursor)
        assert "cursor" in str(err)

    with pytest.raises(CommandFailed) as caught:
        await client.get_task_page("no-such-task")
    assert caught.value.code == ErrorCode.TASK_NOT_FOUND
    # Nothing of this disturbed the daemon or the task.
    page = await client.get_task_page(task_id, limit=MAX_TASK_PAGE)
    assert len(page.messages) == total
