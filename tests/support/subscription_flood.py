"""A misbehaving events subscriber, run as a process of its own (the daemon's limits
are per peer process): `python -m tests.support.subscription_flood ENDPOINT SIZE
COUNT [churn]`. It subscribes COUNT topics of SIZE bytes (with `churn`, it
unsubscribes each one right after, and repeats), prints "sent" and keeps its
connection until its stdin closes."""

from __future__ import annotations

import sys

import zmq


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
