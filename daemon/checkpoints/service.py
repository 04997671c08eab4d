"""The checkpoint service: one shadow repository per workspace (work on one is
serialised by a lock), checkpoints numbered per task and kept in the store with
the `checkpointSaved` event that announces them, the tasks' kernel execution
logs, and the diffs and file restores the commands ask for. Notebooks open in
JupyterLab are kept as JupyterLab shows them and restored there
(open_notebooks).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import msgspec
import structlog

from hdsp.daemon.config import CheckpointSettings
from hdsp.daemon.errors import BadRequest
from hdsp.daemon.kernels import KernelService
from hdsp.daemon.store import Journal, Store, Write
from hdsp.protocol import (
    CheckpointDiff,
    CheckpointInfo,
    CheckpointRestored,
    CheckpointSaved,
    FileChange,
    KernelReplay,
    encode,
    shown_name,
)

from .executions import ExecutionRecord, replay_plan
from .notebook_diff import notebook_diff
from .open_notebooks import (
    OpenNotebook,
    cells_of,
    find_open,
    notebook_json,
    read_file,
    replace_all,
    snapshot_all,
)
from .pending import PendingReplay
from .replay import replay_kernel
from .shadow import GitFailed, ShadowRepo, refusal

if TYPE_CHECKING:
    from hdsp.daemon.tools.notebook_hosts import NotebookHosts

__all__ = ["Announce", "CheckpointService", "RestoredFiles"]

log = structlog.get_logger("hdsp.checkpoints")

#: Shows a saved checkpoint in the task's history: (text, checkpoint field) ->
#: the message's ts.
Announce = Callable[[str, dict[str, Any]], Awaitable[int]]

_INSERT_CHECKPOINT = "INSERT INTO checkpoints (task_id, number, body) VALUES (?, ?, ?)"
_INSERT_EXECUTION = "INSERT INTO kernel_executions (task_id, seq, body) VALUES (?, ?, ?)"
_SAVE_PENDING = (
    "INSERT INTO pending_replays (task_id, body) VALUES (?, ?) "
    "ON CONFLICT (task_id) DO UPDATE SET body = excluded.body"
)
_DROP_PENDING = "DELETE FROM pending_replays WHERE task_id = ?"

_info_decoder = msgspec.json.Decoder(CheckpointInfo)
_record_decoder = msgspec.json.Decoder(ExecutionRecord)
_pending_decoder = msgspec.json.Decoder(PendingReplay)

#: Diff text kept per file (characters).
DIFF_LIMIT = 200_000
#: Diff text of one answer, all files together (characters): the files past it
#: are listed with a note instead of their diff (and cost no git process).
DIFF_TOTAL_LIMIT = 4_000_000


@contextmanager
def _written(what: str) -> Iterator[None]:
    """An OSError of the shadow repository's own files (a full disk, a data dir
    that cannot be written) as the GitFailed its callers handle (they say there
    is no checkpoint, and the call runs)."""
    try:
        yield
    except OSError as exc:
        raise GitFailed(f"{what}: {exc}") from exc


def _shown(paths: Sequence[str]) -> list[str]:
    """OS paths as clients and models see them (`hdsp.protocol.file_names`)."""
    return [shown_name(p) for p in paths]


def _status(letter: str) -> Literal["added", "modified", "deleted"]:
    return "added" if letter == "A" else "deleted" if letter == "D" else "modified"


def _not_shown(letter: str, path: str) -> FileChange:
    return FileChange(
        path=shown_name(path),
        status=_status(letter),
        diff=(
            f"[diff not shown: the files before it hold {DIFF_TOTAL_LIMIT:,} characters of "
            "changes, all one answer holds; diff checkpoints nearer to each other]\n"
        ),
    )


@dataclass
class RestoredFiles:
    """What a restore of files did."""

    #: The checkpoint of the state before it (restore it to undo).
    undo: CheckpointInfo
    #: The files it changed (as clients see names: `hdsp.protocol.file_names`).
    files: list[str] = field(default_factory=list)
    #: Nested repositories, left as they are.
    nested: list[str] = field(default_factory=list)
    #: Of `files`, the notebooks restored where they are open in JupyterLab.
    open_notebooks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _cut(text: str) -> str:
    if len(text) <= DIFF_LIMIT:
        return text
    return text[:DIFF_LIMIT] + f"\n[... {len(text) - DIFF_LIMIT:,} more characters ...]"


class CheckpointService:
    def __init__(
        self,
        store: Store,
        journal: Journal,
        root: Path,
        settings: Callable[[], CheckpointSettings],
        clock: Callable[[], int],
        kernels: KernelService | None = None,
        private: Sequence[Path] = (),
        documents: NotebookHosts | None = None,
    ) -> None:
        #: The kernels a restore "with kernel" restarts and replays into.
        self.kernels = kernels
        #: The notebooks open in JupyterLab: kept as they show there, restored there.
        self.documents = documents
        #: hdsp's own folders (data, runtime): never in a checkpoint, and no
        #: workspace inside one has checkpoints.
        self._private = list(private)
        self._store = store
        self._journal = journal
        self._root = root
        self._settings = settings
        self._clock = clock
        self._repos: dict[Path, ShadowRepo] = {}
        self._locks: dict[Path, anyio.Lock] = {}
        #: The last checkpoint number and execution seq of each task seen.
        self._numbers: dict[str, int] = {}
        self._seqs: dict[str, int] = {}
        #: Tasks told already that their workspace has no checkpoints.
        self.refused_told: set[str] = set()

    @property
    def enabled(self) -> bool:
        return self._settings().enabled

    def refusal(self, workspace: Path) -> str | None:
        return refusal(workspace, self._private)

    def _repo(self, workspace: Path) -> tuple[ShadowRepo, anyio.Lock]:
        real = Path(os.path.realpath(workspace))
        settings = self._settings()
        repo = self._repos.get(real)
        if repo is None:
            repo = self._repos[real] = ShadowRepo(
                self._root,
                real,
                max_file_bytes=settings.max_file_bytes,
                exclude=settings.exclude,
                private=self._private,
            )
            self._locks[real] = anyio.Lock()
        repo.max_file_bytes = settings.max_file_bytes
        repo.exclude = list(settings.exclude)
        return repo, self._locks[real]

    def _deadline(self) -> float:
        return self._settings().git_timeout_seconds

    # ---- notebooks open in JupyterLab -----------------------------------------------

    async def _open(self, workspace: Path) -> dict[str, OpenNotebook]:
        if self.documents is None or not self.documents.hosts():
            return {}
        return await anyio.to_thread.run_sync(find_open, self.documents, workspace)

    async def _live(self, task_id: str, workspace: Path) -> tuple[dict[str, bytes], list[str]]:
        """The open notebooks of `workspace` as JupyterLab shows them (relative
        path -> bytes), and notes for those it could not show."""
        notebooks = await self._open(workspace)
        if not notebooks or self.documents is None:
            return {}, []
        return await snapshot_all(self.documents, notebooks.values(), task_id)

    # ---- the store ----------------------------------------------------------------

    async def _last(self, table: str, key: str, task_id: str, cache: dict[str, int]) -> int:
        if task_id not in cache:
            await self._journal.flush_for_read()
            rows = await self._store.read(
                self._store.db.rows, f"SELECT max({key}) FROM {table} WHERE task_id = ?", (task_id,)
            )
            cache[task_id] = int(rows[0][0] or 0)
        return cache[task_id]

    async def checkpoints(self, task_id: str) -> list[CheckpointInfo]:
        await self._journal.flush_for_read()
        rows = await self._store.read(
            self._store.db.rows,
            "SELECT body FROM checkpoints WHERE task_id = ? ORDER BY number",
            (task_id,),
        )
        return [_info_decoder.decode(bytes(body)) for (body,) in rows]

    async def checkpoint(self, task_id: str, number: int) -> CheckpointInfo:
        await self._journal.flush_for_read()
        rows = await self._store.read(
            self._store.db.rows,
            "SELECT body FROM checkpoints WHERE task_id = ? AND number = ?",
            (task_id, number),
        )
        if not rows:
            raise BadRequest(
                f"Task {task_id} has no checkpoint {number} (`hdsp checkpoints` lists them).",
            )
        return _info_decoder.decode(bytes(rows[0][0]))

    async def executions(self, task_id: str, upto: int) -> list[ExecutionRecord]:
        await self._journal.flush_for_read()
        rows = await self._store.read(
            self._store.db.rows,
            "SELECT body FROM kernel_executions WHERE task_id = ? AND seq <= ? ORDER BY seq",
            (task_id, upto),
        )
        return [_record_decoder.decode(bytes(body)) for (body,) in rows]

    async def replay_plan(self, info: CheckpointInfo) -> list[ExecutionRecord]:
        return replay_plan(await self.executions(info.task_id, info.executions))

    # ---- replays waiting for approval ---------------------------------------------

    async def save_pending(self, pending: PendingReplay) -> None:
        """Keep a replay that waits for its approval (until `drop_pending`)."""
        await self._journal.write((_SAVE_PENDING, (pending.task_id, encode(pending))))

    async def drop_pending(self, task_id: str) -> None:
        await self._journal.write((_DROP_PENDING, (task_id,)))

    async def pending_replays(self) -> list[PendingReplay]:
        """The replays that waited for approval when the daemon last stopped."""
        await self._journal.flush_for_read()
        rows = await self._store.read(
            self._store.db.rows, "SELECT body FROM pending_replays ORDER BY task_id"
        )
        found = []
        for (body,) in rows:
            try:
                found.append(_pending_decoder.decode(bytes(body)))
            except msgspec.DecodeError:
                log.warning("a pending replay could not be read; dropped", body=bytes(body)[:200])
        return found

    # ---- recording ------------------------------------------------------------

    async def record_execution(
        self,
        task_id: str,
        kernel_id: str,
        code: str,
        status: str,
        execution_count: int | None = None,
        kernel_restarted: bool = False,
    ) -> ExecutionRecord:
        seq = await self._last("kernel_executions", "seq", task_id, self._seqs) + 1
        self._seqs[task_id] = seq
        record = ExecutionRecord(
            seq=seq,
            kernel_id=kernel_id,
            code=code,
            status=status,
            execution_count=execution_count,
            kernel_restarted=kernel_restarted,
            ts=self._clock(),
        )
        await self._journal.write((_INSERT_EXECUTION, (task_id, seq, encode(record))))
        return record

    async def save(
        self, task_id: str, workspace: Path, reason: str, announce: Announce | None = None
    ) -> CheckpointInfo:
        """Take a checkpoint of `workspace` for `task_id` (raises WorkspaceRefused,
        GitFailed); `announce` shows it in the task's history first. A notebook
        open in JupyterLab is kept as JupyterLab shows it, not as its file is."""
        repo, lock = self._repo(workspace)
        live, live_notes = await self._live(task_id, workspace)
        async with lock:
            with anyio.fail_after(self._deadline()):
                with _written("The checkpoint could not be written"):
                    saved = await repo.save(f"{reason} (task {task_id})", live)
            number = await self._last("checkpoints", "number", task_id, self._numbers) + 1
            self._numbers[task_id] = number
        executions = await self._last("kernel_executions", "seq", task_id, self._seqs)
        info = CheckpointInfo(
            task_id=task_id,
            number=number,
            ts=self._clock(),
            commit=saved.commit,
            reason=reason,
            changed=[shown_name(p) for p in saved.changed],
            notes=saved.notes + live_notes,
            executions=executions,
        )
        if announce is not None:
            # (The call it comes before shows next to it: the text names no tool.)
            text = f"checkpoint {number} saved"
            if saved.changed:
                text += f": {len(saved.changed)} file(s) changed since the one before"
            message_ts = await announce(text, self._field(info))
            info = msgspec.structs.replace(info, message_ts=message_ts)
        await self._journal.emit(CheckpointSaved(payload=(task_id, info)), self._write(info))
        log.info("checkpoint saved", task_id=task_id, number=number, changed=len(saved.changed))
        return info

    @staticmethod
    def _field(info: CheckpointInfo) -> dict[str, Any]:
        """The `checkpoint` field of the task's message about it."""
        return {
            "number": info.number,
            "commit": info.commit,
            "reason": info.reason,
            "changed": info.changed,
            "notes": info.notes,
        }

    @staticmethod
    def _write(info: CheckpointInfo) -> Write:
        return (_INSERT_CHECKPOINT, (info.task_id, info.number, encode(info)))

    # ---- diff and restore -----------------------------------------------------------

    async def diff(
        self, task_id: str, workspace: Path, number: int, to: int | None
    ) -> CheckpointDiff:
        old = await self.checkpoint(task_id, number)
        new = await self.checkpoint(task_id, to) if to is not None else None
        repo, lock = self._repo(workspace)
        files: list[FileChange] = []
        live = (await self._live(task_id, workspace))[0] if new is None else {}
        async with lock:
            with anyio.fail_after(self._deadline() * 4):
                if new is None:
                    # The workspace now (its open notebooks as JupyterLab shows
                    # them): staged (and committed) as a checkpoint would be.
                    with _written("The workspace could not be read for the diff"):
                        await repo.save(f"diff of checkpoint {number} (task {task_id})", live)
                target = new.commit if new is not None else None
                total = 0
                for letter, path in await repo.changes(old.commit, target):
                    if total >= DIFF_TOTAL_LIMIT:
                        files.append(_not_shown(letter, path))
                        continue
                    change = await self._file_change(repo, old.commit, target, letter, path)
                    total += len(change.diff)
                    files.append(change)
            nested = sorted(repo.nested)
        return CheckpointDiff(
            task_id=task_id, checkpoint=number, to=to, files=files, nested=_shown(nested)
        )

    async def nested(self, workspace: Path) -> list[str]:
        """The nested repositories the workspace's shadow repository leaves out (as
        its last checkpoint found them); none if it has no shadow repository."""
        if self.refusal(workspace) is not None:
            return []
        repo, lock = self._repo(workspace)
        if not (repo.git_dir / "HEAD").exists():
            return []
        async with lock:
            with anyio.fail_after(self._deadline()):
                with _written("The shadow repository could not be opened"):
                    await repo.open()
            return _shown(sorted(repo.nested))

    async def _file_change(
        self, repo: ShadowRepo, old: str, new: str | None, letter: str, path: str
    ) -> FileChange:
        status = _status(letter)
        if path.endswith(".ipynb"):
            before = await repo.show(old, path)
            after = await repo.show(new, path)
            text = notebook_diff(before, after)
            if text is not None:
                return FileChange(
                    path=shown_name(path), status=status, diff=_cut(text), notebook=True
                )
        text = await repo.unified_diff(old, new, path)
        binary = "Binary files" in text.split("@@", 1)[0]
        return FileChange(
            path=shown_name(path),
            status=status,
            diff="" if binary else _cut(text),
            binary=binary,
        )

    async def restore_files(
        self, task_id: str, workspace: Path, info: CheckpointInfo, announce: Announce | None
    ) -> RestoredFiles:
        """Save the present state (the undo checkpoint), then set the files to
        `info`'s. A notebook open in JupyterLab is restored there: its host
        replaces the open document and saves it (see open_notebooks)."""
        undo = await self.save(
            task_id, workspace, f"before restoring checkpoint {info.number}", announce
        )
        repo, lock = self._repo(workspace)
        async with lock:
            with anyio.fail_after(self._deadline() * 4):
                with _written("The files could not be restored"):
                    changed = await repo.to_restore(info.commit)
                    done, notes = await self._restore_open(task_id, workspace, repo, info, changed)
                    await repo.restore_paths(info.commit, [p for p in changed if p not in done])
            nested = sorted(repo.nested)
        return RestoredFiles(
            undo=undo,
            files=_shown(sorted(set(changed) | set(done))),
            nested=_shown(nested),
            open_notebooks=_shown(done),
            notes=notes,
        )

    async def _restore_open(
        self,
        task_id: str,
        workspace: Path,
        repo: ShadowRepo,
        info: CheckpointInfo,
        changed: list[str],
    ) -> tuple[list[str], list[str]]:
        """Restore the open notebooks of `workspace` whose content the restore
        changes, or whose file differs from the checkpoint while JupyterLab
        shows it, through their hosts. Returns those restored so, and notes."""
        notebooks = {
            path: notebook
            for path, notebook in (await self._open(workspace)).items()
            if not repo.left_alone(path) and path not in repo.unsaved
        }
        if not notebooks or self.documents is None:
            return [], []
        regular = await repo.regular_files(info.commit, sorted(notebooks))
        notes: list[str] = []
        contents: dict[str, tuple[OpenNotebook, dict[str, Any]]] = {}
        for path, notebook in sorted(notebooks.items()):
            if path not in regular:
                if path in changed:
                    notes.append(
                        f"{shown_name(path)} was no notebook file at checkpoint {info.number}: the restore "
                        "removed or replaced its file, but JupyterLab still shows it open "
                        "(close it there without saving)."
                    )
                continue
            data = await repo.show(info.commit, path)
            nb = notebook_json(data) if data is not None else None
            if nb is None:
                if path in changed:
                    notes.append(
                        f"{shown_name(path)} at checkpoint {info.number} is not a notebook JupyterLab can "
                        "show: its file was restored, JupyterLab may ask whether to reload it."
                    )
                continue
            if path not in changed:
                # The open document is the checkpoint's already; its file may not be.
                on_disk = await anyio.to_thread.run_sync(read_file, workspace, path)
                if cells_of(on_disk) == cells_of(data):
                    continue
            contents[path] = (notebook, nb)
        done, more = await replace_all(self.documents, workspace, contents, task_id)
        return done, notes + more

    async def replay(
        self, task_id: str, workspace: Path, plan: list[ExecutionRecord], skip: Collection[int]
    ) -> KernelReplay:
        """Restart the task's kernel and replay `plan` (the caller got approval)."""
        if self.kernels is None:
            return KernelReplay(approved=True, error="This hdsp daemon runs no kernels.")
        record = functools.partial(self.record_execution, task_id)
        return await replay_kernel(record, self.kernels, task_id, workspace, plan, skip)

    async def announce_restored(self, info: CheckpointInfo, mode: str) -> None:
        await self._journal.emit(CheckpointRestored(payload=(info.task_id, info, mode)))
