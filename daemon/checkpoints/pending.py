"""A restore "with kernel" whose replay waits for the user's approval: what the
store keeps of it (table `pending_replays`, one per task) from the moment its ask
is posted until the replay is done or denied, so that a daemon that died
meanwhile asks again after its restart and finishes the restore then.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["PendingReplay"]


class PendingReplay(msgspec.Struct, frozen=True, kw_only=True):
    task_id: str
    #: The checkpoint restored.
    checkpoint: int
    #: The ask that shows the cells and waits for the approval.
    ask_ts: int
    restore: Literal["files", "history", "both"] = "files"
    skip: list[int] = []
    #: What the restore did before the ask (for its closing message and result).
    undo_checkpoint: int | None = None
    files: list[str] = []
    rewound: bool = False
    nested: list[str] = []
    open_notebooks: list[str] = []
    notes: list[str] = []
