"""Checkpoints (issue 20): commands that list, diff and restore a task's
checkpoints, their results, and the records the `checkpointSaved` and
`checkpointRestored` events carry.

A checkpoint is the state of the task's workspace (its files, in a shadow git
repository in hdsp's data dir) taken before a change the agent made, tied to the
task's message that shows it (a `checkpoint_saved` say), with the length of the
task's kernel execution log at that moment. Checkpoints of a task are numbered
from 1.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ._base import CommandBase, WireStruct

__all__ = [
    "CheckpointDiff",
    "CheckpointInfo",
    "CheckpointList",
    "CheckpointRestoreResult",
    "DiffCheckpoints",
    "DiffCheckpointsData",
    "FileChange",
    "KernelReplay",
    "KernelVariable",
    "ListCheckpoints",
    "ListCheckpointsData",
    "ReplayedExecution",
    "RestoreCheckpoint",
    "RestoreCheckpointData",
]


# ---- records ------------------------------------------------------------------

#: The `nested` field of a list, a diff and a restore.
_NestedRepositories = Annotated[
    list[str],
    Meta(
        description=(
            "Git repositories nested in the workspace (folders with a .git of their "
            "own, relative, ending in /): checkpoints leave them out, and a restore "
            "never touches their files; their own git keeps them."
        )
    ),
]


class CheckpointInfo(WireStruct, frozen=True):
    task_id: str
    number: Annotated[int, Meta(description="The checkpoint's number within its task, from 1.")]
    ts: Annotated[int, Meta(description="When it was taken (milliseconds since the epoch).")]
    commit: Annotated[str, Meta(description="The shadow repository's commit (hex).")]
    reason: Annotated[
        str, Meta(description='Why it was taken ("before write_to_file", "before restore").')
    ]
    message_ts: Annotated[
        int | None,
        Meta(description="The task's `checkpoint_saved` message that shows it."),
    ] = None
    changed: Annotated[
        list[str],
        Meta(description="Files that changed since the task's previous checkpoint."),
    ] = []
    notes: Annotated[
        list[str],
        Meta(description="What was left out (files over the size limit, nested repositories)."),
    ] = []
    executions: Annotated[
        int,
        Meta(description="Kernel executions the task had recorded when it was taken."),
    ] = 0


class CheckpointList(WireStruct, frozen=True):
    task_id: str
    checkpoints: list[CheckpointInfo] = []
    enabled: Annotated[
        bool, Meta(description="Whether checkpoints are taken for this task's workspace.")
    ] = True
    note: Annotated[str | None, Meta(description="Why checkpoints are off, when they are.")] = None
    nested: _NestedRepositories = []


class FileChange(WireStruct, frozen=True):
    path: str
    status: Literal["added", "modified", "deleted"]
    diff: Annotated[
        str,
        Meta(
            description=(
                "A unified diff of a text file; for a notebook, its changes cell by cell "
                "(sources and outputs); empty for a binary file. Untrusted text."
            )
        ),
    ] = ""
    notebook: bool = False
    binary: bool = False


class CheckpointDiff(WireStruct, frozen=True):
    task_id: str
    checkpoint: int
    to: Annotated[
        int | None,
        Meta(description="The other checkpoint; absent: the workspace as it is now."),
    ] = None
    files: list[FileChange] = []
    nested: _NestedRepositories = []


class ReplayedExecution(WireStruct, frozen=True):
    seq: Annotated[int, Meta(description="Its place in the task's execution log.")]
    code: str
    status: Literal["ok", "error", "skipped", "not_run"]
    note: str | None = None


class KernelVariable(WireStruct, frozen=True):
    name: str
    type: str
    summary: Annotated[str, Meta(description="A short repr (untrusted text).")] = ""


class KernelReplay(WireStruct, frozen=True):
    approved: bool
    executions: list[ReplayedExecution] = []
    failed_at: Annotated[
        int | None, Meta(description="The seq of the execution that failed, if one did.")
    ] = None
    error: str | None = None
    variables: list[KernelVariable] = []


class CheckpointRestoreResult(WireStruct, frozen=True):
    task_id: str
    checkpoint: int
    restore: Literal["files", "history", "both"]
    undo_checkpoint: Annotated[
        int | None,
        Meta(description="The checkpoint of the state before the restore: restore it to undo."),
    ] = None
    files: Annotated[list[str], Meta(description="Files the restore changed.")] = []
    rewound: bool = False
    kernel: KernelReplay | None = None
    nested: _NestedRepositories = []
    open_notebooks: Annotated[
        list[str],
        Meta(
            description=(
                "Of `files`, the notebooks open in JupyterLab: restored in the open "
                "document (every view shows it at once) and saved there, so the file "
                "matches what JupyterLab shows."
            )
        ),
    ] = []
    notes: Annotated[
        list[str],
        Meta(
            description=(
                "What did not go as usual (a notebook open in JupyterLab that did not "
                "answer, so its file was written instead)."
            )
        ),
    ] = []
    replay_pending: Annotated[
        bool,
        Meta(
            description=(
                "The kernel's replay waits for the user's approval (an ask of the task): "
                "its outcome comes as the task's `checkpoint_restored` message and a "
                "`checkpointRestored` event (the request set `waitForReplay` false)."
            )
        ),
    ] = False


# ---- commands -----------------------------------------------------------------


class ListCheckpointsData(WireStruct, frozen=True):
    task_id: str


class ListCheckpoints(CommandBase["CheckpointList"], tag="ListCheckpoints", frozen=True):
    """A task's checkpoints, oldest first, with what changed at each."""

    data: ListCheckpointsData


class DiffCheckpointsData(WireStruct, frozen=True):
    task_id: str
    checkpoint: int
    to: Annotated[
        int | None,
        Meta(description="Compare with this checkpoint; absent: with the workspace now."),
    ] = None


class DiffCheckpoints(CommandBase["CheckpointDiff"], tag="DiffCheckpoints", frozen=True):
    """What changed between two checkpoints (or a checkpoint and now), file by
    file; notebooks cell by cell."""

    data: DiffCheckpointsData


class RestoreCheckpointData(WireStruct, frozen=True):
    task_id: str
    checkpoint: int
    restore: Annotated[
        Literal["files", "history", "both"],
        Meta(
            description=(
                "files: the workspace's files; history: rewind the task to the message of "
                "the checkpoint; both."
            )
        ),
    ] = "files"
    with_kernel: Annotated[
        bool,
        Meta(
            description=(
                "Also restart the task's kernel and replay its executions up to the "
                "checkpoint, after the user approves them (an ask of the task)."
            )
        ),
    ] = False
    skip: Annotated[
        list[int],
        Meta(description="Executions (by seq) not to replay: they are skipped with a note."),
    ] = []
    wait_for_replay: Annotated[
        bool,
        Meta(
            description=(
                "With `withKernel`: reply once the replay is approved (or denied) and "
                "done; false: reply as soon as its ask is posted (`replayPending`)."
            )
        ),
    ] = True


class RestoreCheckpoint(
    CommandBase["CheckpointRestoreResult"], tag="RestoreCheckpoint", frozen=True
):
    """Restore a checkpoint. A checkpoint of the state before is taken first, so
    that the restore can itself be undone. With `withKernel` the reply comes once
    the replay is approved (or denied) and done."""

    data: RestoreCheckpointData
