"""What `hdsp acp` shows an ACP host of a task's messages (no processes: the
translation from hdsp's UI messages to session updates)."""

from __future__ import annotations

import json

from acp.schema import (
    AgentMessageChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from hdsp.client.acp.permissions import always_scope, permission_options
from hdsp.client.acp.updates import UpdateTranslator
from hdsp.protocol import ClineMessage, ToolResultText, encode


def say(ts: int, say: str, text: str, **fields: object) -> ClineMessage:
    return ClineMessage(ts=ts, type="say", say=say, text=text, **fields)  # type: ignore[arg-type]


def ask(ts: int, kind: str, text: str, **fields: object) -> ClineMessage:
    return ClineMessage(ts=ts, type="ask", ask=kind, text=text, **fields)  # type: ignore[arg-type]


def texts(updates: list[object]) -> list[str]:
    return [
        u.content.text
        for u in updates
        if isinstance(u, AgentMessageChunk) and isinstance(u.content, TextContentBlock)
    ]


def test_streamed_text_goes_as_new_chunks_only_and_a_retried_reply_says_so() -> None:
    t = UpdateTranslator("/ws")
    assert isinstance(t.message(say(1, "text", "the prompt"))[0], UserMessageChunk)
    assert texts(t.message(say(2, "text", "Hel", partial=True))) == ["Hel"]
    assert texts(t.message(say(2, "text", "Hello", partial=True))) == ["lo"]
    assert texts(t.message(say(2, "text", "Hello"))) == []
    # A retry replaced the text: the host cannot take chunks back.
    assert texts(t.message(say(2, "text", "Bonjour"))) == ["\n\n[the reply was retried]\n\nBonjour"]
    # A later message of the same reply is set apart.
    assert texts(t.message(say(3, "completion_result", "Done."))) == ["\n\nDone."]


def test_the_hosts_own_prompt_is_not_echoed_but_replayed() -> None:
    live = UpdateTranslator("/ws")
    live.own_prompts.append("hi")
    assert live.message(say(1, "text", "hi")) == []
    replay = UpdateTranslator("/ws")
    assert isinstance(replay.message(say(1, "text", "hi"), replay=True)[0], UserMessageChunk)


def test_model_text_in_titles_and_output_stays_data() -> None:
    t = UpdateTranslator("/ws")
    t.message(say(1, "text", "prompt"))
    path = "[click](http://evil.example)`x"
    preview = json.dumps({"tool": "read_file", "path": path})
    (start,) = t.message(say(2, "tool", preview, tool_use_id="c1"))
    assert isinstance(start, ToolCallStart)
    assert start.title == "Read ``[click](http://evil.example)`x``"
    output = "ok\n```\n# not a heading: still in the fence\n"
    (update,) = t.message(say(3, "command_output", output, tool_use_id="c1", partial=True))
    assert isinstance(update, ToolCallProgress)
    (shown,) = update.content or []
    assert isinstance(shown, ContentToolCallContent) and isinstance(shown.content, TextContentBlock)
    assert shown.content.text.startswith("````console\n") and shown.content.text.endswith("\n````")


def test_a_write_shows_its_diff_hunks_and_a_reused_call_id_is_a_new_call() -> None:
    t = UpdateTranslator("/ws")
    t.message(say(1, "text", "prompt"))
    diff = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
    preview = json.dumps({"tool": "edit_file", "path": "f.txt", "diff": diff})
    (start,) = t.message(ask(2, "tool", preview, tool_use_id="call_0"))
    assert isinstance(start, ToolCallStart) and start.status == "pending"
    (hunk,) = start.content or []
    assert isinstance(hunk, FileEditToolCallContent)
    assert (hunk.path, hunk.old_text, hunk.new_text) == ("/ws/f.txt", "a\nb\n", "a\nB\n")
    result = encode(ToolResultText(tool="edit_file", text="edited")).decode()
    answered = ask(
        2, "tool", preview, tool_use_id="call_0", is_answered=True, answer="yesButtonClicked"
    )
    assert [u.status for u in t.message(answered)] == ["in_progress"]  # type: ignore[attr-defined]
    (done,) = t.message(say(3, "tool_result", result, tool_use_id="call_0"))
    assert isinstance(done, ToolCallProgress) and done.status == "completed"
    # The next reply's first call has the same id (some servers number per reply).
    (again,) = t.message(ask(4, "tool", preview, tool_use_id="call_0"))
    assert isinstance(again, ToolCallStart) and again.tool_call_id == "call_0-4"
    denied = ask(
        4,
        "tool",
        preview,
        tool_use_id="call_0",
        is_answered=True,
        answer="noButtonClicked",
        answered_by="hdsp",
    )
    (failed,) = t.message(denied)
    assert isinstance(failed, ToolCallProgress)
    assert failed.tool_call_id == "call_0-4" and failed.status == "failed"


def test_a_kernel_replay_ask_shows_its_cells_and_is_never_allowed_always() -> None:
    text = json.dumps(
        {
            "tool": "replay_kernel",
            "checkpoint": 2,
            "note": "Restart the task's kernel and run these cells again, in order.",
            "cells": [{"seq": 1, "code": "df = load()\ndf['x'] = 1"}],
        }
    )
    replay = ask(5, "tool", text)
    t = UpdateTranslator("/ws")
    call = t.permission_call(replay)
    assert call.title == "Restore checkpoint 2 with the kernel (run its cells again)"
    assert call.kind == "execute"
    shown = "".join(
        c.content.text
        for c in call.content or []
        if isinstance(c, ContentToolCallContent) and isinstance(c.content, TextContentBlock)
    )
    assert "--- execution 1\n    df = load()\n    df['x'] = 1" in shown
    assert always_scope(replay) is None
    assert [o.kind for o in permission_options(replay)] == ["allow_once", "reject_once"]
    # (Nor is a cell run: the ask shows where the cell is, not what it runs.)
    run = ask(6, "tool", json.dumps({"tool": "run_cell", "path": "a.ipynb", "index": 0}))
    assert always_scope(run) is None


def _always_label(message: ClineMessage) -> str:
    (always,) = [o for o in permission_options(message) if o.kind == "allow_always"]
    return always.name


def test_allow_always_covers_what_the_ask_showed_and_its_label_says_so() -> None:
    def tool(ts: int, **data: object) -> ClineMessage:
        return ask(ts, "tool", json.dumps(data))

    code = tool(1, tool="execute_code", code="df.head()")
    assert always_scope(code) == "code:df.head()"
    assert always_scope(tool(2, tool="execute_code", code="df.head()")) == always_scope(code)
    assert always_scope(tool(3, tool="execute_code", code="import os")) != always_scope(code)
    assert _always_label(code) == "Allow always (this very code, this session)"
    # A write: its path (the content changes from call to call), not every path.
    write = tool(4, tool="write_to_file", path="a.txt", content="1\n", diff="+1")
    assert always_scope(write) == "path:write_to_file:a.txt"
    assert always_scope(tool(5, tool="write_to_file", path="a.txt", content="2\n")) == (
        always_scope(write)
    )
    assert always_scope(tool(6, tool="write_to_file", path="b.txt")) != always_scope(write)
    assert always_scope(tool(7, tool="edit_file", path="a.txt")) != always_scope(write)
    assert _always_label(write) == "Allow always (write_to_file on `a.txt`, this session)"
    # Another tool: the very same call.
    switch = tool(8, tool="switchMode", mode="code", reason="to write")
    assert always_scope(tool(9, tool="switchMode", mode="ask", reason="to write")) != (
        always_scope(switch)
    )
    assert _always_label(switch) == "Allow always (this very switchMode call, this session)"
    command = ask(10, "command", "ls -la")
    assert always_scope(command) == "command:ls -la"
    assert _always_label(command) == "Allow always (this very command, this session)"
    # What a label shows of a path is one line, and short.
    odd = tool(11, tool="write_to_file", path="x`y\n" + "d/" * 100)
    label = _always_label(odd)
    assert "\n" not in label and len(label) < 150 and "``x`y" in label


def test_checkpoints_saved_and_restored_are_told_to_the_host() -> None:
    t = UpdateTranslator("/ws")
    t.message(say(1, "text", "the prompt"))
    saved = t.message(say(2, "checkpoint_saved", "checkpoint 1 saved", checkpoint={"number": 1}))
    restored = t.message(
        say(3, "checkpoint_restored", "restored checkpoint 1 (files); 1 file(s) changed")
    )
    assert texts(saved) == ["Checkpoint 1 saved."]
    assert texts(restored) == ["\n\nRestored checkpoint 1 (files); 1 file(s) changed."]
    assert t.message(say(3, "checkpoint_restored", "restored checkpoint 1 (files)")) == []


def test_names_that_are_not_utf8_reach_the_host_as_the_daemon_shows_them() -> None:
    # The daemon's tools show such names escaped (hdsp.protocol.file_names); the
    # host gets that spelling, one line, in titles, locations and diffs.
    t = UpdateTranslator("/ws")
    t.message(say(1, "text", "prompt"))
    path = "r\\xff two\\x0alines.csv"
    diff = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
    preview = json.dumps({"tool": "write_to_file", "path": path, "diff": diff, "content": "x\n"})
    (start,) = t.message(ask(2, "tool", preview, tool_use_id="c1"))
    assert isinstance(start, ToolCallStart)
    assert path in start.title and "\n" not in start.title
    assert [loc.path for loc in start.locations or []] == [f"/ws/{path}"]
    assert all(isinstance(c, FileEditToolCallContent) for c in start.content or [])
    assert all(c.path == f"/ws/{path}" for c in start.content or [])  # type: ignore[union-attr]
    start.model_dump_json().encode("utf-8")  # what the host is sent encodes
