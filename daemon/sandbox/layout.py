"""The bubblewrap command line: namespaces and the mount layout of one sandbox.

Pure: it reads no files but through the `exists` callable, so a test can check the
argv it builds. The order of the mounts is the policy (bwrap applies them in order,
a later mount covering an earlier one):

1. the whole file system read-only (`--ro-bind / /`), a fresh `/dev`, a `/proc` of
   the sandbox's own PID namespace (the daemon's `/proc/<pid>/environ` is not
   there), and a private, empty `/tmp` (a tmpfs: gone when the sandbox ends);
2. the home directory again, read-only, when it lies under `/tmp` (tests);
3. every hidden path covered: a directory by an empty tmpfs, a file by /dev/null;
4. the workspace (read-write, or read-only in mode read-only), and any other
   writable directory the caller names (a kernel's socket directory), bound after
   the hidden paths so that they stay visible even when they lie under one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MountLayout", "base_argv", "bwrap_argv"]


@dataclass(frozen=True)
class MountLayout:
    #: Directories and files the sandbox must not see.
    hidden: Sequence[Path]
    #: Bound read-write (read-only when `writable` is False), after the hidden paths.
    workspace: Path
    writable: bool
    #: Directories the sandbox must also write (a kernel's sockets).
    extra_writable: Sequence[Path] = ()
    #: Shown read-only again though under `/tmp` (the home directory).
    reexposed: Sequence[Path] = ()
    network: bool = False
    cwd: Path | None = None
    #: Environment variables removed inside (bwrap's `--unsetenv`).
    unsetenv: Sequence[str] = ()


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


def bwrap_argv(
    bwrap: str,
    layout: MountLayout,
    argv: Sequence[str],
    *,
    exists: Callable[[Path], bool] = Path.exists,
    is_dir: Callable[[Path], bool] = Path.is_dir,
) -> list[str]:
    """The argv that runs `argv` inside the sandbox `layout` describes."""
    tmp = Path("/tmp")
    out = base_argv(bwrap, network=layout.network)
    reexposed = [p for p in layout.reexposed if _under(p, tmp) and exists(p)]
    for path in reexposed:
        out += ["--ro-bind", str(path), str(path)]

    def visible(path: Path) -> bool:
        return not _under(path, tmp) or any(_under(path, r) for r in reexposed)

    for path in _outermost(layout.hidden):
        if not visible(path) or not exists(path):
            continue
        if is_dir(path):
            out += ["--tmpfs", str(path)]
        else:
            out += ["--ro-bind", "/dev/null", str(path)]
    workspace = str(layout.workspace)
    out += ["--bind" if layout.writable else "--ro-bind", workspace, workspace]
    for path in layout.extra_writable:
        out += ["--bind", str(path), str(path)]
    for name in layout.unsetenv:
        out += ["--unsetenv", name]
    if layout.cwd is not None:
        out += ["--chdir", str(layout.cwd)]
    out.append("--")
    out.extend(argv)
    return out


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """`paths` without those that lie inside another one (hidden with it), in order."""
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(o != p and _under(p, o) for o in unique)]
