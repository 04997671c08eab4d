"""The subtask fields of the history and the four agent-call events, as the
daemon's types encode them, validate against the schema (ajv) and carry the
ids in their places."""

from __future__ import annotations

import json

import hdsp.protocol as p
from hdsp.protocol import TaskEvent

from . import ajv

PARENT = "3f2a9c1e-0000-4000-8000-000000000001"
CHILD = "7b1d2e3f-0000-4000-8000-000000000002"


def test_subtask_fields_and_agent_call_events_match_the_schema() -> None:
    child = p.HistoryItem(
        id=CHILD,
        number=2,
        ts=1,
        task="count the rows",
        parent_task_id=PARENT,
        root_task_id=PARENT,
        parent_call_id="5c0de",
        agent="analyst",
        result="310 rows",
        state=p.TaskState.COMPLETED,
    )
    parent = p.HistoryItem(
        id=PARENT,
        number=1,
        ts=0,
        task="analyse",
        child_ids=[CHILD],
        delegated_to_id=CHILD,
        status="delegated",
        agent="lead",
    )
    events = {
        "spawned": p.TaskSpawned(payload=(PARENT, CHILD)),
        "delegated": p.TaskDelegated(payload=(PARENT, CHILD)),
        "returned": p.TaskDelegationCompleted(payload=(PARENT, CHILD, "310 rows")),
        "paused": p.TaskPaused(payload=(PARENT,)),
    }
    cases = [
        ("child", "#/$defs/HistoryItem", json.loads(p.encode(child))),
        ("parent", "#/$defs/HistoryItem", json.loads(p.encode(parent))),
        *(
            (name, "#/$defs/TaskEvent", json.loads(p.encode(TaskEvent(seq=1, data=event))))
            for name, event in events.items()
        ),
    ]
    report = ajv.run(cases)
    assert all(v is None for v in report.results.values()), report.results
    encoded = json.loads(p.encode(child))
    assert (encoded["parentTaskId"], encoded["rootTaskId"]) == (PARENT, PARENT)
    assert encoded["parentCallId"] == "5c0de" and encoded["result"] == "310 rows"
    assert json.loads(p.encode(parent))["childIds"] == [CHILD]
    for event in events.values():
        assert p.event_task_id(event) == PARENT  # the caller's topic
    assert events["returned"].payload[2] == "310 rows"
