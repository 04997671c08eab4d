"""The baseline of `hdsp tasks`: the least a Python script needs to do the same
query and print the same lines. Run as a file (`python bench/minimal_tasks.py
RUNTIME_DIR [LIMIT]`), so that its process start is the interpreter's alone, as
`hdsp`'s is: it reads the discovery file, says Connect on a plain synchronous
pyzmq DEALER, sends ListTasks, decodes the reply with the stdlib's json, prints
a line per task as `hdsp tasks` does, and says Disconnect."""

import json
import sys

import zmq


def main() -> None:
    runtime_dir, limit = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with open(f"{runtime_dir}/hdspd.json", encoding="utf-8") as f:
        control = json.load(f)["control"]
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(control)
    client = {"name": "minimal", "version": "0", "kind": "script"}
    sock.send(json.dumps({"type": "Connect", "protocolVersion": 1, "client": client}).encode())
    client_id = json.loads(sock.recv())["data"]["clientId"]
    command = {"commandName": "ListTasks", "data": {"limit": limit}}
    sock.send(
        json.dumps(
            {"type": "TaskCommand", "clientId": client_id, "requestId": "r-1", "data": command}
        ).encode()
    )
    reply = json.loads(sock.recv())
    out = []
    for t in reply["result"]["tasks"]:
        title = t["task"].replace("\n", " ")
        title = title if len(title) <= 60 else title[:59] + "…"
        out.append(f"{t['id'][:8]}  #{t['number']:<4} {t.get('state') or '':<11} {title}")
    sys.stdout.write("\n".join(out) + "\n")
    sock.send(json.dumps({"type": "Disconnect", "clientId": client_id}).encode())
    sock.close()


main()
