"""The task's workspace: the one directory tree the agent's file tools may touch.

Every path the model gives goes through `Workspace`, and every file a tool reads,
writes or lists is opened by it:

- a path is read relative to the root (an absolute path must lie under the root);
- `..` that climbs out of the root, an absolute path elsewhere, and a symlink whose
  target lies outside the root are refused, so a tool can never read or write
  outside the tree the user chose;
- files are opened race-free: from a descriptor of the root, one component at a
  time with `O_NOFOLLOW` (`os.open(name, flags, dir_fd=parent)`), resolving the
  workspace's own symlinks by hand inside the root. A directory swapped for a
  symlink by a concurrent process is then met as a symlink, never passed through,
  so nothing outside the root is ever opened, created, renamed or listed;
- writes are atomic (a temporary file created `O_EXCL` in the target's directory
  descriptor, fsync, rename within that descriptor); a new file gets the mode a
  normal program gives it (0o666 less the umask), a replaced file keeps its own;
- paths matched by `.hdspignore` (gitignore syntax, in the root, re-read whenever
  it changes) are hidden: reads, listings and searches behave as if they did not
  exist, and writes to them are refused. The check looks at the path actually
  opened as well as the path as the model spelled it;
- protected paths (`.hdspignore`, `.git/`, `.hdsp/` and the user's patterns) are
  reported by `is_protected`, so that the approval policy always asks a person
  before a write to them, whatever the auto-approval switches say;
- names that are not valid UTF-8, or hold control characters, reach the model
  with a visible escape (`report\\xff.csv`, `a\\x0ab`: the rule of
  `hdsp.protocol.file_names`), and that spelling is accepted back.

Errors, all `ToolError`s (the model reads the message and can act on it):

    ToolError
    ├── OutsideWorkspaceError   the path leads out of the root
    ├── IgnoredPathError        a write to a path .hdspignore hides
    └── PathNotFoundError       nothing there, or hidden by .hdspignore (for reads)

A path the OS refuses (a NUL byte, a name too long) is a plain `ToolError`. No
message says where a symlink that leads out of the workspace points.

The methods do blocking file-system calls; async tools call them in a worker thread.
"""

from __future__ import annotations

import errno
import functools
import os
import secrets
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, ClassVar, TypeVar

from hdsp.protocol import os_name, shown_name

from .base import ToolError

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = [
    "IgnoredPathError",
    "Located",
    "OutsideWorkspaceError",
    "PathNotFoundError",
    "Workspace",
    "WorkspaceEntry",
    "gitignore_spec",
]

_T = TypeVar("_T")


class OutsideWorkspaceError(ToolError):
    """The path leads out of the workspace (`..`, an absolute path, a symlink)."""


class IgnoredPathError(ToolError):
    """A write to a path that `.hdspignore` hides from the agent."""


class PathNotFoundError(ToolError):
    """Nothing at the path, or something `.hdspignore` hides (the same to the agent)."""


# ---- results ----------------------------------------------------------------------


@dataclass(frozen=True)
class Located:
    """Where the model's path leads, inside the root (found, or not yet existing)."""

    #: Relative to the root after symlinks, POSIX separators, "." for the root; an
    #: OS name (it may hold surrogate escapes; `shown` is for the model).
    relative: str
    exists: bool
    is_dir: bool

    @property
    def shown(self) -> str:
        return shown_name(self.relative)


@dataclass(frozen=True)
class WorkspaceEntry:
    """One visible file or directory met by `Workspace.walk`."""

    path: Path
    #: Relative to the root, POSIX separators, no trailing slash (an OS name).
    relative: str
    is_dir: bool
    #: Bytes, for files; None for directories.
    size: int | None

    @property
    def shown(self) -> str:
        return shown_name(self.relative)


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


def gitignore_spec(lines: Iterable[str]) -> GitIgnoreSpec:
    """A gitignore-style spec of `lines`. pathspec is imported here, the first time
    (the daemon's warm-up imports it): no command waits for it at start-up."""
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(lines)


@functools.cache
def _empty_spec() -> GitIgnoreSpec:
    return gitignore_spec([])


#: Stripped from the ends of a model's path (a stray newline): no shown name
#: holds a control character, so no name loses one (a space it may hold).
_CONTROL_SPACE = "\t\n\v\f\r"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Opens whatever the walk found (a file or a directory) without following a
#: symlink, and without blocking should it have become a pipe meanwhile.
_NODE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: Symlinks followed in one path before it counts as a loop (Linux's MAXSYMLINKS).
_MAX_SYMLINKS = 40
#: Times a path is walked again after the tree changed under the walk.
_MAX_RETRIES = 100


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


class _Raced(Exception):
    """The tree changed under a walk (a directory became a symlink): walk again."""


@dataclass
class _Target:
    """The end of a walk: the directory `parent_fd` (owned, open) and the `name`
    in it the path leads to ("." for the root), not a symlink when it was looked at."""

    parent_fd: int
    name: str
    #: Components of the path below `name` that do not exist (a missing directory).
    missing: list[str]
    #: The real path of `name` relative to the root, as components.
    parts: list[str]
    st: os.stat_result | None

    @property
    def relative(self) -> str:
        parts = [*self.parts, *self.missing]
        return "/".join(parts) if parts else "."


class Workspace:
    """Resolves and opens the model's paths inside `root`; see the module docstring."""

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
        self._protected = gitignore_spec([*self.DEFAULT_PROTECTED, *protected])
        self._ignore_stamp: tuple[int, int, int, int] | None = None
        self._ignore = _empty_spec()
        self._ignore_lines: list[str] = []

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def __fspath__(self) -> str:
        return str(self.root)

    # ---- .hdspignore ------------------------------------------------------------

    def ignore_spec(self) -> GitIgnoreSpec:
        """The current `.hdspignore`, read again only when the file has changed."""
        self.ignore_lines()
        return self._ignore

    def ignore_lines(self) -> list[str]:
        """The lines of the current `.hdspignore` (none when there is none, or it
        is not a regular file inside the workspace: a pipe, a link out of it),
        read again only when the file has changed."""
        try:
            with self._opened(self.IGNORE_FILE, create_parents=False) as (fd, st):
                if st is None or not stat.S_ISREG(st.st_mode):
                    raise FileNotFoundError
                stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
                if stamp != self._ignore_stamp:
                    with os.fdopen(os.dup(fd), "rb") as f:
                        # (As OS names are decoded: a pattern of bytes that
                        # are not UTF-8 matches the names it spells.)
                        text = os.fsdecode(f.read())
                    self._ignore_lines = text.splitlines()
                    self._ignore = gitignore_spec(self._ignore_lines)
                    self._ignore_stamp = stamp
        except (FileNotFoundError, ToolError):
            self._ignore_stamp, self._ignore, self._ignore_lines = None, _empty_spec(), []
        return self._ignore_lines

    # ---- paths ------------------------------------------------------------------

    def relative(self, path: Path) -> str:
        """`path` (inside the root) as the agent sees it: relative, POSIX, "." for the root."""
        for root in self._roots:
            if path == root:
                return "."
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix()
        raise OutsideWorkspaceError(f"{str(path)!r} is outside the workspace {str(self.root)!r}.")

    def _lexical(self, path: str) -> str:
        """The model's `path` relative to the root, before symlinks: escapes read
        back (`\\xff`), `.` and `..` folded; refuses `..` out of the root, an
        absolute path elsewhere, and what no OS path can hold."""
        if "\0" in path:
            raise ToolError(f"{path!r} contains a NUL byte, which no file path can hold.")
        raw = os_name(path.strip(_CONTROL_SPACE))
        try:
            os.fsencode(raw)
        except UnicodeError:
            raise ToolError(f"{path!r} is not a valid file path (invalid characters).") from None
        given = Path(raw) if raw else Path(".")
        out = OutsideWorkspaceError(
            f"{path!r} is outside the workspace {str(self.root)!r}; "
            "only paths inside it can be used (relative paths start at the workspace)."
        )
        if given.is_absolute():
            lexical = Path(os.path.normpath(given))
            for root in self._roots:
                if lexical == root or lexical.is_relative_to(root):
                    return lexical.relative_to(root).as_posix()
            raise out
        lexical_rel = os.path.normpath(given.as_posix())
        if lexical_rel == ".." or lexical_rel.startswith("../"):
            raise out
        return lexical_rel

    def _link_target(self, target: str, path: str) -> tuple[bool, list[str]]:
        """A symlink's target as (from the root?, components); refuses an absolute
        target outside the root without saying where it points."""
        if not target.startswith("/"):
            return False, [p for p in target.split("/") if p]
        normal = Path(os.path.normpath(target))
        for root in self._roots:
            if normal == root or normal.is_relative_to(root):
                return True, [p for p in normal.relative_to(root).as_posix().split("/") if p]
        raise self._out_by_link(path)

    @staticmethod
    def _out_by_link(path: str) -> OutsideWorkspaceError:
        return OutsideWorkspaceError(
            f"{path!r} leads out of the workspace through a symbolic link; only paths "
            "inside the workspace can be used."
        )

    @staticmethod
    def _os_error(path: str, exc: OSError | ValueError) -> ToolError:
        """The error the model gets for what the OS refused of `path` (a ValueError:
        a path it cannot take, such as one with a NUL byte)."""
        if isinstance(exc, ValueError):
            return ToolError(f"{path!r} is not a valid file path: {exc}.")
        reason = exc.strerror or type(exc).__name__
        return ToolError(f"{path!r} cannot be used: {reason}.")

    def _walk(self, path: str, lexical: str, *, create_parents: bool) -> _Target:
        """Walk `lexical` from a descriptor of the root, one component at a time,
        never through a symlink: the workspace's symlinks are read and followed by
        hand, inside the root. Missing directories are made when `create_parents`;
        otherwise they end the walk (`_Target.missing`)."""
        root_fd = os.open(self.root, _DIR_FLAGS)
        stack: list[tuple[str, int]] = []
        pending = deque(p for p in lexical.split("/") if p not in ("", "."))
        links = races = 0

        def current() -> int:
            return stack[-1][1] if stack else root_fd

        def unwind() -> None:
            while stack:
                os.close(stack.pop()[1])

        try:
            while pending:
                if races > _MAX_RETRIES:
                    raise ToolError(f"{path!r} keeps changing while it is opened; try again later.")
                name = pending.popleft()
                if name == "..":
                    if not stack:
                        raise self._out_by_link(path)
                    os.close(stack.pop()[1])
                    continue
                fd = current()
                try:
                    st: os.stat_result | None = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > _MAX_SYMLINKS:
                        raise ToolError(f"{path!r} cannot be used: too many symbolic links.")
                    try:
                        target = os.readlink(name, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno not in (errno.EINVAL, errno.ENOENT):
                            raise
                        races += 1  # no longer a symlink: look again
                        pending.appendleft(name)
                        continue
                    from_root, parts = self._link_target(target, path)
                    if from_root:
                        unwind()
                    pending.extendleft(reversed(parts))
                    continue
                if not pending or (st is None and not create_parents):
                    # The end: the last component, or a missing directory.
                    return _Target(
                        parent_fd=os.dup(fd),
                        name=name,
                        missing=list(pending),
                        parts=[*(n for n, _ in stack), name],
                        st=st,
                    )
                if st is None:
                    try:
                        os.mkdir(name, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                elif not stat.S_ISDIR(st.st_mode):
                    raise ToolError(f"{path!r} cannot be used: {name!r} is not a directory.")
                try:
                    stack.append((name, os.open(name, _DIR_FLAGS, dir_fd=fd)))
                except OSError as exc:
                    # Changed since the stat: now a symlink (ELOOP), gone, or a file.
                    if exc.errno not in (errno.ELOOP, errno.ENOENT, errno.ENOTDIR):
                        raise
                    races += 1
                    pending.appendleft(name)
            # No components: the root itself.
            return _Target(
                parent_fd=os.dup(root_fd), name=".", missing=[], parts=[], st=os.fstat(root_fd)
            )
        finally:
            unwind()
            os.close(root_fd)

    def _located(self, path: str, *, create_parents: bool = False) -> tuple[str, _Target]:
        """The lexical relative path and the walk's target (the caller closes it).
        Any error the OS gives becomes a ToolError naming the model's path."""
        lexical = self._lexical(path)
        try:
            target = self._walk(path, lexical, create_parents=create_parents)
        except ToolError:
            raise
        except (OSError, ValueError) as exc:
            raise self._os_error(path, exc) from None
        return lexical, target

    def _check_missing(self, path: str, target: _Target) -> None:
        """Refuse `..` among the missing components when it climbs out of the root."""
        normal = os.path.normpath(target.relative)
        if normal == ".." or normal.startswith("../"):
            raise self._out_by_link(path)

    def _hidden(self, lexical_rel: str, real_rel: str, *, is_dir: bool) -> bool:
        spec = self.ignore_spec()
        return _matches(spec, lexical_rel, is_dir=is_dir) or _matches(spec, real_rel, is_dir=is_dir)

    def locate(self, path: str, *, write: bool = False) -> Located:
        """Where the model's `path` leads. Raises `OutsideWorkspaceError`; a path
        `.hdspignore` hides raises `PathNotFoundError` (`write`: `IgnoredPathError`)."""
        lexical, target = self._located(path)
        try:
            self._check_missing(path, target)
            is_dir = target.st is not None and stat.S_ISDIR(target.st.st_mode)
            relative = os.path.normpath(target.relative)
            self._check_visible(path, lexical, relative, is_dir=is_dir, write=write)
            exists = target.st is not None and not target.missing
            return Located(relative=relative, exists=exists, is_dir=is_dir and exists)
        finally:
            os.close(target.parent_fd)

    def _check_visible(
        self, path: str, lexical: str, relative: str, *, is_dir: bool, write: bool
    ) -> None:
        if not self._hidden(lexical, relative, is_dir=is_dir):
            return
        if write:
            raise IgnoredPathError(
                f"{path!r} is excluded by {self.IGNORE_FILE}: hdsp does not let the agent "
                "write there. Choose another path."
            )
        raise self.not_found(path)

    def resolve(self, path: str) -> Path:
        """The real path to read at `path`. Raises `OutsideWorkspaceError`, or
        `PathNotFoundError` when `.hdspignore` hides it (whether it exists is for
        the caller to check, with `not_found` giving the same message). Only for
        a path handed to another program: tools open files with `open`."""
        return self.root / self.locate(path).relative

    def resolve_for_write(self, path: str) -> Path:
        """The real path to write at `path`. Raises `OutsideWorkspaceError`, or
        `IgnoredPathError` when `.hdspignore` hides it."""
        return self.root / self.locate(path, write=True).relative

    def not_found(self, path: str) -> PathNotFoundError:
        """The error for a missing path, which is also the error for a hidden one."""
        return PathNotFoundError(f"No such file or directory in the workspace: {path!r}.")

    def is_protected(self, path: str) -> bool:
        """Whether a write to the model's `path` always needs a person's approval.

        A path outside the workspace, or one no file can have, counts as protected:
        no write tool will write there, and no one should be told it was approved
        automatically."""
        try:
            lexical, target = self._located(path)
        except ToolError:
            return True
        try:
            self._check_missing(path, target)
        except ToolError:
            return True
        finally:
            os.close(target.parent_fd)
        is_dir = target.st is not None and stat.S_ISDIR(target.st.st_mode)
        real = os.path.normpath(target.relative)
        return _matches(self._protected, lexical, is_dir=is_dir) or _matches(
            self._protected, real, is_dir=is_dir
        )

    # ---- opening ----------------------------------------------------------------------

    def _retrying(
        self, path: str, op: Callable[[str, _Target], _T], *, create_parents: bool = False
    ) -> _T:
        """Walk to `path` and run `op` on the target, walking again when the tree
        changed between the walk and the open (`op` raises `_Raced`)."""
        for _ in range(_MAX_RETRIES):
            lexical, target = self._located(path, create_parents=create_parents)
            try:
                self._check_missing(path, target)
                return op(lexical, target)
            except _Raced:
                continue
            except ToolError:
                raise
            except (OSError, ValueError) as exc:
                raise self._os_error(path, exc) from None
            finally:
                os.close(target.parent_fd)
        raise ToolError(f"{path!r} keeps changing while it is opened; try again later.")

    @staticmethod
    def _open_node(target: _Target) -> tuple[int, os.stat_result]:
        """Open what the walk found, as it was found (a symlink now: `_Raced`)."""
        try:
            fd = os.open(target.name, _NODE_FLAGS, dir_fd=target.parent_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOENT):
                raise _Raced from None
            raise
        st = os.fstat(fd)
        assert target.st is not None
        if stat.S_IFMT(st.st_mode) != stat.S_IFMT(target.st.st_mode):
            os.close(fd)
            raise _Raced
        return fd, st

    @contextmanager
    def _opened(
        self, path: str, *, create_parents: bool
    ) -> Iterator[tuple[int, os.stat_result | None]]:
        """An open descriptor of the file or directory at `path` (no hidden check;
        nothing there: FileNotFoundError). Pipes and devices are never opened."""

        def op(lexical: str, target: _Target) -> tuple[int, os.stat_result]:
            if target.st is None or target.missing:
                raise FileNotFoundError(path)
            if not (stat.S_ISREG(target.st.st_mode) or stat.S_ISDIR(target.st.st_mode)):
                raise ToolError(f"{path!r} is not a regular file (a pipe, a device); not read.")
            return self._open_node(target)

        fd, st = self._retrying(path, op, create_parents=create_parents)
        try:
            yield fd, st
        finally:
            os.close(fd)

    @contextmanager
    def open(self, path: str, *, write: bool = False) -> Iterator[tuple[Located, int]]:
        """The file or directory at the model's `path`, open (a descriptor, closed
        on exit), as the walk found it. Missing or hidden: `PathNotFoundError`
        (`write`: hidden is `IgnoredPathError`); a pipe or device: ToolError."""
        holder: list[Located] = []

        def op(lexical: str, target: _Target) -> tuple[int, os.stat_result]:
            is_dir = target.st is not None and stat.S_ISDIR(target.st.st_mode)
            relative = target.relative
            self._check_visible(path, lexical, relative, is_dir=is_dir, write=write)
            if target.st is None or target.missing:
                raise self.not_found(path)
            if not (stat.S_ISREG(target.st.st_mode) or is_dir):
                raise ToolError(f"{path!r} is not a regular file (a pipe, a device).")
            holder[:] = [Located(relative=relative, exists=True, is_dir=is_dir)]
            return self._open_node(target)

        fd, _ = self._retrying(path, op)
        try:
            yield holder[0], fd
        finally:
            os.close(fd)

    def read_bytes(self, path: str, *, write: bool = False) -> tuple[Located, bytes | None]:
        """The whole content of the regular file at `path` (None: no file there yet;
        a write may create it). A directory is a ToolError."""
        try:
            with self.open(path, write=write) as (located, fd):
                if located.is_dir:
                    raise ToolError(f"{path!r} is a directory; give a file path.")
                with os.fdopen(os.dup(fd), "rb") as f:
                    return located, f.read()
        except PathNotFoundError:
            if not write:
                raise
            return self.locate(path, write=True), None

    def write_bytes(
        self,
        path: str,
        data: bytes,
        *,
        check: Callable[[bytes | None], None] | None = None,
        create_parents: bool = True,
    ) -> tuple[Located, bool]:
        """Write `data` to the file at `path` atomically; returns where, and whether
        the file is new. `check` sees the current content (None: no file) first and
        raises to refuse. Missing directories are made when `create_parents`;
        otherwise a missing folder is a ToolError."""
        # First without touching anything: refuse hidden and outside paths before a
        # directory is made on the way to them.
        self.locate(path, write=True)

        def op(lexical: str, target: _Target) -> tuple[Located, bool]:
            relative = target.relative
            is_dir = target.st is not None and stat.S_ISDIR(target.st.st_mode)
            self._check_visible(path, lexical, relative, is_dir=is_dir, write=True)
            if target.missing:
                raise ToolError(f"The folder of {path!r} does not exist.")
            if is_dir:
                raise ToolError(f"{path!r} is a directory; give a file path.")
            mode: int | None = None
            current: bytes | None = None
            if target.st is not None:
                if not stat.S_ISREG(target.st.st_mode):
                    raise ToolError(f"{path!r} is not a regular file (a pipe, a device).")
                fd, st = self._open_node(target)
                with os.fdopen(fd, "rb") as f:
                    current = f.read() if check is not None else None
                mode = stat.S_IMODE(st.st_mode)
            if check is not None:
                check(current)
            _replace(target.parent_fd, target.name, data, mode)
            return Located(relative=relative, exists=True, is_dir=False), target.st is None

        return self._retrying(path, op, create_parents=create_parents)

    # ---- walking ------------------------------------------------------------------

    @contextmanager
    def _open_real_dir(self, relative: str) -> Iterator[int | None]:
        """The directory at the real `relative` path (no symlinks on the way: a
        component that is one now gives None), open."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for name in (p for p in relative.split("/") if p not in ("", ".")):
                try:
                    inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    os.close(fd)
                    fd = -1
                    break
                os.close(fd)
                fd = inner
            yield fd if fd >= 0 else None
        finally:
            if fd >= 0:
                os.close(fd)

    def _link_destination(self, relative: str) -> Located | None:
        """Where the symlink at the real `relative` path leads, if inside the root."""
        try:
            return self.locate(shown_name(relative))
        except ToolError:
            return None

    def walk(self, start: Path | str, *, recursive: bool) -> Iterator[WorkspaceEntry]:
        """The visible entries under the directory `start` (a real path: absolute
        inside the root, or relative to it), breadth first (so that a cut listing
        shows the top levels), sorted by name within a directory.

        Directories are read through descriptors opened without following any
        symlink. Hidden entries are skipped; so are symlinks that lead out of the
        root or to hidden places. Symlinked directories are listed but not entered
        (no loops), and neither are `NOISE_DIRS` below `start`."""
        for entry, _, _ in self._entries(start, recursive=recursive):
            yield entry

    def files(self, start: str) -> Iterator[tuple[WorkspaceEntry, int]]:
        """The visible files below the directory `start`, in `walk` order, each
        with a descriptor open for reading (closed when the next is asked for):
        opened in the directory the walk holds, so what is read is what was
        listed. Files that vanish or change into something else are skipped."""
        for entry, dir_fd, name in self._entries(start, recursive=True):
            if entry.is_dir:
                continue
            if dir_fd is None:  # a symlink: followed by hand, inside the root
                try:
                    with self.open(entry.shown) as (located, fd):
                        if not located.is_dir:
                            yield entry, fd
                except ToolError:
                    pass
                continue
            try:
                fd = os.open(name, _NODE_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    yield entry, fd
            finally:
                os.close(fd)

    def _entries(
        self, start: Path | str, *, recursive: bool
    ) -> Iterator[tuple[WorkspaceEntry, int | None, str]]:
        """`walk`'s entries, each with the descriptor of its directory (None for a
        symlink, which must be followed by hand) and its name there."""
        spec = self.ignore_spec()
        first = self.relative(start) if isinstance(start, Path) else start
        queue: deque[str] = deque([first])
        while queue:
            directory = queue.popleft()
            with self._open_real_dir(directory) as fd:
                if fd is None:
                    continue
                try:
                    with os.scandir(fd) as it:
                        entries = sorted(it, key=lambda e: e.name)
                except OSError:
                    continue
                for entry in entries:
                    relative = entry.name if directory == "." else f"{directory}/{entry.name}"
                    try:
                        is_link = entry.is_symlink()
                        if is_link:
                            dest = self._link_destination(relative)
                            if dest is None or not dest.exists or dest.relative == ".":
                                continue
                            is_dir = dest.is_dir
                        else:
                            is_dir = entry.is_dir(follow_symlinks=False)
                        size = None if is_dir else entry.stat(follow_symlinks=not is_link).st_size
                    except OSError:
                        continue  # vanished meanwhile
                    if is_link and size is not None:
                        size = self._size_of(relative)
                    if _matches(spec, relative, is_dir=is_dir):
                        continue
                    found = WorkspaceEntry(
                        path=self.root / relative, relative=relative, is_dir=is_dir, size=size
                    )
                    yield found, None if is_link else fd, entry.name
                    if recursive and is_dir and not is_link and entry.name not in NOISE_DIRS:
                        queue.append(relative)

    def _size_of(self, relative: str) -> int | None:
        try:
            with self.open(shown_name(relative)) as (_, fd):
                return os.fstat(fd).st_size
        except ToolError:
            return None


def _replace(dir_fd: int, name: str, data: bytes, mode: int | None) -> None:
    """Replace `name` in the directory `dir_fd` with `data` atomically: a temporary
    file made there `O_EXCL` (so with 0o666 less the umask, as any program would
    make it), written, synced, given `mode` (the replaced file's) and renamed over
    `name` within the same directory descriptor."""
    # (Cut by bytes: 64 characters of a name may be 256 bytes, over NAME_MAX.)
    head = os.fsdecode(os.fsencode(name)[:64])
    tmp = f".{head}.{secrets.token_hex(4)}.hdsp-tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o666,
        dir_fd=dir_fd,
    )
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.fsync(dir_fd)
