"""The CURVE keys of a team daemon's TCP endpoint (the `tcp.listen` setting), in
`DATA_DIR/curve`, every file 0600 in a 0700 directory (one that others can read
or write is refused, as ssh insists):

- **The daemon's key pair**: `server.key` (public) and `server.key_secret`,
  pyzmq's certificate files, made by `hdspd keys`. The secret key is read at
  start, registered with the log scrubber (it never reaches a log line, an event
  or a child's environment) and never sent.
- **The authorised clients**: `authorized_keys`, one client a line, `NAME KEY`
  (KEY: the client's public key, 40 characters of Z85), and `#` comments.
  `AuthorizedKeys` reads it again when it changes (each look compares its stat),
  so `hdspd keys authorize` and `revoke` need no restart. A line that does not
  parse lets nobody in, and is logged with its line number.

The server (:mod:`hdsp.daemon.server.curve`) asks `AuthorizedKeys` who a key is;
this module owns the files.

Errors::

    CurveError          a key file is missing, open to others, or unreadable;
                        the message says which and what to do
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import structlog
import zmq
import zmq.auth

from hdsp.daemon.atomic_write import fsync_directory, write_atomically
from hdsp.daemon.logs import register_secret
from hdsp.protocol import check_curve_key, private_dir_ready, secret_file_problem

__all__ = [
    "AUTHORIZED_KEYS",
    "CLIENT_NAME_PATTERN",
    "SERVER_KEY",
    "SERVER_SECRET_KEY",
    "AuthorizedEntry",
    "AuthorizedKeys",
    "CurveError",
    "KeyPair",
    "authorize_key",
    "check_public_key",
    "curve_dir_ready",
    "generate_server_keys",
    "load_server_keys",
    "parse_authorized_keys",
    "read_authorized_keys",
    "revoke_key",
]

log = structlog.get_logger("hdsp.server")

SERVER_KEY = "server.key"
SERVER_SECRET_KEY = "server.key_secret"
AUTHORIZED_KEYS = "authorized_keys"
#: A client's name in the authorised keys file: what the history records.
CLIENT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$"
_NAME = re.compile(CLIENT_NAME_PATTERN)

_HEADER = (
    "# Clients hdspd lets in over TCP (CURVE): one a line, NAME PUBLIC-KEY.\n"
    "# NAME is what the task history records; `hdspd keys authorize NAME KEY` adds one,\n"
    "# `hdspd keys revoke NAME` removes one. Changes apply at the next handshake.\n"
)


class CurveError(Exception):
    """A CURVE key file cannot be used; the message says which and what to do."""


@dataclass(frozen=True)
class KeyPair:
    """A CURVE key pair, both halves Z85-encoded (40 bytes each)."""

    public: bytes
    secret: bytes

    def __repr__(self) -> str:  # never the secret half, whoever prints it
        return f"KeyPair(public={self.public.decode()!r})"


def check_public_key(text: str) -> bytes:
    """`text` as a Z85 public key (40 characters, 32 bytes); ValueError if it is not."""
    try:
        return check_curve_key(text).encode("ascii")
    except ValueError as exc:
        raise ValueError(f"{exc}, as `hdsp keys` prints it") from None


# ---- files ---------------------------------------------------------------------


def _checked(path: Path) -> os.stat_result:
    """The stat of `path`, a key file that must be ours and 0600 (CurveError if not)."""
    st = os.lstat(path)
    problem = secret_file_problem(st, path)
    if problem is not None:
        raise CurveError(f"{problem}; hdspd will not use it.")
    return st


def generate_server_keys(curve_dir: Path, *, replace: bool = False) -> KeyPair:
    """Make the daemon's key pair in `curve_dir` (with pyzmq's certificate
    writer, in a private temporary directory, then moved in place, so the secret
    is never readable by others). An existing pair is kept unless `replace`."""
    secret_path = curve_dir / SERVER_SECRET_KEY
    if secret_path.exists() and not replace:
        return load_server_keys(curve_dir)
    staging = Path(tempfile.mkdtemp(prefix=".keys-", dir=curve_dir))  # mode 0700
    try:
        public_file, secret_file = zmq.auth.create_certificates(staging, "server")
        for made in (public_file, secret_file):
            os.chmod(made, 0o600)
        os.replace(public_file, curve_dir / SERVER_KEY)
        os.replace(secret_file, secret_path)
    finally:
        for leftover in staging.iterdir():
            leftover.unlink()
        staging.rmdir()
    fsync_directory(curve_dir)
    return load_server_keys(curve_dir)


def load_server_keys(curve_dir: Path) -> KeyPair:
    """The daemon's key pair (CurveError when it is missing, open to others, or
    does not hold a matching pair)."""
    path = curve_dir / SERVER_SECRET_KEY
    try:
        _checked(path)
        public, secret = zmq.auth.load_certificate(path)
    except FileNotFoundError:
        raise CurveError(
            f"there is no CURVE server key ({path}); `hdspd keys` makes one."
        ) from None
    except (OSError, ValueError) as exc:
        raise CurveError(f"Cannot read the CURVE server key {path}: {exc}") from None
    if secret is None or len(secret) != 40 or zmq.curve_public(secret) != public:
        raise CurveError(
            f"{path} does not hold a CURVE key pair (a public key and its secret key); "
            "move it aside and run `hdspd keys` for a new pair."
        )
    register_secret(secret.decode("ascii"), name="CURVE server secret key")
    return KeyPair(public=public, secret=secret)


@dataclass(frozen=True)
class AuthorizedEntry:
    name: str
    key: bytes
    line: int


def parse_authorized_keys(text: str, path: Path) -> tuple[list[AuthorizedEntry], list[str]]:
    """The entries of an authorised keys file, and its problems ("PATH:LINE:
    what"): a line that does not parse, a key given twice, lets nobody in."""
    entries: list[AuthorizedEntry] = []
    problems: list[str] = []
    seen: dict[bytes, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 2 and not (len(words) > 2 and words[2].startswith("#")):
            problems.append(f"{path}:{number}: expected NAME KEY, got {len(words)} words")
            continue
        name, key_text = words[0], words[1]
        if not _NAME.match(name):
            problems.append(
                f"{path}:{number}: {name[:60]!r} is not a client name (letters, digits, "
                "'.', '_', '@', '-'; at most 64)"
            )
            continue
        try:
            key = check_public_key(key_text)
        except ValueError as exc:
            problems.append(f"{path}:{number}: {exc}")
            continue
        if key in seen:
            problems.append(
                f"{path}:{number}: this key is authorised as {seen[key]!r} already; "
                "a key has one name"
            )
            continue
        seen[key] = name
        entries.append(AuthorizedEntry(name=name, key=key, line=number))
    return entries, problems


class AuthorizedKeys:
    """The authorised keys file, re-read whenever its stat changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int, int] | None = None
        self._names: dict[bytes, str] = {}
        #: Names let in before whose key is gone or changed since (`take_revoked`).
        self._revoked: set[str] = set()
        #: What was wrong with the file when it was last read (logged once).
        self.problems: list[str] = []

    def count(self) -> int:
        """How many keys the file lets in now (read again if it changed)."""
        self._refresh(strict=False)
        return len(self._names)

    def allows(self, name: str) -> bool:
        """Whether some key is authorised under `name` now."""
        self._refresh(strict=False)
        return name in self._names.values()

    def take_revoked(self) -> set[str]:
        """The names whose key was revoked or replaced since the last call (the
        file read again first, if it changed)."""
        self._refresh(strict=False)
        revoked, self._revoked = self._revoked, set()
        return revoked

    def _replace(self, names: dict[bytes, str]) -> None:
        self._revoked |= {name for key, name in self._names.items() if names.get(key) != name}
        self._names = names

    def load(self) -> None:
        """Read the file now; CurveError if it is open to others (at start: the
        daemon refuses to listen). A missing file lets nobody in."""
        self._stamp = None
        self._refresh(strict=True)

    def name_of(self, key: bytes) -> str | None:
        """The name a Z85 public key is authorised under, None if it is not."""
        self._refresh(strict=False)
        return self._names.get(key)

    def _refresh(self, *, strict: bool) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            if self._stamp != (0, 0, 0, 0):
                self._stamp = (0, 0, 0, 0)
                self._replace({})
                self.problems = []
                log.warning(
                    "no client key is authorised for TCP: every client is refused",
                    file=str(self.path),
                    hint="hdspd keys authorize NAME KEY",
                )
            return
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        problem = secret_file_problem(st, self.path)
        if problem is not None:
            self._replace({})
            self.problems = [problem]
            if strict:
                raise CurveError(f"{problem}; hdspd will not use it.")
            log.error("authorised keys refused: every TCP client is refused", problem=problem)
            return
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._replace({})
            self.problems = [str(exc)]
            if strict:
                raise CurveError(f"Cannot read {self.path}: {exc}") from None
            log.error("authorised keys unreadable: every TCP client is refused", error=str(exc))
            return
        entries, self.problems = parse_authorized_keys(text, self.path)
        self._replace({entry.key: entry.name for entry in entries})
        for problem in self.problems:
            log.warning("authorised keys: a line lets nobody in", problem=problem)
        log.info("authorised keys read", file=str(self.path), clients=len(self._names))


def _edit_authorized(path: Path, keep: list[str], added: str | None) -> None:
    lines = keep if keep else _HEADER.splitlines()
    if added is not None:
        lines = [*lines, added]
    write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"), mode=0o600)


def _existing_lines(path: Path) -> list[str]:
    try:
        _checked(path)
    except FileNotFoundError:
        return []
    return path.read_text(encoding="utf-8").splitlines()


def read_authorized_keys(path: Path) -> tuple[list[AuthorizedEntry], list[str]]:
    """The file's entries and problems (none for a missing file); CurveError for
    one open to others."""
    return parse_authorized_keys("\n".join(_existing_lines(path)), path)


def authorize_key(path: Path, name: str, key_text: str) -> str | None:
    """Let the client `name` in with `key_text`; returns the key it had before,
    if `name` was authorised already (its line is replaced). ValueError for a
    bad name or key, or a key authorised under another name."""
    if not _NAME.match(name):
        raise ValueError(
            f"{name[:60]!r} is not a client name: letters, digits, '.', '_', '@', '-' "
            "(at most 64, starting with a letter or digit)"
        )
    key = check_public_key(key_text)
    lines = _existing_lines(path)
    entries, _ = parse_authorized_keys("\n".join(lines), path)
    previous = None
    for entry in entries:
        if entry.key == key and entry.name != name:
            raise ValueError(f"this key is authorised as {entry.name!r} already")
        if entry.name == name:
            previous = entry.key.decode()
    kept = [line for line in lines if not _names_line(line, name)]
    _edit_authorized(path, kept, f"{name} {key.decode()}")
    return previous


def revoke_key(path: Path, name: str) -> bool:
    """Take the client `name` out of the file; False if it was not in it."""
    lines = _existing_lines(path)
    kept = [line for line in lines if not _names_line(line, name)]
    if len(kept) == len(lines):
        return False
    _edit_authorized(path, kept, None)
    return True


def _names_line(line: str, name: str) -> bool:
    words = line.split()
    return bool(words) and words[0] == name


def curve_dir_ready(curve_dir: Path) -> None:
    """Make `curve_dir` (0700) if missing, or tighten it to 0700; CurveError for
    one that is not a directory of ours."""
    problem = private_dir_ready(curve_dir)
    if problem is not None:
        raise CurveError(f"{problem}; hdspd will not use it.")
