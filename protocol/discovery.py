"""The discovery file: how a client finds a running daemon, and the checks that
decide whether a runtime dir and its discovery file can be trusted.

The daemon writes it (mode 0600) in its runtime dir once its sockets are bound and
removes it on exit, as Jupyter does with kernel connection files. A runtime dir
that someone else owns or can write (a `/tmp/runtime-USER` made by another user
before us, say) would let them answer in the daemon's place, or move the daemon's
sockets away: the client and the daemon both refuse such a directory, through the
same checks here.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path
from typing import Annotated

from msgspec import Meta

from ._base import WireStruct

__all__ = [
    "DISCOVERY_FILENAME",
    "Discovery",
    "discovery_path",
    "private_dir_problem",
    "private_dir_ready",
    "private_file_problem",
    "secret_file_problem",
]

DISCOVERY_FILENAME = "hdspd.json"


class Discovery(WireStruct, frozen=True):
    """The discovery file, `hdspd.json` in the daemon's runtime dir: how a client
    finds the daemon's sockets. Written (mode 0600) once the sockets are bound,
    removed when the daemon exits."""

    protocol_version: Annotated[int, Meta(description="The protocol version the daemon speaks.")]
    server_version: Annotated[str, Meta(description="The daemon's package version.")]
    pid: Annotated[
        int,
        Meta(
            description=(
                "The daemon's process id; a file whose process is gone is stale (the daemon "
                "crashed)."
            )
        ),
    ]
    control: Annotated[
        str,
        Meta(
            description=(
                "ZeroMQ endpoint of the ROUTER socket (handshake, commands, replies): connect "
                "a DEALER (or a REQ) to it. `ipc://RUNTIME_DIR/control` today."
            )
        ),
    ]
    events: Annotated[
        str,
        Meta(
            description=(
                "ZeroMQ endpoint of the XPUB socket (events): connect a SUB (or an XSUB) to "
                "it. `ipc://RUNTIME_DIR/events` today."
            )
        ),
    ]
    started_at: Annotated[
        int,
        Meta(description="When the daemon started, in milliseconds since the epoch."),
    ]
    server_public_key: Annotated[
        str | None,
        Meta(
            description=(
                "The daemon's public CURVE key (z85) when it also listens on TCP (the "
                "`tcp.listen` setting); absent otherwise. `control` and `events` stay the "
                "local ipc:// endpoints."
            )
        ),
    ] = None


def discovery_path(runtime_dir: Path) -> Path:
    return runtime_dir / DISCOVERY_FILENAME


def _who(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _open_to_others(st: os.stat_result) -> bool:
    return bool(stat.S_IMODE(st.st_mode) & (stat.S_IWGRP | stat.S_IWOTH))


def _ownership_problem(st: os.stat_result, path: Path, uid: int, mode: str) -> str | None:
    """Why `path` (whose stat is `st`) is not ours alone to write: owned by
    another user than `uid`, or writable by others (`mode` is what it should be)."""
    if st.st_uid != uid:
        return f"{path} belongs to {_who(st.st_uid)}, not to you ({_who(uid)})"
    if _open_to_others(st):
        have = stat.S_IMODE(st.st_mode)
        return f"{path} is writable by other users (mode {have:04o}; it should be {mode})"
    return None


def _ancestor_problem(directory: Path, uid: int) -> str | None:
    """Why a directory above the runtime dir would let someone else replace it:
    owned by a user other than us and root, or writable by others without the
    sticky bit (which /tmp has: there only an entry's owner may rename it)."""
    try:
        real = directory.resolve(strict=True)
    except OSError as exc:
        return f"{directory} cannot be checked ({exc.strerror or exc})"
    for ancestor in (real, *real.parents):
        st = ancestor.stat()
        if st.st_uid not in (uid, 0):
            return f"{ancestor} belongs to {_who(st.st_uid)}, who could replace what is inside"
        if _open_to_others(st) and not st.st_mode & stat.S_ISVTX:
            return (
                f"{ancestor} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}, "
                "no sticky bit), who could replace what is inside"
            )
    return None


def private_dir_problem(path: Path, *, uid: int | None = None) -> str | None:
    """Why `path` cannot be trusted as a private runtime dir, or None if it can:
    it must be a real directory (not a symlink), owned by `uid` (the current
    user by default), writable by nobody else, inside directories that nobody
    else can rename it out of. Raises FileNotFoundError if it does not exist."""
    uid = os.geteuid() if uid is None else uid
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link, not a directory"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    return _ownership_problem(st, path, uid, "0700") or _ancestor_problem(path.parent, uid)


def private_dir_ready(path: Path, *, parents: bool = False) -> str | None:
    """Make `path` a directory of ours that nobody else may enter (a key store):
    made 0700 if missing, tightened to 0700 if open to others. Returns why it
    cannot be one (it is not a directory of ours), or None."""
    path.mkdir(mode=0o700, parents=parents, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return f"{path} is not a directory of yours"
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return None


def private_file_problem(st: os.stat_result, path: Path, *, uid: int | None = None) -> str | None:
    """Why the file `path` (whose `os.fstat` or `os.lstat` is `st`) cannot be
    trusted as written by our own daemon, or None if it can."""
    uid = os.geteuid() if uid is None else uid
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    return _ownership_problem(st, path, uid, "0600")


def secret_file_problem(st: os.stat_result, path: Path, *, uid: int | None = None) -> str | None:
    """Why the file `path` (whose `os.fstat` or `os.lstat` is `st`) cannot be
    trusted to hold a key: a CURVE secret key, or the list of keys a daemon lets
    in. Stricter than `private_file_problem`: nobody else may even read it, as
    ssh insists for its keys."""
    uid = os.geteuid() if uid is None else uid
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_uid != uid:
        return f"{path} belongs to {_who(st.st_uid)}, not to you ({_who(uid)})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        return (
            f"{path} is open to other users (mode {mode:04o}; it must be 0600: `chmod 600 {path}`)"
        )
    return None
