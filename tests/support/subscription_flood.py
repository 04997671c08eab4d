"""A misbehaving events subscriber, run as a process of its own (the daemon's limits
are per peer process): `python -m tests.support.subscription_flood ENDPOINT SIZE
COUNT [churn]`. It subscribes COUNT topics of SIZE bytes (with `churn`, it
unsubscribes each one right after, and repeats), prints "sent" and keeps its
connection until its stdin closes. And `subscribe_then_sync`, a subscriber that
finds out whether the daemon kept it or cut it."""

from __future__ import annotations

import sys

import zmq
from zmq.utils.monitor import parse_monitor_message


def subscribe_then_sync(
    endpoint: str, topics: list[bytes], curve: tuple[bytes, bytes, bytes] | None = None
) -> bool:
    """Subscribe `topics`, then a sync probe; True when the daemon answered the
    probe (it read every subscription before it: one pipe is in order), False
    when it cut this peer first. `curve`: the server's public key and this
    peer's key pair, for a TCP endpoint under CURVE."""
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SNDHWM, 0)
    sub.setsockopt(zmq.RECONNECT_IVL, -1)  # a cut stays cut
    if curve is not None:
        sub.setsockopt(zmq.CURVE_SERVERKEY, curve[0])
        sub.setsockopt(zmq.CURVE_PUBLICKEY, curve[1])
        sub.setsockopt(zmq.CURVE_SECRETKEY, curve[2])
    monitor = sub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
    try:
        sub.connect(endpoint)
        assert parse_monitor_message(monitor.recv_multipart())["event"] == (
            zmq.EVENT_HANDSHAKE_SUCCEEDED
        )
        for topic in topics:
            sub.setsockopt(zmq.SUBSCRIBE, topic)
        probe = b"\x00sync.bound-test"
        sub.setsockopt(zmq.SUBSCRIBE, probe)
        poller = zmq.Poller()
        poller.register(sub, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        while True:
            ready = dict(poller.poll(30_000))
            assert ready, "neither the sync answer nor a disconnect in 30 s"
            if monitor in ready:
                return False  # disconnected: cut
            if sub.recv_multipart()[0] == probe:
                return True
    finally:
        monitor.close(linger=0)
        sub.close(linger=0)
        ctx.term()


def main(argv: list[str]) -> None:
    endpoint, size, count = argv[0], int(argv[1]), int(argv[2])
    churn = len(argv) > 3 and argv[3] == "churn"
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SNDHWM, 0)  # queue every subscription, however many
    monitor = sub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    sub.connect(endpoint)
    monitor.recv_multipart()  # connected: what follows goes on the wire
    for i in range(count):
        topic = (b"%08d" % i).ljust(size, b"x")
        sub.setsockopt(zmq.SUBSCRIBE, topic)
        if churn:
            sub.setsockopt(zmq.UNSUBSCRIBE, topic)
    print("sent", flush=True)
    sys.stdin.read()
    sub.close(linger=0)


if __name__ == "__main__":
    main(sys.argv[1:])
