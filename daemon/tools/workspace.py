"""The task's workspace: the one directory tree the agent's file tools may touch.

Every path the model gives goes through `Workspace` before a tool uses it:

- it is read relative to the root (an absolute path must lie under the root);
- `..` that climbs out of the root, an absolute path elsewhere, and a symlink whose
  target lies outside the root are refused, so a tool can never read or write
  outside the tree the user chose;
- paths matched by `.hdspignore` (gitignore syntax, in the root, re-read whenever
  it changes) are hidden: reads, listings and searches behave as if they did not
  exist, and writes to them are refused;
- protected paths (`.hdspignore`, `.git/`, `.hdsp/` and the user's patterns) are
  reported by `is_protected`, so that the approval policy always asks a person
  before a write to them, whatever the auto-approval switches say.

Errors, all `ToolError`s (the model reads the message and can act on it):

    ToolError
    ├── OutsideWorkspaceError   the path leads out of the root
    ├── IgnoredPathError        a write to a path .hdspignore hides
    └── PathNotFoundError       nothing there, or hidden by .hdspignore (for reads)

The methods do blocking file-system calls; async tools call them in a worker thread.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar

from pathspec import GitIgnoreSpec

from .base import ToolError

__all__ = [
    "IgnoredPathError",
    "OutsideWorkspaceError",
    "PathNotFoundError",
    "Workspace",
    "WorkspaceEntry",
]


class OutsideWorkspaceError(ToolError):
    """The path leads out of the workspace (`..`, an absolute path, a symlink)."""


class IgnoredPathError(ToolError):
    """A write to a path that `.hdspignore` hides from the agent."""


class PathNotFoundError(ToolError):
    """Nothing at the path, or something `.hdspignore` hides (the same to the agent)."""


@dataclass(frozen=True)
class WorkspaceEntry:
    """One visible file or directory met by `Workspace.walk`."""

    path: Path
    #: Relative to the root, POSIX separators, no trailing slash.
    relative: str
    is_dir: bool
    #: Bytes, for files; None for directories.
    size: int | None


#: Directories that recursive walks do not descend into: version control, caches
#: and environments, which would fill any listing or search with noise. They are
#: still listed, and a walk that starts inside one sees its content.
NOISE_DIRS: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".ipynb_checkpoints",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "node_modules",
        ".venv",
        "venv",
        ".tox",
    }
)

_EMPTY_SPEC = GitIgnoreSpec.from_lines([])


def _matches(spec: GitIgnoreSpec, relative: str, *, is_dir: bool) -> bool:
    """Whether gitignore-style `spec` matches `relative` or a directory above it.

    Ancestors are checked first, as git does: once a directory is excluded, no
    pattern inside it can bring a file back.
    """
    if relative in ("", "."):
        return False
    parts = PurePosixPath(relative).parts
    for depth in range(1, len(parts)):
        if spec.match_file("/".join(parts[:depth]) + "/"):
            return True
    return bool(spec.match_file(relative + "/" if is_dir else relative))


class Workspace:
    """Resolves the model's paths inside `root`; see the module docstring."""

    IGNORE_FILE: ClassVar[str] = ".hdspignore"
    DEFAULT_PROTECTED: ClassVar[tuple[str, ...]] = (".hdspignore", ".git/", ".hdsp/")

    def __init__(self, root: str | os.PathLike[str], *, protected: Iterable[str] = ()) -> None:
        given = Path(os.path.abspath(root))
        self.root = given.resolve()
        if not self.root.is_dir():
            raise ToolError(
                f"The task's workspace {str(given)!r} is not a directory (it may have been "
                "moved or deleted); no file tool can work until it exists."
            )
        # The root as the task names it may pass through a symlink; an absolute
        # path the model copies from the prompt then starts with that spelling.
        self._roots = (self.root, given) if given != self.root else (self.root,)
        self._protected = GitIgnoreSpec.from_lines([*self.DEFAULT_PROTECTED, *protected])
        self._ignore_stamp: tuple[int, int, int, int] | None = None
        self._ignore = _EMPTY_SPEC

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def __fspath__(self) -> str:
        return str(self.root)

    # ---- .hdspignore ------------------------------------------------------------

    def ignore_spec(self) -> GitIgnoreSpec:
        """The current `.hdspignore`, read again only when the file has changed."""
        try:
            st = (self.root / self.IGNORE_FILE).stat()
        except FileNotFoundError:
            self._ignore_stamp, self._ignore = None, _EMPTY_SPEC
            return self._ignore
        stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if stamp != self._ignore_stamp:
            try:
                text = (self.root / self.IGNORE_FILE).read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                text = ""
            self._ignore = GitIgnoreSpec.from_lines(text.splitlines())
            self._ignore_stamp = stamp
        return self._ignore

    # ---- paths ------------------------------------------------------------------

    def relative(self, path: Path) -> str:
        """`path` (inside the root) as the agent sees it: relative, POSIX, "." for the root."""
        for root in self._roots:
            if path == root:
                return "."
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix()
        raise OutsideWorkspaceError(f"{str(path)!r} is outside the workspace {str(self.root)!r}.")

    def _locate(self, path: str) -> tuple[str, str, Path]:
        """The lexical and the real relative path of the model's `path`, and the
        real absolute path; refuses any way out of the root."""
        raw = path.strip()
        given = Path(raw) if raw else Path(".")
        out = OutsideWorkspaceError(
            f"{path!r} is outside the workspace {str(self.root)!r}; "
            "only paths inside it can be used (relative paths start at the workspace)."
        )
        if given.is_absolute():
            lexical = Path(os.path.normpath(given))
            for root in self._roots:
                if lexical == root or lexical.is_relative_to(root):
                    lexical_rel = lexical.relative_to(root).as_posix()
                    break
            else:
                raise out
        else:
            lexical_rel = os.path.normpath(given.as_posix())
            if lexical_rel == ".." or lexical_rel.startswith("../"):
                raise out
        try:
            real = (self.root / lexical_rel).resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (3.11)
            raise ToolError(f"{path!r} cannot be resolved: {exc}.") from exc
        if not (real == self.root or real.is_relative_to(self.root)):
            raise OutsideWorkspaceError(
                f"{path!r} leads out of the workspace through a symbolic link "
                f"(to {str(real)!r}); only paths inside {str(self.root)!r} can be used."
            )
        real_rel = "." if real == self.root else real.relative_to(self.root).as_posix()
        return lexical_rel, real_rel, real

    def _hidden(self, lexical_rel: str, real_rel: str, real: Path) -> bool:
        spec = self.ignore_spec()
        is_dir = real.is_dir()
        return _matches(spec, lexical_rel, is_dir=is_dir) or _matches(spec, real_rel, is_dir=is_dir)

    def resolve(self, path: str) -> Path:
        """The real path to read at `path`. Raises `OutsideWorkspaceError`, or
        `PathNotFoundError` when `.hdspignore` hides it (whether it exists is for
        the caller to check, with `not_found` giving the same message)."""
        lexical_rel, real_rel, real = self._locate(path)
        if self._hidden(lexical_rel, real_rel, real):
            raise self.not_found(path)
        return real

    def resolve_for_write(self, path: str) -> Path:
        """The real path to write at `path`. Raises `OutsideWorkspaceError`, or
        `IgnoredPathError` when `.hdspignore` hides it."""
        lexical_rel, real_rel, real = self._locate(path)
        if self._hidden(lexical_rel, real_rel, real):
            raise IgnoredPathError(
                f"{path!r} is excluded by {self.IGNORE_FILE}: hdsp does not let the agent "
                "write there. Choose another path."
            )
        return real

    def not_found(self, path: str) -> PathNotFoundError:
        """The error for a missing path, which is also the error for a hidden one."""
        return PathNotFoundError(f"No such file or directory in the workspace: {path!r}.")

    def is_ignored(self, path: Path) -> bool:
        """Whether `.hdspignore` hides `path` (an absolute path inside the root)."""
        return _matches(self.ignore_spec(), self.relative(path), is_dir=path.is_dir())

    def is_protected(self, path: str) -> bool:
        """Whether a write to the model's `path` always needs a person's approval.

        A path outside the workspace counts as protected: no write tool will write
        there, and no one should be told it was approved automatically."""
        try:
            lexical_rel, real_rel, real = self._locate(path)
        except OutsideWorkspaceError:
            return True
        is_dir = real.is_dir()
        return _matches(self._protected, lexical_rel, is_dir=is_dir) or _matches(
            self._protected, real_rel, is_dir=is_dir
        )

    # ---- walking ------------------------------------------------------------------

    def walk(self, start: Path, *, recursive: bool) -> Iterator[WorkspaceEntry]:
        """The visible entries under the directory `start`, breadth first (so that a
        cut listing shows the top levels), sorted by name within a directory.

        Hidden entries are skipped; so are symlinks that lead out of the root or to
        hidden places. Symlinked directories are listed but not entered (no loops),
        and neither are `NOISE_DIRS` below `start`."""
        spec = self.ignore_spec()
        queue: deque[Path] = deque([start])
        while queue:
            directory = queue.popleft()
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except (PermissionError, FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                path = Path(entry.path)
                relative = self.relative(path)
                try:
                    is_link = entry.is_symlink()
                    is_dir = entry.is_dir()
                    if is_link:
                        real = path.resolve()
                        if not real.is_relative_to(self.root) or real == self.root:
                            continue
                        if _matches(spec, real.relative_to(self.root).as_posix(), is_dir=is_dir):
                            continue
                    size = None if is_dir else entry.stat().st_size
                except (OSError, RuntimeError):
                    continue  # vanished, or a dangling link
                if _matches(spec, relative, is_dir=is_dir):
                    continue
                yield WorkspaceEntry(path=path, relative=relative, is_dir=is_dir, size=size)
                if recursive and is_dir and not is_link and entry.name not in NOISE_DIRS:
                    queue.append(path)
