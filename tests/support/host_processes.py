"""Finding processes on the host by what their command line says.

A process in a sandbox has a PID namespace of its own: the pid it reports
(`$!`, `os.getpid()`) means nothing on the host. Tests therefore look for a
process by a marker they put on its command line (a connection file's path,
`sleep 303.<random>`), reading the host's /proc.
"""

from __future__ import annotations

import os

__all__ = ["processes_mentioning"]


def processes_mentioning(marker: str) -> list[int]:
    """Host pids of live (not zombie) processes whose command line contains `marker`."""
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone already
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X"):
            continue
        if marker in cmdline:
            found.append(int(name))
    return found
