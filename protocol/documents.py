"""Document hosts: how the daemon's notebook tools reach a notebook open in
JupyterLab, so that the agent edits the open document instead of its file.

A *document host* is a client that holds live notebooks: the JupyterLab server
extension (through the real-time collaboration shared document, route `rtc`) or a
browser window's panel (through the notebook model, route `panel`). The exchange:

1. The host declares what it holds with `HostDocuments` (absolute paths of the
   notebooks open there), again whenever that changes and at least once per
   `leaseSeconds` (a host that stops declaring is forgotten when its lease ends).
   An empty `paths` withdraws the host.
2. A notebook tool that acts on a hosted path publishes `documentEditRequested`
   (daemon-wide, live-only) naming the host, the path and the edit.
3. The host applies the edit to the open document and answers with
   `AnswerDocumentEdit` (same `requestId`). A host refuses a request past its
   `expiresAt` (the daemon has given up and may have written the file instead).

A host that does not answer in time is forgotten, and the tool falls back to the
file on disk (as it does for a notebook no host holds).

Conflicts are decided by the host on the live document: an edit names the cell
by id and carries the SHA-256 of the source the agent last read of it; a cell
whose live source hashes otherwise is not touched, and the answer says
`conflict` with the cell's current source.

Checkpoints use the same exchange (never a model): `snapshot` reads the whole
open notebook, so that a checkpoint keeps what JupyterLab shows rather than the
file the user may not have saved; `replace` puts a checkpoint's notebook into the
open document and saves it there, so that a restore the user asked for shows at
once and the file matches it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from ._base import CommandBase, WireStruct

__all__ = [
    "AnswerDocumentEdit",
    "DocumentCell",
    "DocumentEdit",
    "DocumentEditAnswer",
    "DocumentEditOp",
    "DocumentEditRequest",
    "DocumentEditTaken",
    "DocumentRoute",
    "DocumentsHosted",
    "HostDocuments",
]

DocumentRoute = Literal["rtc", "panel"]

DocumentEditOp = Literal[
    "read", "insert", "edit", "delete", "move", "run", "outputs", "snapshot", "replace"
]


class HostDocuments(CommandBase["DocumentsHosted"], tag="HostDocuments", frozen=True):
    """Declare the notebooks a document host holds open now (replacing what it
    declared before); `paths` empty withdraws the host."""

    host_id: Annotated[
        str, Meta(description="Chosen by the host; unique (a UUID); at most 128 characters.")
    ]
    route: DocumentRoute
    paths: Annotated[
        list[str],
        Meta(description="Absolute paths of the notebooks open at this host (at most 1000)."),
    ]
    lease_seconds: Annotated[
        float,
        Meta(description="The declaration lasts this long unless declared again (0 < s <= 3600)."),
    ] = 60.0


class DocumentsHosted(WireStruct, frozen=True):
    host_id: str
    paths: int


class DocumentCell(WireStruct, frozen=True):
    """A cell as the open document has it (nbformat 4.5 names)."""

    id: str
    cell_type: str
    source: str
    execution_count: int | None = None
    outputs: Annotated[
        list[dict[str, Any]] | None,
        Meta(description="nbformat outputs; only in the answer to a `read`."),
    ] = None
    metadata: dict[str, Any] | None = None


class DocumentEdit(WireStruct, frozen=True):
    """One change to an open notebook (or a read of it).

    - read: answer with every cell, outputs included.
    - insert: a new cell (`newId`, `cellType`, `source`) after the cell `afterId`
      (at the top when absent).
    - edit: replace the source (and type) of `cellId`; clears a code cell's outputs.
    - delete: remove `cellId`.
    - move: put `cellId` after `afterId` (at the top when absent).
    - run: the agent is about to run `cellId`: clear its outputs and execution count,
      and show it running.
    - outputs: set the outputs and execution count of `cellId` (as they stream);
      `running`: the cell still runs (its final outputs come with `running` false).
    - snapshot: answer with the whole notebook (`notebook`) as the host would save
      it; changes nothing. (Checkpoints.)
    - replace: make the document `notebook` (cells, outputs, metadata), then save
      it to its file as the user's save does; answer once it is saved. (A restore.)

    `expectedSha256` (edit, delete, move, run): the SHA-256 of the UTF-8 source the
    agent last read of `cellId`; the host answers `conflict` if the live source
    differs. `marker` goes into the cell's `metadata.hdsp` (insert, edit)."""

    op: DocumentEditOp
    cell_id: str | None = None
    expected_sha256: str | None = None
    after_id: str | None = None
    new_id: str | None = None
    cell_type: str | None = None
    source: str | None = None
    outputs: list[dict[str, Any]] | None = None
    execution_count: int | None = None
    marker: dict[str, Any] | None = None
    running: bool = False
    notebook: Annotated[
        dict[str, Any] | None,
        Meta(description="The whole notebook (nbformat 4 JSON); only for a `replace`."),
    ] = None


class DocumentEditRequest(WireStruct, frozen=True):
    request_id: str
    host_id: str
    path: Annotated[str, Meta(description="Absolute path of the notebook.")]
    edit: DocumentEdit
    expires_at: Annotated[
        float,
        Meta(description="Unix time after which the host must not apply the edit."),
    ]
    task_id: str | None = None


class DocumentEditAnswer(WireStruct, frozen=True):
    """The host's answer. `cells`: the document's cells after the edit (outputs
    only for a read); for a conflict, the cell in conflict with its live source.
    `notebook`: the whole notebook, in the answer to a `snapshot`."""

    request_id: str
    host_id: str
    status: Literal["ok", "conflict", "not_open", "invalid", "expired"]
    message: str | None = None
    cells: list[DocumentCell] | None = None
    notebook: Annotated[
        dict[str, Any] | None,
        Meta(description="The whole notebook (nbformat 4 JSON); only for a `snapshot`."),
    ] = None


class AnswerDocumentEdit(CommandBase["DocumentEditTaken"], tag="AnswerDocumentEdit", frozen=True):
    """A document host's answer to a `documentEditRequested`."""

    data: DocumentEditAnswer


class DocumentEditTaken(WireStruct, frozen=True):
    """Whether the daemon was still waiting for that answer (false: it gave up, or
    the request was not this host's)."""

    taken: bool
