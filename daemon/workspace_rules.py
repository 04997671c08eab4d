"""Which directories the agent may be given: the one rule for a task's workspace
and for the working directory of a kernel a client starts (`hdsp kernels start`,
MCP's `start_kernel`, a raw `StartKernel`).

Too broad or too private to be one: the file system's root, the daemon's user's
home directory itself (its keys, keyring and dotfiles) or any directory that
holds it (`/home`: a sandbox could write `~/.bashrc` there), and anything inside
hdspd's own directories (data and runtime). The agent reads a workspace without
asking, and the sandbox binds it read-write over the paths it otherwise hides
(`~/.ssh`, keyrings), so such a directory would show everything. Symlinks are
resolved first: a link to the home directory is the home directory.

Blocking (it resolves paths); async callers run it in a worker thread.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable
from pathlib import Path

__all__ = ["broad_directory"]


def broad_directory(directory: str | os.PathLike[str], private_dirs: Iterable[Path]) -> str | None:
    """What `directory` is if it is too broad (or too private) to give the agent:
    the root, the daemon's user's home itself or a directory that holds it, or a
    daemon directory (`private_dirs`, resolved); else None."""
    real = Path(os.path.realpath(directory))
    if real == real.parent:
        return "the root directory"
    homes = {os.path.expanduser("~")}
    try:
        homes.add(pwd.getpwuid(os.geteuid()).pw_dir)
    except KeyError:
        pass
    real_homes = [Path(os.path.realpath(home)) for home in homes if home]
    if real in real_homes:
        return "your home directory (its keys, keyring and dotfiles)"
    if any(home.is_relative_to(real) for home in real_homes):
        return "a directory that holds your home directory (its keys, keyring and dotfiles)"
    for private in private_dirs:
        if real == private or real.is_relative_to(private):
            return f"inside hdspd's own directory {private}"
    return None
