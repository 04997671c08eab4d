"""Checkpoints of notebooks open in JupyterLab: a checkpoint keeps what JupyterLab
shows, a restore puts the checkpoint back where JupyterLab shows it.

Since the notebook tools edit an open notebook in its open document (see
hdsp.daemon.tools.live_notebook), the agent's changes are in JupyterLab before
they are in the file, and the user saves when they choose. So:

- A checkpoint asks each document host for the whole of each open notebook of
  the workspace (`snapshot`) and keeps those bytes in place of the file's
  (ShadowRepo.save's `live`). The file is not written: saving what is open stays
  the user's business, unsaved work of theirs included.
- A restore, which the user asked for, sends the checkpoint's notebook to the
  host that holds it (`replace`): the host makes it the open document (every view
  shows it at once) and saves it as the user's save does, so the file matches
  the view and JupyterLab never finds its file changed behind its back. The
  file is read back to check; if the host did not answer, or the file does not
  hold the checkpoint's cells, the file is written as for a closed notebook, and
  the restore says so.

Which notebook a host's document is: hosts declare absolute paths. Only a path
that is the notebook itself counts: inside the workspace, with no symbolic link
on the way (its real path is itself), ending in `.ipynb`. So a notebook is read
into, and restored from, the checkpoint's entry at that same relative path:
whatever a model made of the workspace (links to other notebooks, to folders
outside it), a restore never sends one notebook's content to another's document,
nor to a notebook outside the workspace. Cells go into JupyterLab untrusted (a
checkpoint's `metadata.trusted` is dropped, as Jupyter drops it when it writes a
file), so a restored output's HTML or JavaScript runs no more than an opened
file's.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog

from hdsp.daemon.tools.base import ToolError
from hdsp.daemon.tools.live_notebook import HOST_ANSWER_LIMIT, HostGone, LiveNotebook
from hdsp.daemon.tools.notebook_hosts import NotebookHost, NotebookHosts
from hdsp.protocol import DocumentEdit

__all__ = [
    "MAX_OPEN_NOTEBOOKS",
    "REPLACE_ANSWER_LIMIT",
    "SNAPSHOT_ANSWER_LIMIT",
    "OpenNotebook",
    "cells_of",
    "find_open",
    "notebook_bytes",
    "notebook_json",
    "read_file",
    "replace_all",
    "snapshot_all",
]

log = structlog.get_logger("hdsp.checkpoints")

#: Open notebooks read for one checkpoint at most (the rest are kept from their
#: files, with a note).
MAX_OPEN_NOTEBOOKS = 32
#: Seconds a host has to give a notebook, for a checkpoint.
SNAPSHOT_ANSWER_LIMIT = HOST_ANSWER_LIMIT
#: Seconds a host has to replace a notebook and save it, in a restore.
REPLACE_ANSWER_LIMIT = 30.0


@dataclass(frozen=True)
class OpenNotebook:
    """A notebook of the workspace open in JupyterLab."""

    #: Relative to the workspace, as the shadow repository names it.
    path: str
    #: Absolute, as the host declared it (and as it really is).
    absolute: str
    host: NotebookHost


def find_open(documents: NotebookHosts, workspace: Path) -> dict[str, OpenNotebook]:
    """The notebooks of `workspace` open at a document host, by relative path
    (at most MAX_OPEN_NOTEBOOKS: those first in order of path). Touches the file
    system: run it on a worker thread."""
    root = os.path.realpath(workspace)
    found: dict[str, OpenNotebook] = {}
    declared = sorted({path for host in documents.hosts() for path in host.paths})
    for absolute in declared:
        if not absolute.endswith(".ipynb") or not absolute.startswith(root + os.sep):
            continue
        # (The notebook itself: no link on the way, nothing like a/../b.)
        if os.path.realpath(absolute) != absolute:
            continue
        host = documents.host_for(absolute)
        if host is None:
            continue
        relative = absolute[len(root) + 1 :]
        found[relative] = OpenNotebook(relative, absolute, host)
        if len(found) == MAX_OPEN_NOTEBOOKS:
            break
    return found


def _strip_transient(nb: dict[str, Any]) -> dict[str, Any]:
    """`nb` without what Jupyter never writes to a file: cells' `trusted` flags
    (trust is the server's to grant, from its signatures, never a file's to
    claim) and the original-format marks."""
    nb = copy.deepcopy(nb)
    metadata = nb.get("metadata")
    if isinstance(metadata, dict):
        for key in ("orig_nbformat", "orig_nbformat_minor", "signature"):
            metadata.pop(key, None)
    for cell in nb.get("cells") or []:
        if isinstance(cell, dict) and isinstance(cell.get("metadata"), dict):
            cell["metadata"].pop("trusted", None)
    return nb


def notebook_bytes(notebook: object) -> bytes | None:
    """A host's notebook as Jupyter writes it to a file (nbformat's JSON, one
    space of indent, sorted keys, lines split, a last newline); None if it is
    not a notebook."""
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None
    # (Imported here: nbformat's import costs the daemon's start-up; and its
    # functions carry no annotations.)
    nbformat: Any = importlib.import_module("nbformat")
    nbjson: Any = importlib.import_module("nbformat.v4.nbjson")
    try:
        node = nbformat.from_dict(_strip_transient(notebook))
        try:
            text: str = nbjson.writes(node)
            return (text + "\n").encode("utf-8")
        except UnicodeEncodeError:  # (a lone surrogate: kept escaped)
            text = nbjson.writes(node, ensure_ascii=True)
            return (text + "\n").encode("ascii")
    except (AttributeError, TypeError, ValueError):
        return None


def notebook_json(data: bytes) -> dict[str, Any] | None:
    """A checkpoint's notebook as a host takes it (untrusted); None if it is not
    an nbformat 4 notebook."""
    try:
        nb = json.loads(data)
    except ValueError:
        return None
    if (
        not isinstance(nb, dict)
        or nb.get("nbformat") != 4
        or not isinstance(nb.get("metadata", {}), dict)
        or not isinstance(nb.get("cells"), list)
        or not all(isinstance(c, dict) and isinstance(c.get("cell_type"), str) for c in nb["cells"])
    ):
        return None
    nb = _strip_transient(nb)
    nb.setdefault("metadata", {})
    nb.setdefault("nbformat_minor", 0)
    for cell in nb["cells"]:
        for key in ("source", "text"):
            if isinstance(cell.get(key), list):
                cell[key] = "".join(str(part) for part in cell[key])
        cell.setdefault("source", "")
        cell.setdefault("metadata", {})
        for output in cell.get("outputs") or []:
            if isinstance(output, dict):
                _join_lines(output)
    return nb


def _join_lines(output: dict[str, Any]) -> None:
    """An output's multiline strings whole (files keep them as lists of lines)."""
    if isinstance(output.get("text"), list):
        output["text"] = "".join(str(part) for part in output["text"])
    data = output.get("data")
    if isinstance(data, dict):
        for mime, value in data.items():
            if isinstance(value, list) and not mime.endswith("json"):
                data[mime] = "".join(str(part) for part in value)


def cells_of(data: bytes | None) -> list[tuple[str, str]] | None:
    """Each cell's type and source, in order (what must match for a notebook's
    file to hold a restore); None if `data` is not a notebook."""
    if data is None:
        return None
    nb = notebook_json(data)
    if nb is None:
        return None
    return [(str(c.get("cell_type")), str(c.get("source", ""))) for c in nb["cells"]]


def _document(
    documents: NotebookHosts, notebook: OpenNotebook, task_id: str, limit: float
) -> LiveNotebook:
    """The open notebook as the notebook tools reach it (a host that does not
    answer within `limit` seconds is forgotten)."""
    return LiveNotebook(documents, notebook.host, notebook.absolute, notebook.path, task_id, limit)


async def snapshot_all(
    documents: NotebookHosts,
    notebooks: Iterable[OpenNotebook],
    task_id: str,
) -> tuple[dict[str, bytes], list[str]]:
    """The bytes of each open notebook as its host shows it (asked of all hosts
    at once), and notes for those that could not be read (their files are kept)."""
    live: dict[str, bytes] = {}
    notes: list[str] = []

    async def one(notebook: OpenNotebook) -> None:
        document = _document(documents, notebook, task_id, SNAPSHOT_ANSWER_LIMIT)
        try:
            answer = await document.send(DocumentEdit(op="snapshot"))
        except (HostGone, ToolError) as exc:
            notes.append(
                f"{notebook.path} is open in JupyterLab, which did not give its cells "
                f"({exc}): its file was kept instead."
            )
            return
        data = notebook_bytes(answer.notebook)
        if data is None:
            notes.append(
                f"{notebook.path} is open in JupyterLab, which gave no notebook for it: its "
                "file was kept instead."
            )
            return
        live[notebook.path] = data

    async with anyio.create_task_group() as tg:
        for notebook in notebooks:
            tg.start_soon(one, notebook)
    return live, sorted(notes)


async def replace_all(
    documents: NotebookHosts,
    workspace: Path,
    contents: Mapping[str, tuple[OpenNotebook, dict[str, Any]]],
    task_id: str,
) -> tuple[list[str], list[str]]:
    """Have each host make its open notebook the checkpoint's and save it (all at
    once). Returns the notebooks restored so (their files checked to hold the
    checkpoint's cells), and notes for the others (whose files the caller writes)."""
    done: list[str] = []
    notes: list[str] = []

    async def one(notebook: OpenNotebook, nb: dict[str, Any]) -> None:
        document = _document(documents, notebook, task_id, REPLACE_ANSWER_LIMIT)
        try:
            answer = await document.send(DocumentEdit(op="replace", notebook=nb))
            if answer.status != "ok":  # (a host that knows no `replace`)
                raise ToolError(answer.message or answer.status)
        except (HostGone, ToolError) as exc:
            notes.append(
                f"{notebook.path} is open in JupyterLab, which did not take the restore "
                f"({exc}): its file was written instead; JupyterLab may ask whether to "
                "reload it."
            )
            return
        expected = [(str(c.get("cell_type")), str(c.get("source", ""))) for c in nb["cells"]]
        saved = await anyio.to_thread.run_sync(read_file, workspace, notebook.path)
        if cells_of(saved) != expected:
            log.warning("an open notebook's restore was not saved", path=notebook.path)
            notes.append(
                f"{notebook.path} is open in JupyterLab, which showed the restore but did not "
                "save it: its file was written instead; JupyterLab may ask whether to "
                "reload it."
            )
            return
        done.append(notebook.path)

    async with anyio.create_task_group() as tg:
        for notebook, nb in contents.values():
            tg.start_soon(one, notebook, nb)
    return sorted(done), sorted(notes)


def read_file(workspace: Path, relative: str) -> bytes | None:
    """The file's bytes, never through a link (the last part: find_open checked
    the folders); None if it cannot be read."""
    path = Path(os.path.realpath(workspace)) / relative
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()
