"""The CURVE key files of a team daemon: the daemon's key pair, made private and
checked; the authorised keys file, parsed strictly (a bad line lets nobody in),
read again when it changes, and what it revoked; `hdspd keys` editing it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import zmq

from hdsp.daemon.app import _tcp_listener
from hdsp.daemon.config.curve_keys import (
    AuthorizedKeys,
    CurveError,
    authorize_key,
    curve_dir_ready,
    generate_server_keys,
    load_server_keys,
    parse_authorized_keys,
    revoke_key,
)
from hdsp.protocol import tcp_endpoints


def _key() -> str:
    return zmq.curve_keypair()[0].decode()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_address_names_both_sockets() -> None:
    assert tcp_endpoints("tcp://0.0.0.0:7737") == ("tcp://0.0.0.0:7737", "tcp://0.0.0.0:7738")
    assert tcp_endpoints("tcp://[::1]:9") == ("tcp://[::1]:9", "tcp://[::1]:10")
    for bad in ("tcp://h", "tcp://h:0", "tcp://h:65535", "ipc:///x", "tcp://a b:1", "h:1"):
        with pytest.raises(ValueError):
            tcp_endpoints(bad)


def test_the_server_key_pair_is_private_and_checked(tmp_path: Path) -> None:
    curve = tmp_path / "curve"
    saved = os.umask(0o022)
    try:
        curve_dir_ready(curve)
        keys = generate_server_keys(curve)
    finally:
        os.umask(saved)
    assert _mode(curve) == 0o700
    for name in ("server.key", "server.key_secret"):
        assert _mode(curve / name) == 0o600
    assert sorted(os.listdir(curve)) == ["server.key", "server.key_secret"]
    assert zmq.curve_public(keys.secret) == keys.public
    assert keys.secret.decode() not in repr(keys)
    assert generate_server_keys(curve) == keys  # kept, not replaced
    os.chmod(curve / "server.key_secret", 0o604)
    with pytest.raises(CurveError, match="open to other users"):
        load_server_keys(curve)
    os.chmod(curve / "server.key_secret", 0o600)
    # A secret key that is not the public key's is no key pair.
    text = (curve / "server.key_secret").read_text()
    other_public = zmq.curve_keypair()[0].decode()
    (curve / "server.key_secret").write_text(text.replace(keys.public.decode(), other_public))
    with pytest.raises(CurveError, match="does not hold a CURVE key pair"):
        load_server_keys(curve)
    with pytest.raises(CurveError, match="no CURVE server key"):
        load_server_keys(tmp_path)


def test_a_bad_line_lets_nobody_in(tmp_path: Path) -> None:
    alice, bob = _key(), _key()
    text = "\n".join(
        [
            "# who may come in",
            f"alice {alice}  # her laptop",
            "",
            f"bad/name {bob}",
            "carol not-a-key",
            f"dave {alice}",
            f"erin {bob} extra",
            f"bob {bob}",
        ]
    )
    entries, problems = parse_authorized_keys(text, tmp_path / "authorized_keys")
    assert [(e.name, e.key.decode()) for e in entries] == [("alice", alice), ("bob", bob)]
    assert [p.split(":")[1] for p in problems] == ["4", "5", "6", "7"]
    assert "authorised as 'alice' already" in problems[2]


def test_the_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "authorized_keys"
    keys = AuthorizedKeys(path)
    keys.load()  # missing: nobody
    alice, bob = _key(), _key()
    assert keys.name_of(alice.encode()) is None and keys.count() == 0
    authorize_key(path, "alice", alice)
    authorize_key(path, "bob", bob)
    assert _mode(path) == 0o600
    assert keys.name_of(alice.encode()) == "alice" and keys.count() == 2
    assert keys.take_revoked() == set()
    # A new key for alice replaces her old one; bob is revoked.
    new_alice = _key()
    assert authorize_key(path, "alice", new_alice) == alice
    assert revoke_key(path, "bob") and not revoke_key(path, "bob")
    assert keys.name_of(alice.encode()) is None
    assert keys.name_of(new_alice.encode()) == "alice"
    assert keys.take_revoked() == {"alice", "bob"}
    assert keys.allows("alice") and not keys.allows("bob")
    with pytest.raises(ValueError, match="authorised as 'alice' already"):
        authorize_key(path, "mallory", new_alice)
    with pytest.raises(ValueError, match="not a client name"):
        authorize_key(path, "-x", _key())
    # Opened to others: refused at start, and nobody let in while running.
    os.chmod(path, 0o640)
    assert keys.name_of(new_alice.encode()) is None
    assert keys.take_revoked() == {"alice"}
    with pytest.raises(CurveError, match="open to other users"):
        AuthorizedKeys(path).load()
    with pytest.raises(CurveError, match="open to other users"):
        authorize_key(path, "carol", _key())


def test_a_listener_needs_curve_keys(tmp_path: Path) -> None:
    curve = tmp_path / "curve"
    curve_dir_ready(curve)
    with pytest.raises(CurveError, match=r"tcp.listen is .* only under CURVE.*hdspd keys"):
        _tcp_listener("tcp://127.0.0.1:7737", curve)
    generate_server_keys(curve)
    listener = _tcp_listener("tcp://127.0.0.1:7737", curve)
    assert listener.secret_key.decode() not in repr(listener)
    assert (listener.control, listener.events) == ("tcp://127.0.0.1:7737", "tcp://127.0.0.1:7738")
