"""Remote daemons: a team daemon reached over TCP, always under ZeroMQ CURVE.

What a client keeps, in its config dir (`HDSP_CONFIG_DIR`, else
`~/.config/hdsp`), every file 0600 in 0700 directories:

- `keys/client.key` and `keys/client.key_secret`: the client's key pair
  (pyzmq's certificate files), made by `hdsp keys generate`. The daemon's admin
  authorises the public half (`hdspd keys authorize NAME KEY`); the secret half
  never leaves this machine, and a copy others can read is refused.
- `remotes.json`: named remotes, each an address (`tcp://HOST:PORT`: control on
  PORT, events on PORT + 1) and the daemon's public key (`hdspd keys` prints
  it), which the client checks: a server without the matching secret key cannot
  complete the handshake.

`hdsp --remote NAME` (or `HDSP_REMOTE=NAME`) sends every command to a remote;
`connect(remote=NAME)` does the same from Python.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from hdsp.protocol import check_curve_key, private_dir_ready, secret_file_problem, tcp_endpoints

from .errors import RemoteConfigError
from .private_files import UntrustedFile, read_checked, write_whole

__all__ = [
    "REMOTE_NAME_PATTERN",
    "ClientKeys",
    "Remote",
    "add_remote",
    "check_server_key",
    "config_dir",
    "generate_client_keys",
    "load_client_keys",
    "load_remotes",
    "remove_remote",
    "resolve_remote",
]

REMOTE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_NAME = re.compile(REMOTE_NAME_PATTERN)
_CLIENT = "client"


def config_dir() -> Path:
    """The client's config dir: HDSP_CONFIG_DIR, else the per-user one."""
    env = os.environ.get("HDSP_CONFIG_DIR")
    if env:
        return Path(env).expanduser().absolute()
    return Path(platformdirs.user_config_dir("hdsp"))


def _private_dir(path: Path) -> Path:
    problem = private_dir_ready(path, parents=True)
    if problem is not None:
        raise RemoteConfigError(f"{problem}; hdsp will not use it.")
    return path


def _checked_open(path: Path) -> bytes:
    """The bytes of `path`, a file that must be ours and 0600 (checked on the
    open file); FileNotFoundError if it is missing."""
    try:
        return read_checked(path, secret_file_problem)
    except UntrustedFile as exc:
        raise RemoteConfigError(f"{exc}; hdsp will not use it.") from None


# ---- the client's key pair ----------------------------------------------------------


@dataclass(frozen=True)
class ClientKeys:
    """The client's CURVE key pair, Z85 (the secret half never printed)."""

    public: bytes
    secret: bytes
    path: Path

    def __repr__(self) -> str:
        return f"ClientKeys(public={self.public.decode()!r}, path={str(self.path)!r})"


def _keys_dir(base: Path | None) -> Path:
    return (base or config_dir()) / "keys"


def generate_client_keys(base: Path | None = None, *, replace: bool = False) -> bool:
    """Make the client's key pair (pyzmq's certificate writer, in a private
    temporary directory, then moved in place); an existing pair is kept unless
    `replace`. Returns whether a pair was made."""
    directory = _private_dir(_keys_dir(base))
    secret_path = directory / f"{_CLIENT}.key_secret"
    if secret_path.exists() and not replace:
        return False
    staging = Path(tempfile.mkdtemp(prefix=".keys-", dir=directory))  # mode 0700
    try:
        import zmq.auth  # (pyzmq: for these commands, not every CLI start)

        public_file, secret_file = zmq.auth.create_certificates(staging, _CLIENT)
        for made in (public_file, secret_file):
            os.chmod(made, 0o600)
        os.replace(public_file, directory / f"{_CLIENT}.key")
        os.replace(secret_file, secret_path)
    finally:
        for leftover in staging.iterdir():
            leftover.unlink()
        staging.rmdir()
    return True


def load_client_keys(base: Path | None = None) -> ClientKeys:
    """The client's key pair; RemoteConfigError when there is none, or when it
    is open to others or damaged."""
    path = _keys_dir(base) / f"{_CLIENT}.key_secret"
    try:
        _checked_open(path)  # ours, 0600, not a symlink: then pyzmq reads it
        import zmq.auth

        public, secret = zmq.auth.load_certificate(path)
    except FileNotFoundError:
        raise RemoteConfigError(
            f"This client has no CURVE key pair ({path}): `hdsp keys generate` makes one, "
            "and the daemon's admin authorises its public key."
        ) from None
    except (OSError, ValueError) as exc:
        raise RemoteConfigError(f"Cannot read the client key {path}: {exc}") from None
    if secret is None or len(secret) != 40 or zmq.curve_public(secret) != public:
        raise RemoteConfigError(
            f"{path} does not hold a CURVE key pair; `hdsp keys generate --replace` makes a "
            "new one (the daemon's admin then authorises the new public key)."
        )
    return ClientKeys(public=public, secret=secret, path=path)


# ---- remotes -------------------------------------------------------------------------


@dataclass(frozen=True)
class Remote:
    name: str
    #: `tcp://HOST:PORT`: control on PORT, events on PORT + 1.
    address: str
    #: The daemon's public key (Z85), as `hdspd keys` prints it.
    server_key: str

    @property
    def control(self) -> str:
        return tcp_endpoints(self.address).control

    @property
    def events(self) -> str:
        return tcp_endpoints(self.address).events


def check_server_key(text: str) -> str:
    try:
        return check_curve_key(text)
    except ValueError as exc:
        raise RemoteConfigError(f"{exc}, as `hdspd keys` prints it on the daemon's host.") from None


def _remotes_file(base: Path | None) -> Path:
    return (base or config_dir()) / "remotes.json"


def load_remotes(base: Path | None = None) -> dict[str, Remote]:
    path = _remotes_file(base)
    try:
        document: Any = json.loads(_checked_open(path))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RemoteConfigError(f"Cannot read {path}: {exc}") from None
    entries = document.get("remotes") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise RemoteConfigError(f'{path} holds no remotes (no "remotes" object).')
    remotes: dict[str, Remote] = {}
    for name, entry in entries.items():
        try:
            remote = Remote(name=name, address=entry["address"], server_key=entry["serverKey"])
            tcp_endpoints(remote.address)
            check_server_key(remote.server_key)
        except (TypeError, KeyError, ValueError, RemoteConfigError) as exc:
            raise RemoteConfigError(
                f"{path}: the remote {name!r} is damaged ({exc}); `hdsp remote add {name} "
                "...` writes it again."
            ) from None
        remotes[name] = remote
    return remotes


def _save_remotes(remotes: dict[str, Remote], base: Path | None) -> None:
    path = _remotes_file(base)
    _private_dir(path.parent)
    document = {
        "remotes": {
            r.name: {"address": r.address, "serverKey": r.server_key}
            for r in sorted(remotes.values(), key=lambda r: r.name)
        }
    }
    write_whole(path, (json.dumps(document, indent=2) + "\n").encode())


def add_remote(name: str, address: str, server_key: str, base: Path | None = None) -> Remote:
    """Save (or replace) the remote `name`; RemoteConfigError for a bad value."""
    if not _NAME.match(name):
        raise RemoteConfigError(
            f"{name[:60]!r} is not a remote name: letters, digits, '.', '_', '-' (at most 64)."
        )
    try:
        tcp_endpoints(address)
    except ValueError as exc:
        raise RemoteConfigError(f"{exc}.") from None
    remote = Remote(name=name, address=address, server_key=check_server_key(server_key))
    remotes = load_remotes(base)
    remotes[name] = remote
    _save_remotes(remotes, base)
    return remote


def remove_remote(name: str, base: Path | None = None) -> bool:
    remotes = load_remotes(base)
    if remotes.pop(name, None) is None:
        return False
    _save_remotes(remotes, base)
    return True


def resolve_remote(name: str, base: Path | None = None) -> Remote:
    remote = load_remotes(base).get(name)
    if remote is None:
        raise RemoteConfigError(
            f"No remote named {name!r}: `hdsp remote list` lists them, `hdsp remote add "
            f"{name} tcp://HOST:PORT --server-key KEY` adds it."
        )
    return remote
