"""The bubblewrap command line: namespaces and the mount layout of one sandbox.

Pure: it reads no files but through the `exists`, `is_dir` and `resolve`
callables, so a test can check the argv it builds. The order of the mounts is
the policy (bwrap applies them in order, a later mount covering an earlier one):

1. the whole file system read-only (`--ro-bind / /`), a fresh `/dev`, a `/proc` of
   the sandbox's own PID namespace (the daemon's `/proc/<pid>/environ` is not
   there), and a private, empty `/tmp` (a tmpfs: gone when the sandbox ends);
2. then every rule, shallowest path first, so that for any file the rule on its
   deepest enclosing path wins: a hidden path covered (a directory by an empty
   tmpfs, a file by /dev/null), the home directory and the interpreter shown
   again read-only when they lie under `/tmp`, the workspace bound read-write
   (read-only in mode read-only). So a workspace inside a hidden directory stays
   visible, and a hidden path inside the workspace (the daemon's runtime dir
   under a workspace of `/tmp`) is covered again after the workspace's bind;
3. last, a kernel's own socket directory, read-write: it lies inside the
   daemon's runtime dir, which is hidden.

Nothing bound may lie inside a private directory (the daemon's runtime and data
dirs) but the kernel's own socket directory: :class:`PrivatePathBound` says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MountLayout", "PrivatePathBound", "base_argv", "bwrap_argv"]


@dataclass(frozen=True)
class MountLayout:
    #: Directories and files the sandbox must not see.
    hidden: Sequence[Path]
    #: Bound read-write (read-only when `writable` is False).
    workspace: Path
    writable: bool
    #: A kernel's own socket directory, bound read-write after everything else.
    sockets: Path | None = None
    #: Shown read-only again though under `/tmp` (the home directory, the interpreter).
    reexposed: Sequence[Path] = ()
    #: Hidden, and nothing but `sockets` may be bound inside them (hdspd's
    #: runtime and data dirs).
    private: Sequence[Path] = ()
    network: bool = False
    cwd: Path | None = None
    #: Environment variables removed inside (bwrap's `--unsetenv`).
    unsetenv: Sequence[str] = ()


class PrivatePathBound(Exception):
    """A path the sandbox would bind lies inside a private directory; the
    message says which, in one line."""


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def base_argv(bwrap: str, *, network: bool = False) -> list[str]:
    """bwrap and its options for the bare sandbox every layout starts from: its
    own namespaces, no capabilities, the root read-only, fresh /dev, /proc and an
    empty /tmp. (The daemon's probe runs `true` in just this.)"""
    return [
        bwrap,
        # New user, PID, IPC, UTS, cgroup and (unless shared) network namespaces.
        "--unshare-all",
        "--unshare-user",
        # No nested user namespace: it could mount over what we mounted.
        "--disable-userns",
        *(["--share-net"] if network else []),
        # SIGKILL the sandbox when bwrap's parent (the daemon) or bwrap dies; the
        # namespace's init dying kills every process in it (setsid cannot escape).
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def bwrap_argv(
    bwrap: str,
    layout: MountLayout,
    argv: Sequence[str],
    *,
    exists: Callable[[Path], bool] = Path.exists,
    is_dir: Callable[[Path], bool] = Path.is_dir,
    resolve: Callable[[Path], Path] = _real,
) -> list[str]:
    """The argv that runs `argv` inside the sandbox `layout` describes.

    Raises:
        PrivatePathBound: the workspace or a re-exposed path lies inside one of
            `layout.private`.
    """
    tmp = Path("/tmp")
    workspace = layout.workspace
    # Under /tmp (the sandbox's is empty), and not inside the workspace (its bind shows them).
    reexposed = [
        p for p in layout.reexposed if _under(p, tmp) and not _under(p, workspace) and exists(p)
    ]
    binds: list[tuple[Path, str]] = [(p, "--ro-bind") for p in reexposed]
    binds.append((workspace, "--bind" if layout.writable else "--ro-bind"))
    private = [*layout.private, *(resolve(p) for p in layout.private)]
    for path, _ in binds:
        for form in (path, resolve(path)):
            inside = next((d for d in private if _under(form, d)), None)
            if inside is not None:
                what = "workspace" if path == workspace else "path"
                raise PrivatePathBound(
                    f"Refused: the {what} {path} lies inside hdspd's own directory "
                    f"{inside}, which no sandbox may see; choose one outside it."
                )
    hidden = list(dict.fromkeys([*layout.hidden, *layout.private]))
    # A hidden path reached through a bound path's symlink is hidden there too.
    for bound, _ in binds:
        real = resolve(bound)
        if real != bound:
            hidden += [bound / h.relative_to(real) for h in hidden if real in h.parents]
    hidden = list(dict.fromkeys(hidden))
    bound_paths = {p for p, _ in binds}

    def rule_above(path: Path) -> str:
        """What the deepest rule strictly above `path` makes of it."""
        best, kind = Path("/"), "shown"
        if _under(path, tmp) and path != tmp:
            best, kind = tmp, "hidden"
        for p in hidden:
            if p != path and _under(path, p) and len(p.parts) > len(best.parts):
                best, kind = p, "hidden"
        for p in bound_paths:
            if p != path and _under(path, p) and len(p.parts) >= len(best.parts):
                best, kind = p, "shown"
        return kind

    rules: list[tuple[int, int, list[str]]] = []
    for path in hidden:
        if path in bound_paths or rule_above(path) == "hidden" or not exists(path):
            continue  # a bind at the same place wins; already unseen; nothing to cover
        mount = ["--tmpfs", str(path)] if is_dir(path) else ["--ro-bind", "/dev/null", str(path)]
        rules.append((len(path.parts), 0, mount))
    for path, option in binds:
        rules.append((len(path.parts), 1, [option, str(path), str(path)]))
    out = base_argv(bwrap, network=layout.network)
    for _, _, mount in sorted(rules, key=lambda r: (r[0], r[1])):
        out += mount
    if layout.sockets is not None:
        out += ["--bind", str(layout.sockets), str(layout.sockets)]
    for name in layout.unsetenv:
        out += ["--unsetenv", name]
    if layout.cwd is not None:
        out += ["--chdir", str(layout.cwd)]
    out.append("--")
    out.extend(argv)
    return out
