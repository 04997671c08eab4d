"""`hdsp keys` and `hdsp remote`: the client's key pair and its named remotes, in
its config dir, private; the real CLI, no daemon needed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import zmq

from hdsp.client.remotes import load_remotes
from tests.support.cli_process import cli_env, run_hdsp_sync


def _hdsp(config: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_hdsp_sync(cli_env(config / "no-runtime", HDSP_CONFIG_DIR=str(config), **env), *args)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keys_are_made_once_private_and_refused_when_others_can_read(tmp_path: Path) -> None:
    config = tmp_path / "cfg"
    shown = _hdsp(config, "keys")
    assert shown.returncode == 2 and "hdsp keys generate" in shown.stderr
    made = _hdsp(config, "keys", "generate")
    assert made.returncode == 0, made.stderr
    public = made.stdout.strip()
    assert len(public) == 40 and "hdspd keys authorize NAME" in made.stderr
    assert _hdsp(config, "keys", "generate").stdout.strip() == public  # kept
    assert _hdsp(config, "keys").stdout.strip() == public
    secret = config / "keys" / "client.key_secret"
    assert _mode(config / "keys") == 0o700
    assert _mode(secret) == 0o600 and _mode(config / "keys" / "client.key") == 0o600
    os.chmod(secret, 0o644)
    refused = _hdsp(config, "keys")
    assert refused.returncode == 2
    assert "is open to other users (mode 0644" in refused.stderr and "chmod 600" in refused.stderr
    os.chmod(secret, 0o600)
    replaced = _hdsp(config, "keys", "generate", "--replace")
    assert replaced.returncode == 0 and replaced.stdout.strip() != public


def test_remotes_are_added_listed_and_removed(tmp_path: Path) -> None:
    config = tmp_path / "cfg"
    server = zmq.curve_keypair()[0].decode()
    added = _hdsp(
        config, "remote", "add", "work", "tcp://ws.example:7737", f"--server-key={server}"
    )
    assert added.returncode == 0, added.stderr
    assert "events on tcp://ws.example:7738" in added.stdout
    assert _mode(config / "remotes.json") == 0o600
    listed = _hdsp(config, "--json", "remote", "list")
    assert json.loads(listed.stdout) == {
        "name": "work",
        "address": "tcp://ws.example:7737",
        "serverKey": server,
    }
    assert load_remotes(config)["work"].events == "tcp://ws.example:7738"
    for bad, why in (
        (["tcp://ws.example", f"--server-key={server}"], "not a TCP address"),
        (["ipc:///x", f"--server-key={server}"], "not a TCP address"),
        (["tcp://h:7737", "--server-key", "short"], "not a CURVE public key"),
    ):
        refused = _hdsp(config, "remote", "add", "other", *bad)
        assert refused.returncode == 2 and why in refused.stderr, refused.stderr
    assert _hdsp(config, "remote", "remove", "work").returncode == 0
    assert _hdsp(config, "remote", "rm", "work").returncode == 2
    assert "No remotes" in _hdsp(config, "remote", "list").stdout


def test_a_remote_needs_keys_and_a_name_it_knows(tmp_path: Path) -> None:
    config = tmp_path / "cfg"
    unknown = _hdsp(config, "--remote", "nowhere", "tasks")
    assert unknown.returncode == 2 and "No remote named 'nowhere'" in unknown.stderr
    server = zmq.curve_keypair()[0].decode()
    added = _hdsp(config, "remote", "add", "w", "tcp://127.0.0.1:9", f"--server-key={server}")
    assert added.returncode == 0, added.stderr
    no_keys = _hdsp(config, "tasks", HDSP_REMOTE="w")
    assert no_keys.returncode == 2 and "hdsp keys generate" in no_keys.stderr
    both = _hdsp(config, "--remote", "w", "--runtime-dir", str(tmp_path), "tasks")
    assert both.returncode == 2 and "not both" in both.stderr


def _key_beginning_with_a_dash() -> str:
    """A CURVE public key whose Z85 text begins with "-" (one in 85 do)."""
    while True:
        public = zmq.curve_keypair()[0].decode()
        if public.startswith("-"):
            return public


def test_a_key_beginning_with_a_dash_is_taken_as_the_hints_write_it(tmp_path: Path) -> None:
    """Z85 keys may begin with "-", which argparse takes for an option: the hints
    and the README write `--server-key='KEY'` and `authorize NAME -- 'KEY'`."""
    config = tmp_path / "cfg"
    server = _key_beginning_with_a_dash()
    added = _hdsp(config, "remote", "add", "w", "tcp://127.0.0.1:9", f"--server-key={server}")
    assert added.returncode == 0, added.stderr
    assert load_remotes(config)["w"].server_key == server
    data = tmp_path / "data"
    client = _key_beginning_with_a_dash()
    authorized = subprocess.run(
        [sys.executable, "-m", "hdsp.daemon", "keys", "authorize", "alice", "--", client],
        env=cli_env(tmp_path / "run", HDSP_DATA_DIR=str(data)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert authorized.returncode == 0, authorized.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "hdsp.daemon", "keys", "list"],
        env=cli_env(tmp_path / "run", HDSP_DATA_DIR=str(data)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "alice" in listed.stdout and client in listed.stdout, listed
    made = _hdsp(config, "keys", "generate")
    assert "hdspd keys authorize NAME -- '" in made.stderr
