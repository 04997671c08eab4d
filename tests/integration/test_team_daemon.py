"""A team daemon over TCP, under ZeroMQ CURVE: the real hdspd on loopback, set up
with the real commands, and real clients (hdsp.client, the hdsp CLI, raw ZeroMQ
peers). No TCP unless configured, and never without CURVE; a key that is not
authorised gets nothing and cannot pass for another; an authorised one works as a
local client does, under the name its key is authorised with."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest
import zmq
from zmq.utils.monitor import parse_monitor_message

import hdsp.client.client as client_module
from hdsp.client import CommandFailed, NotAuthenticated, connect
from hdsp.protocol import (
    PROTOCOL_VERSION,
    ClientInfo,
    Connect,
    TaskCompleted,
    __version__,
    encode,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.cli_process import cli_env
from tests.support.daemon_process import DaemonProcess
from tests.support.events import collect_turn
from tests.support.scripted_turns import call, done, next_ask, start
from tests.support.subscription_flood import subscribe_then_sync
from tests.support.team_daemon import TeamDaemon, tcp_listeners

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def team(daemon_process: DaemonProcess) -> TeamDaemon:
    return TeamDaemon(daemon_process)


def _raw_peer(endpoint: str, keys: tuple[bytes, bytes, bytes] | None) -> tuple[bool, set[int]]:
    """A DEALER that says Connect on `endpoint` (with CURVE `keys`: server
    public, own public, own secret; or without CURVE): whether any reply came
    within 2 s, and the handshake events its socket saw."""
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    if keys is not None:
        dealer.setsockopt(zmq.CURVE_SERVERKEY, keys[0])
        dealer.setsockopt(zmq.CURVE_PUBLICKEY, keys[1])
        dealer.setsockopt(zmq.CURVE_SECRETKEY, keys[2])
    failures = (
        zmq.EVENT_HANDSHAKE_FAILED_AUTH
        | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
        | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    )
    monitor = dealer.get_monitor_socket(failures | zmq.EVENT_HANDSHAKE_SUCCEEDED)
    try:
        dealer.connect(endpoint)
        info = ClientInfo(name="intruder", version=__version__)
        dealer.send(encode(Connect(protocol_version=PROTOCOL_VERSION, client=info)))
        events: set[int] = set()
        # The handshake's outcome first (one way or the other), then any reply.
        events.add(int(parse_monitor_message(monitor.recv_multipart())["event"]))
        answered = bool(dealer.poll(2000))
        while monitor.poll(0):
            events.add(int(parse_monitor_message(monitor.recv_multipart())["event"]))
        return answered, events
    finally:
        monitor.close(linger=0)
        dealer.close(linger=0)
        ctx.term()  # here, not in a garbage collection on the event loop's thread


def test_no_tcp_listener_unless_configured(daemon: DaemonProcess) -> None:
    assert daemon.proc is not None
    assert tcp_listeners(daemon.proc.pid) == set()


async def test_tcp_listen_without_curve_keys_is_refused_at_start(team: TeamDaemon) -> None:
    daemon = team.daemon
    team.configure()
    with pytest.raises(AssertionError, match="exited before it was ready"):
        daemon.start()
    assert daemon.wait() == 2
    err = daemon.stderr()
    assert "tcp.listen" in err and "only under CURVE" in err and "hdspd keys" in err
    assert "Traceback" not in err
    # A key file others can read is refused too, naming it and the fix.
    team.make_server_keys()
    os.chmod(team.curve_dir / "server.key_secret", 0o640)
    with pytest.raises(AssertionError, match="exited before it was ready"):
        daemon.start()
    assert "server.key_secret is open to other users (mode 0640" in daemon.stderr()
    assert "chmod 600" in daemon.stderr()
    os.chmod(team.curve_dir / "server.key_secret", 0o600)
    (team.curve_dir / "authorized_keys").write_text("# nobody yet\n")
    os.chmod(team.curve_dir / "authorized_keys", 0o644)
    with pytest.raises(AssertionError, match="exited before it was ready"):
        daemon.start()
    assert "authorized_keys is open to other users (mode 0644" in daemon.stderr()
    # An address that is not TCP is not a setting: left out (the file is kept
    # aside, as any invalid setting's), and nothing listens.
    team.configure("ipc:///tmp/hdsp-not-tcp")
    daemon.start()
    assert daemon.proc is not None and tcp_listeners(daemon.proc.pid) == set()
    assert "is not a TCP address" in daemon.stderr()
    async with connect(daemon.runtime_dir) as local:
        with pytest.raises(CommandFailed, match="is not a TCP address"):
            await local.update_settings({"tcp": {"listen": "tcp://nowhere"}})


async def test_an_authorised_client_works_over_tcp_under_its_key_name(
    team: TeamDaemon, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = team.daemon
    team.start()
    assert daemon.proc is not None
    assert tcp_listeners(daemon.proc.pid) == {team.port, team.port + 1}
    alice = team.client("alice")  # authorised while the daemon runs: no restart
    monkeypatch.setenv("HDSP_CONFIG_DIR", str(alice))
    workspace = daemon.root / "work"
    workspace.mkdir()
    fake_openai.script(
        call("write_to_file", path="note.md", content="from alice\n"), done("ok"), done("bye")
    )
    async with (
        connect(remote="team", name="mallory") as remote,  # says it is someone else
        connect(daemon.runtime_dir, name="local-cli") as local,
    ):
        assert remote.ack is not None and remote.ack.user == "alice"
        assert local.ack is not None and local.ack.user is None  # ipc: as before
        assert (await local.status()).clients == 2
        # Commands and events over TCP: an ask, answered from there.
        task_id, head = await start(remote, "write a note", workspace)
        ask = await next_ask(remote, task_id, head)
        await remote.respond_to_ask(task_id, ask.ts, "yesButtonClicked")
        turn = await collect_turn(remote, task_id, head)
        assert isinstance(turn[-1].data, TaskCompleted)
        # The history (read over ipc) names the key's owner, not what it said:
        # who sent the task and who answered its ask.
        snap = await local.get_task(task_id)
        answered = [m for m in snap.messages if m.type == "ask" and m.is_answered]
        assert [m.answered_by for m in answered][:1] == ["alice"]
        assert snap.messages[0].say == "text" and snap.messages[0].sent_by == "alice"
        # A local client's message, as before: its Connect's name, no sender.
        head = (await local.status()).head_seq
        await local.send_message(task_id, "thanks")
        turn = await collect_turn(local, task_id, head)
        assert isinstance(turn[-1].data, TaskCompleted)
        mine = [m for m in (await local.get_task(task_id)).messages if m.say == "user_feedback"]
        assert [(m.text, m.sent_by) for m in mine] == [("thanks", None)]
        status = await remote.status()
        assert status.tcp is not None and status.tcp.server_public_key == team.server_key
        # A remote task's workspace is named on the daemon's host.
        with pytest.raises(Exception, match="directories on its own host"):
            await remote.start_task("anywhere")
    assert (workspace / "note.md").read_text() == "from alice\n"
    # The CLI, through --remote and through HDSP_REMOTE.
    shown = team.hdsp(alice, "--remote", "team", "show", task_id[:8])
    assert shown.returncode == 0, shown.stderr
    assert "from alice\n> write a note" in shown.stdout and "approved by alice" in shown.stdout
    listed = team.hdsp(alice, "tasks", HDSP_REMOTE="team")
    assert listed.returncode == 0 and task_id[:8] in listed.stdout, listed.stderr
    status_text = team.hdsp(alice, "--remote", "team", "daemon", "status").stdout
    assert "you: alice (remote team" in status_text
    # Secret keys never reach the log.
    log = daemon.stderr()
    assert team.secret_key(team.curve_dir / "server.key_secret") not in log
    assert team.secret_key(alice / "keys" / "client.key_secret") not in log
    assert "tcp client authenticated" in log


async def test_a_client_without_an_authorised_key_gets_nothing(team: TeamDaemon) -> None:
    team.start()
    # A peer that connects and says nothing holds its descriptor only so long.
    silent = socket.create_connection(("127.0.0.1", team.port))
    silent_since = time.monotonic()
    with silent:  # closed however the test ends
        await _refused_every_way(team, silent, silent_since)


async def _refused_every_way(team: TeamDaemon, silent: socket.socket, silent_since: float) -> None:
    daemon = team.daemon
    bob = team.client("bob", authorize=False)
    # The CLI says it could not authenticate, at once (not a handshake timeout).
    started = time.monotonic()
    refused = team.hdsp(bob, "--remote", "team", "tasks")
    took = time.monotonic() - started
    assert refused.returncode == 3, refused.stderr
    assert "refused this client's key" in refused.stderr
    assert team.public_key(bob) in refused.stderr  # what to authorise, to fix it
    assert "did not answer" not in refused.stderr and took < 30
    # An authorised key, but a server key that is not this daemon's: said too.
    alice = team.client("alice")
    wrong_key = zmq.curve_keypair()[0].decode()
    added = team.hdsp(alice, "remote", "add", "fake", team.address, f"--server-key={wrong_key}")
    assert added.returncode == 0, added.stderr
    mistaken = team.hdsp(alice, "--remote", "fake", "tasks")
    assert mistaken.returncode == 3, mistaken.stderr
    assert "the CURVE handshake failed" in mistaken.stderr and wrong_key in mistaken.stderr
    # Raw peers: an unknown key, a plain TCP peer, a wrong server key.
    server = team.server_key.encode()
    public, secret = zmq.curve_keypair()
    stranger = anyio.to_thread.run_sync
    control = f"tcp://127.0.0.1:{team.port}"
    answered, events = await stranger(_raw_peer, control, (server, public, secret))
    assert not answered and zmq.EVENT_HANDSHAKE_FAILED_AUTH in events
    answered, events = await stranger(_raw_peer, control, None)
    # A peer without CURVE: libzmq reports the mechanism mismatch as a protocol
    # failure, or (when the server's close wins the race, as on a loaded
    # machine) as a failure without detail; either way it never succeeds.
    plain_failures = {zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL}
    assert not answered and events & plain_failures, events
    assert zmq.EVENT_HANDSHAKE_SUCCEEDED not in events
    wrong = zmq.curve_keypair()[0]
    answered, events = await stranger(_raw_peer, control, (wrong, public, secret))
    assert not answered and zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL in events
    # The library says the same, as NotAuthenticated.
    os.environ["HDSP_CONFIG_DIR"] = str(bob)
    try:
        with pytest.raises(NotAuthenticated, match="refused this client's key"):
            # (a deadline well past the refusal's: it must come at once, but a
            # loaded machine must not turn it into "did not answer")
            async with connect(remote="team", timeout=20):
                pass
    finally:
        del os.environ["HDSP_CONFIG_DIR"]
    # The daemon is unharmed and counts none of them.
    async with connect(daemon.runtime_dir) as local:
        assert (await local.status()).clients == 1
    assert "tcp client refused: its key is not authorised" in daemon.stderr()
    silent.settimeout(30)
    await anyio.to_thread.run_sync(_read_until_closed, silent)
    # The handshake deadline is 10 s (libzmq's default, 30 s, would fail this).
    assert time.monotonic() - silent_since < 25


def _read_until_closed(sock: socket.socket) -> None:
    """Return when the other end closes `sock` (what it sends is read away)."""
    while sock.recv(4096):
        pass


async def test_revoking_a_key_cuts_its_connection_and_keeps_it_out(
    team: TeamDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    team.start()
    carol = team.client("carol")
    monkeypatch.setenv("HDSP_CONFIG_DIR", str(carol))
    async with connect(remote="team") as remote:
        assert (await remote.ping()).server_time > 0
        revoked = await anyio.to_thread.run_sync(team.hdspd, "keys", "revoke", "carol")
        assert revoked.returncode == 0, revoked.stderr
        with anyio.fail_after(20):
            await remote.wait_connection_lost()
    with pytest.raises(NotAuthenticated):
        async with connect(remote="team"):
            pass
    assert "tcp clients cut: their keys were revoked" in team.daemon.stderr()


async def test_a_frozen_or_killed_peer_is_dropped_over_tcp(
    team: TeamDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's connection tracking works over TCP: a client killed is gone
    at once; one that stops answering (SIGSTOP: its host gone, say) is dropped
    by the heartbeats. The other way round, a client notices a daemon that
    stopped answering, and is back once it answers again."""
    team.start("--heartbeat-ms", "200")
    dave = team.client("dave")
    monkeypatch.setenv("HDSP_CONFIG_DIR", str(dave))
    argv = [sys.executable, "-m", "hdsp.client", "--remote", "team", "events", "--follow"]
    env = {**os.environ, "HDSP_CONFIG_DIR": str(dave)}
    async with (
        await anyio.open_process(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ) as follower,
        connect(team.daemon.runtime_dir) as local,
    ):

        async def clients_become(n: int) -> None:
            with anyio.fail_after(30):
                while (await local.status()).clients != n:  # noqa: ASYNC110 (the daemon's count)
                    await anyio.sleep(0.05)

        await clients_become(2)
        follower.send_signal(signal.SIGSTOP)
        await clients_become(1)
        follower.send_signal(signal.SIGCONT)
        await clients_become(2)  # it reconnects and says Connect again
        follower.kill()
        await clients_become(1)
    # The client's heartbeats (shortened here as the daemon's are) see a
    # daemon that stopped answering as gone.
    monkeypatch.setattr(client_module, "_HEARTBEAT_IVL_MS", 200)
    monkeypatch.setattr(client_module, "_HEARTBEAT_TIMEOUT_MS", 600)
    assert team.daemon.proc is not None
    async with connect(remote="team") as remote:
        team.daemon.proc.send_signal(signal.SIGSTOP)
        try:
            with anyio.fail_after(30):
                await remote.wait_connection_lost()
        finally:
            team.daemon.proc.send_signal(signal.SIGCONT)
        with anyio.fail_after(30):
            await remote.wait_connected()
        assert (await remote.ping()).server_time > 0


async def test_subscription_bounds_hold_over_tcp(team: TeamDaemon) -> None:
    """The events socket's bounds apply to a TCP peer (under CURVE, whose framing
    a subscription of the longest topic still fits): over them, it is cut."""
    team.start()
    erin = team.client("erin")
    secret = team.secret_key(erin / "keys" / "client.key_secret").encode()
    keys = (team.server_key.encode(), team.public_key(erin).encode(), secret)
    events = f"tcp://127.0.0.1:{team.port + 1}"
    fits = [str(uuid.uuid4()).encode() for _ in range(1000)] + [b"t" * 256]
    assert await anyio.to_thread.run_sync(subscribe_then_sync, events, fits, keys)
    too_many = [(b"%08d" % i).ljust(200, b"x") for i in range(300)]
    assert not await anyio.to_thread.run_sync(subscribe_then_sync, events, too_many, keys)
    assert "cutting an events peer's connections" in team.daemon.stderr()


@pytest.mark.parametrize("command", [["events", "--follow"], ["attach", "TASK"]])
async def test_a_follower_whose_key_is_revoked_is_told_and_exits_3(
    team: TeamDaemon, fake_openai: FakeOpenAI, tmp_path: Path, command: list[str]
) -> None:
    """A client following live whose key is revoked is cut off: it says so in one
    line and exits with the code of a daemon that refused its key (3), rather
    than waiting for ever for a daemon that will not let it back in."""
    team.start()
    erin = team.client("erin")
    env = cli_env(team.daemon.runtime_dir, HDSP_CONFIG_DIR=str(erin))
    async with connect(team.daemon.runtime_dir) as local:
        if "TASK" in command:
            fake_openai.script(FakeReply.hang())  # (a task that runs all along)
            ref = await local.start_task("think", workspace=tmp_path)
            command = [ref.task_id if part == "TASK" else part for part in command]
        argv = [sys.executable, "-m", "hdsp.client", "--remote", "team", *command]
        async with await anyio.open_process(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        ) as follower:
            with anyio.fail_after(30):
                while (await local.status()).clients != 2:  # noqa: ASYNC110 (the daemon's count)
                    await anyio.sleep(0.05)
            revoked = await anyio.to_thread.run_sync(team.hdspd, "keys", "revoke", "erin")
            assert revoked.returncode == 0, revoked.stderr
            assert follower.stderr is not None
            err = b""
            with anyio.fail_after(30):
                async for chunk in follower.stderr:
                    err += chunk
                code = await follower.wait()
    text = err.decode(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 3, text
    if command[0] == "attach":  # (what the view showed before, and "hdspd went away")
        lines = lines[-1:]
    assert len(lines) == 1, text
    assert "no longer lets this client in" in lines[0] and "revoked" in lines[0], text
    assert text.count("no longer lets this client in") == 1, text
