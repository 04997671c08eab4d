"""The shadow repository of one workspace: a git repository in hdsp's data dir
whose work tree is the workspace (seed 001, "체크포인트 시스템"), driven with the
real `git` binary.

- Its GIT_DIR lives in the data dir; `core.worktree` names the workspace. The
  environment's GIT_* variables never reach git (a GIT_DIR or GIT_WORK_TREE of
  the daemon's environment would point it at the user's repository), nor the
  user's or the system's git config, hooks or templates.
- The user's own `.git` is never read or written: git skips every path named
  `.git`, and a nested repository (a folder with a `.git` of its own) is left
  out, with a note, through the repository's `info/exclude` (where the list of
  them survives a restart); a restore never writes a file inside one, even one
  a checkpoint kept before the folder became a repository. (A nested repository
  gets no shadow of its own: its files belong to its own git, whose index and
  HEAD a restore behind its back would contradict.)
- What is left out: the workspace's `.gitignore` files (git reads them), its
  `.hdspignore` (read by hdsp as the file tools read it, never by git: a pipe or
  a link out of the workspace is no ignore file), the patterns of the settings,
  hdsp's own folders (data, runtime) when they lie inside the workspace, and
  files over the size limit (with a note).
- Nothing in the workspace steers git: its `.gitattributes` are overridden by
  `info/attributes` (no end-of-line or encoding conversion, no keyword
  expansion, no filter, no diff driver: files are kept and restored byte for
  byte, and a diff cannot be hidden as "binary"); no hook, fsmonitor, global or
  system config or attributes file is used; file names are never patterns
  (GIT_LITERAL_PATHSPECS: a file named `*` stands for itself). A path beyond a
  symbolic link (a folder replaced by a link) is only ever taken out of the
  index, never followed; git's checkout replaces such a link rather than
  writing through it. A file made a pipe or a socket is left out with a note,
  and left as it is by a restore (as a file over the size limit is).
- Saving is cheap when little changed: `git status` (the index's stat data and
  git's untracked cache; fsmonitor off) finds what changed, and only those
  paths are staged; when nothing changed no commit is made.
- Restoring never moves HEAD back: the index and the files are set to the
  checkpoint's tree (`git restore --source`), and the next save commits that
  state on top, so every checkpoint stays reachable.
- A notebook open in JupyterLab is kept as JupyterLab shows it: a save may be
  given its bytes (`live`, read from the open document by the caller), which are
  staged in place of the file's (`git hash-object`, `git update-index`): the
  file itself is never written, saving it stays the user's business. Such a
  notebook is kept only where its file would be (not ignored, not in a nested
  repository, under the size limit), and only as a regular file.

Every git command runs as a subprocess through anyio, never through a shell;
callers bound it with a deadline. A git killed hard (by that deadline, or with
hdspd's process group) leaves its lock files: the next save or restore removes
them, as nothing else runs git on the shadow repository.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog

from hdsp.daemon.errors import HdspError
from hdsp.daemon.tools.workspace import Workspace
from hdsp.protocol import ErrorCode, encodable_text, shown_name

__all__ = [
    "REFUSED_WORKSPACES",
    "GitFailed",
    "SavedTree",
    "ShadowRepo",
    "WorkspaceRefused",
    "refusal",
]

log = structlog.get_logger("hdsp.checkpoints")

#: Folders (relative to the home directory) whose shadow repository would take in
#: a person's whole life: refused, as Roo refuses them.
REFUSED_WORKSPACES = ("", "Desktop", "Documents", "Downloads")

#: The line of `info/exclude` after which the nested repositories are listed.
_NESTED_HEADER = "# Nested git repositories (their own git keeps them):"

#: An empty commit message body's author.
_IDENTITY = ("hdsp", "hdsp@localhost")

#: `info/attributes`, which wins over every `.gitattributes` of the workspace:
#: no conversion of any kind between the files and the checkpoints, and diffs
#: that decide for themselves what is binary.
_ATTRIBUTES = (
    "# Written by hdsp: the workspace's .gitattributes steer nothing here.\n"
    "* -text -eol -crlf -ident -filter -working-tree-encoding !diff !merge\n"
)

#: The modes of a regular file in a git tree (the only ones a notebook open in
#: JupyterLab is staged as).
_REGULAR = ("100644", "100755")

#: The lock files of the git commands a save and a restore run.
_GIT_LOCKS = ("index.lock", "HEAD.lock")

#: Settings given on every git command line (they win over the repository's
#: config, also one an older hdsp wrote).
_COMMAND_CONFIG = (
    "core.fsmonitor=false",
    f"core.hooksPath={os.devnull}",
    f"core.attributesFile={os.devnull}",
    f"core.excludesFile={os.devnull}",
)


class WorkspaceRefused(HdspError):
    """The workspace cannot have a shadow repository (the home directory, /)."""

    code = ErrorCode.INVALID_REQUEST


class GitFailed(HdspError):
    """A git command of the shadow repository failed (its stderr in the message)."""


def refusal(workspace: Path, private: Sequence[Path] = ()) -> str | None:
    """Why `workspace` may not have a shadow repository, or None. `private`:
    hdsp's own folders (its data, where the shadow repositories are)."""
    real = Path(os.path.realpath(workspace))
    home = Path(os.path.realpath(Path.home()))
    if real == Path(real.anchor):
        return f"Checkpoints are off: the workspace {real} is the file system's root."
    if home != real and home.is_relative_to(real):
        return (
            f"Checkpoints are off: the workspace {real} holds your home directory, too "
            "much to keep copies of. Start the task in a project folder to have checkpoints."
        )
    for folder in private:
        folder = Path(os.path.realpath(folder))
        if real == folder or real.is_relative_to(folder):
            return (
                f"Checkpoints are off: the workspace {real} is inside hdsp's own folder "
                f"{folder}. Start the task in a project folder to have checkpoints."
            )
    for name in REFUSED_WORKSPACES:
        if real == (home / name if name else home):
            what = "your home directory" if not name else f"your {name} folder"
            return (
                f"Checkpoints are off: the workspace {real} is {what}, too much to keep "
                "copies of. Start the task in a project folder to have checkpoints."
            )
    return None


#: What a gitignore pattern reads as a wildcard or strips: escaped with a backslash.
_PATTERN_SPECIAL = re.compile(r"[\\*?\[]| (?= *$)")


def _literal(name: str) -> str:
    """A gitignore pattern (after its leading `/`) that matches the OS name `name`
    and nothing else: wildcards, backslashes and trailing spaces escaped. A line
    break, which no pattern can hold, matches as `?` (any one character)."""
    escaped = _PATTERN_SPECIAL.sub(lambda m: "\\" + m.group(), name)
    return escaped.replace("\n", "?").replace("\r", "?")


def _unescaped(pattern: str) -> str:
    """The name `_literal` made `pattern` of (a line break read back as `?`: the
    next save finds that folder again by its `.git`)."""
    return re.sub(r"\\(.)", r"\1", pattern)


def _object_id(data: bytes, width: int) -> str:
    """The id git gives `data` as a blob (SHA-1, or SHA-256 in a repository
    whose ids are `width` = 64 hex digits long)."""
    algorithm = hashlib.sha256 if width == 64 else hashlib.sha1
    return algorithm(b"blob %d\0" % len(data) + data).hexdigest()


def _clean_environment(git_dir: Path) -> dict[str, str]:
    """The daemon's environment without anything that steers git, plus the shadow
    repository's GIT_DIR and no user or system config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_DIR=str(git_dir),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        # A path is a path: a file named `*` must not be a pattern matching others.
        GIT_LITERAL_PATHSPECS="1",
        LC_ALL="C",
    )
    return env


@dataclass
class SavedTree:
    """What a save gave: the commit, the paths it changed, what it left out."""

    commit: str
    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class ShadowRepo:
    """The shadow repository of `workspace`, under `root` (hdsp's data dir's
    `checkpoints` folder). Not safe for concurrent use: its owner serialises."""

    def __init__(
        self,
        root: Path,
        workspace: Path,
        *,
        max_file_bytes: int,
        exclude: Sequence[str] = (),
        private: Sequence[Path] = (),
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        key = hashlib.sha256(os.fsencode(self.workspace)).hexdigest()[:24]
        self.git_dir = root / key
        self.max_file_bytes = max_file_bytes
        self.exclude = list(exclude)
        #: hdsp's folders, and the shadow repositories', that lie inside the
        #: workspace (relative, with a trailing /): never in a checkpoint.
        self.private = sorted(
            {
                real.relative_to(self.workspace).as_posix() + "/"
                for folder in (*private, root)
                if (real := Path(os.path.realpath(folder))) != self.workspace
                and real.is_relative_to(self.workspace)
            }
        )
        self._private = private
        self._skip = tuple(self.private)
        #: The workspace as the file tools see it (its `.hdspignore`).
        self._files: Workspace | None = None
        #: Nested repositories found, relative to the workspace (with a trailing /).
        self.nested: set[str] = set()
        #: Files the last save left out by size: a restore leaves them as they are
        #: (their present content is in no checkpoint, so nothing may overwrite it).
        self.unsaved: list[str] = []
        self._env = _clean_environment(self.git_dir)
        self._ready = False
        self._head: str | None = None

    # ---- git ------------------------------------------------------------------

    async def git(
        self, *args: str, input: bytes | None = None, check: bool = True
    ) -> tuple[int, bytes]:
        """Run `git args...` on the shadow repository; its stdout (and exit code)."""
        command = ["git"]
        for setting in _COMMAND_CONFIG:
            command += ["-c", setting]
        command += args
        try:
            done = await anyio.run_process(
                command, input=input, cwd=self.workspace, env=self._env, check=False
            )
        except OSError as exc:
            raise GitFailed(f"git could not run: {exc}. Is git installed?") from exc
        if check and done.returncode != 0:
            stderr = done.stderr.decode(errors="replace").strip()
            raise GitFailed(f"git {args[0]} failed ({done.returncode}): {stderr[-2000:]}")
        return done.returncode, done.stdout

    async def open(self) -> None:
        """Create the repository on first use; refresh its excludes every time."""
        why = refusal(self.workspace, self._private)
        if why is not None:
            raise WorkspaceRefused(why)
        if not self.workspace.is_dir():
            raise GitFailed(f"The workspace {self.workspace} is not a folder.")
        if self._files is None:
            self._files = Workspace(self.workspace)
        if not (self.git_dir / "HEAD").exists():
            self.git_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            empty = self.git_dir.parent / ".template"
            empty.mkdir(exist_ok=True, mode=0o700)
            await self.git("init", "--quiet", f"--template={empty}")
            settings = {
                "core.worktree": str(self.workspace),
                "core.bare": "false",
                "core.autocrlf": "false",
                "core.filemode": "true",
                "core.symlinks": "true",
                "core.untrackedCache": "true",
                "core.fsmonitor": "false",
                "core.quotepath": "false",
                "core.hooksPath": os.devnull,
                "core.attributesFile": os.devnull,
                "commit.gpgsign": "false",
                "gc.auto": "0",
                "user.name": _IDENTITY[0],
                "user.email": _IDENTITY[1],
                "core.excludesFile": os.devnull,
            }
            for key, value in settings.items():
                await self.git("config", key, value)
            (self.git_dir / "workspace").write_bytes(os.fsencode(self.workspace) + b"\n")
        self._read_nested()
        self._forget_gone_nested()
        self._write_excludes()
        self._ready = True

    def _read_nested(self) -> None:
        """The nested repositories the exclude file lists (found before a restart)."""
        try:
            text = os.fsdecode((self.git_dir / "info" / "exclude").read_bytes())
        except OSError:
            return
        _, found, listed = text.rpartition(_NESTED_HEADER + "\n")
        if found:
            self.nested |= {
                _unescaped(line[1:]) for line in listed.split("\n") if line.startswith("/")
            }

    def nested_root(self, path: str) -> str | None:
        """The nested repository (relative, ending in /) `path` lies in, or None:
        a folder between the workspace and `path` with a `.git` of its own."""
        parts = path.rstrip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth]) + "/"
            if folder in self.nested or os.path.lexists(self.workspace / folder / ".git"):
                return folder
        return None

    def left_alone(self, path: str) -> bool:
        """Whether checkpoints leave `path` to someone else: a nested repository's
        file, or one in hdsp's own folders (kept by an older hdsp)."""
        return path.startswith(tuple(self.private)) or self.nested_root(path) is not None

    def _forget_gone_nested(self) -> None:
        """A nested repository whose .git is gone is a plain folder again."""
        gone = {n for n in self.nested if not os.path.lexists(self.workspace / n / ".git")}
        self.nested -= gone

    def _write_excludes(self) -> None:
        """`info/exclude` (the workspace's `.hdspignore`, then what hdsp leaves
        out, last so that no `!pattern` before takes it back) and
        `info/attributes`, each written only when it changes."""
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        assert self._files is not None
        lines = [
            "# Written by hdsp: what checkpoints leave out (besides .gitignore).",
            "# The workspace's .hdspignore:",
            *self._files.ignore_lines(),
            "# The settings' patterns, hdsp's own folders:",
            ".git",
            *self.exclude,
            *("/" + _literal(p) for p in self.private),
            _NESTED_HEADER,
            *sorted("/" + _literal(n) for n in self.nested),
        ]
        for name, text in (("exclude", "\n".join(lines) + "\n"), ("attributes", _ATTRIBUTES)):
            path = info / name
            data = os.fsencode(text)
            if not path.exists() or path.read_bytes() != data:
                path.write_bytes(data)

    # ---- saving ---------------------------------------------------------------

    async def head(self) -> str | None:
        """The last checkpoint's commit (read once: only this object moves HEAD)."""
        if self._head is None:
            code, out = await self.git("rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
            self._head = out.decode().strip() if code == 0 else None
        return self._head

    async def _status(self) -> list[tuple[str, str]]:
        """(XY, path) of every changed, deleted or untracked file."""
        _, out = await self.git(
            "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"
        )
        entries = []
        for record in out.split(b"\0"):
            if len(record) > 3:
                entries.append((record[:2].decode(), os.fsdecode(record[3:])))
        return entries

    def _clear_stale_locks(self) -> None:
        """Remove the lock files a git killed hard left (the deadline's SIGKILL,
        or hdspd's process group killed): only hdsp runs git here, one command
        at a time, so a lock found between commands is stale, and would fail
        every later checkpoint."""
        for name in _GIT_LOCKS:
            try:
                (self.git_dir / name).unlink()
            except FileNotFoundError:
                pass
            else:
                log.warning("stale git lock removed", git_dir=str(self.git_dir), lock=name)

    async def save(self, message: str, live: Mapping[str, bytes] | None = None) -> SavedTree:
        """Commit the workspace as it is; with nothing changed, the last commit.
        `live`: the notebooks open in JupyterLab (relative path -> the bytes of
        the open document), kept in place of their files."""
        live = {p: data for p, data in (live or {}).items() if not self.left_alone(p)}
        if not self._ready:
            await self.open()
        self._clear_stale_locks()
        self._forget_gone_nested()
        self._write_excludes()  # (the settings' patterns may have changed)
        notes: list[str] = []
        unsaved: list[str] = []
        entries = [(xy, p) for xy, p in await self._status() if not p.startswith(self._skip)]
        # A folder that shows whole among untracked files with -uall is a nested
        # repository: leave it to its own git. So is a folder of files checkpoints
        # kept before it got a .git of its own: those leave the index.
        nested = {p for _, p in entries if p.endswith("/")}
        nested |= {root for _, p in entries if (root := self.nested_root(p)) is not None}
        if nested - self.nested:
            for path in sorted(nested - self.nested):
                notes.append(
                    f"{shown_name(path)} is a git repository of its own: not in checkpoints."
                )
            self.nested |= nested
            self._write_excludes()
            spec = b"".join(os.fsencode(n) + b"\0" for n in sorted(nested))
            await self.git(
                "rm", "--cached", "-r", "-q", "--ignore-unmatch",
                "--pathspec-from-file=-", "--pathspec-file-nul", input=spec,
            )  # fmt: skip
            entries = [(xy, p) for xy, p in await self._status() if not p.startswith(self._skip)]
        head = await self.head()
        # Each open notebook's bytes in place of its file's, where the file is kept.
        index_info = b""
        paths: list[str] = []
        taken: set[str] = set()
        if live:
            new = {p for xy, p in entries if xy == "??"}
            index_info, paths, taken = await self._live(live, head, new, notes, unsaved)
        to_add: list[str] = []
        to_remove: list[str] = []
        for xy, path in entries:
            if path in taken or path.endswith("/") or self.nested_root(path) is not None:
                continue
            if xy[1] != "D" and xy != "D ":
                try:
                    st = (self.workspace / path).lstat()
                    size, mode = st.st_size, st.st_mode
                except OSError:
                    size, mode = 0, stat.S_IFREG
                if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                    # (A file made a pipe or a socket: git cannot keep it, and a
                    # restore must not take it away.)
                    notes.append(
                        f"{shown_name(path)} is not a regular file (a pipe, a socket): not saved."
                    )
                    unsaved.append(path)
                    continue
                if size > self.max_file_bytes:
                    notes.append(
                        f"{shown_name(path)} ({size:,} bytes) is over the checkpoint size limit "
                        f"({self.max_file_bytes:,} bytes): not saved."
                    )
                    unsaved.append(path)
                    continue
            paths.append(path)
            if xy[1] == "D":  # gone, or beyond a symbolic link now: `git add` refuses that
                to_remove.append(path)
            elif xy[1] != " ":  # the file differs from the index (or is new to it)
                to_add.append(path)
        self.unsaved = unsaved
        if index_info:
            await self.git("update-index", "-z", "--index-info", input=index_info)
        if not paths and head is not None:
            return SavedTree(head, [], notes)
        if to_remove:
            spec = b"".join(os.fsencode(p) + b"\0" for p in to_remove)
            await self.git(
                "rm", "--cached", "-q", "--ignore-unmatch",
                "--pathspec-from-file=-", "--pathspec-file-nul", input=spec,
            )  # fmt: skip
        if to_add:
            # (Not `git add`: a file gone since `git status` listed it, as a
            # database's journal comes and goes, is no error here, just left out.)
            spec = b"\0".join(os.fsencode(p) for p in to_add) + b"\0"
            await self.git("update-index", "--add", "--remove", "-z", "--stdin", input=spec)
        # The index's tree as a commit on HEAD: plumbing, which (unlike `git
        # commit`) does not look at the work tree again.
        _, tree = await self.git("write-tree")
        parent = ["-p", head] if head is not None else []
        _, out = await self.git("commit-tree", tree.decode().strip(), *parent, "-m", message)
        commit = out.decode().strip()
        await self.git("update-ref", "HEAD", commit)
        self._head = commit
        return SavedTree(commit, sorted(paths), notes)

    async def _entries(
        self, treeish: str | None, paths: Sequence[str]
    ) -> dict[str, tuple[str, str]]:
        """path -> (mode, object id) of `paths` in `treeish` (None: the index)."""
        if treeish is None:
            _, out = await self.git("ls-files", "-s", "-z", "--", *paths)
        else:
            _, out = await self.git("ls-tree", "-z", treeish, "--", *paths)
        found = {}
        for record in out.split(b"\0"):
            if b"\t" in record:
                meta, path = record.split(b"\t", 1)
                fields = meta.decode().split()
                # ls-files: mode, id, stage; ls-tree: mode, type, id.
                found[os.fsdecode(path)] = (fields[0], fields[1 if treeish is None else 2])
        return found

    async def _live(
        self,
        live: Mapping[str, bytes],
        head: str | None,
        new: set[str],
        notes: list[str],
        unsaved: list[str],
    ) -> tuple[bytes, list[str], set[str]]:
        """What of `live` (the open notebooks' bytes) to stage: the `update-index
        --index-info` input, the paths whose content differs from `head`'s, and
        the paths taken care of (their files play no part). A notebook is staged
        where its file would be (in the index, in HEAD, or new and not ignored:
        `new`), as a regular file, under the size limit (else it is not saved)."""
        paths = sorted(live)
        index = await self._entries(None, paths)
        tree = await self._entries(head, paths) if head is not None else {}
        info: list[bytes] = []
        changed: list[str] = []
        taken: set[str] = set()
        for path in paths:
            data = live[path]
            mode = index.get(path, tree.get(path, ("", "")))[0]
            if not mode and path in new:
                mode = await anyio.to_thread.run_sync(self._file_mode, path)
            if mode not in _REGULAR:
                continue  # (not kept, or kept as a link: its file decides)
            taken.add(path)
            if len(data) > self.max_file_bytes:
                notes.append(
                    f"{shown_name(path)} (open in JupyterLab, {len(data):,} bytes) is over the checkpoint "
                    f"size limit ({self.max_file_bytes:,} bytes): not saved."
                )
                unsaved.append(path)
                continue
            digest = _object_id(data, len(index.get(path, tree.get(path, ("", "0" * 40)))[1]))
            if index.get(path, ("", ""))[1] != digest:
                _, out = await self.git("hash-object", "-w", "--stdin", input=data)
                digest = out.decode().strip()
                info.append(f"{mode} {digest}\t".encode() + os.fsencode(path) + b"\0")
            if tree.get(path, ("", ""))[1] != digest:
                changed.append(path)
        return b"".join(info), changed, taken

    def _file_mode(self, path: str) -> str:
        try:
            st = (self.workspace / path).lstat()
        except OSError:
            return ""
        if not stat.S_ISREG(st.st_mode):
            return ""
        return "100755" if st.st_mode & 0o111 else "100644"

    # ---- reading ----------------------------------------------------------------

    async def changes(self, old: str, new: str | None) -> list[tuple[str, str]]:
        """(status letter A/M/D, path) between two commits, or a commit and the
        files now (new None: the caller saved first, so the index is the files)."""
        args = ["diff", "--name-status", "-z", "--no-renames", old]
        args += [new] if new is not None else ["--cached"]
        _, out = await self.git(*args)
        parts = [p for p in out.split(b"\0") if p]
        found = [
            (parts[i].decode()[:1], os.fsdecode(parts[i + 1])) for i in range(0, len(parts) - 1, 2)
        ]
        # (A nested repository's files, kept before it got its .git, are its git's.)
        return [(letter, path) for letter, path in found if not self.left_alone(path)]

    async def show(self, commit: str | None, path: str) -> bytes | None:
        """A file's bytes at `commit` (None: in the index), or None if absent."""
        # (`:0:` names the index's entry: a bare `:` would read `0:x` as a stage.)
        code, out = await self.git("cat-file", "blob", f"{commit or ':0'}:{path}", check=False)
        return out if code == 0 else None

    async def unified_diff(self, old: str, new: str | None, path: str) -> str:
        args = ["diff", "--no-color", "--no-ext-diff", "-U3", old]
        args += [new] if new is not None else ["--cached"]
        _, out = await self.git(*args, "--", path)
        # (A byte that is not UTF-8, of a name or of the content, shown `\\xNN`.)
        return encodable_text(out.decode("utf-8", "surrogateescape"))

    # ---- restoring --------------------------------------------------------------

    async def restore(self, commit: str) -> list[str]:
        """Set the workspace's files (those checkpoints keep) to `commit`'s; the
        caller saved the present state first. Returns the paths that changed.
        Files over the size limit and files inside nested repositories are left
        as they are."""
        changed = await self.to_restore(commit)
        await self.restore_paths(commit, changed)
        return changed

    async def to_restore(self, commit: str) -> list[str]:
        """The paths a restore of `commit` changes (the caller saved the present
        state first): those that differ, less files over the size limit."""
        self._clear_stale_locks()
        kept = set(self.unsaved)
        return [path for _, path in await self.changes(commit, None) if path not in kept]

    async def restore_paths(self, commit: str, paths: Sequence[str]) -> None:
        """Set the files `paths` (and their index entries) to `commit`'s."""
        if paths:
            spec = b"\0".join(os.fsencode(p) for p in paths) + b"\0"
            await self.git(
                "restore",
                f"--source={commit}",
                "--staged",
                "--worktree",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                input=spec,
            )

    async def regular_files(self, commit: str, paths: Sequence[str]) -> set[str]:
        """Which of `paths` `commit` holds as regular files (not links)."""
        if not paths:
            return set()
        found = await self._entries(commit, paths)
        return {path for path, (mode, _) in found.items() if mode in _REGULAR}
