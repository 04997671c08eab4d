"""`hdsp keys` (this client's CURVE key pair) and `hdsp remote` (named remote
daemons): files in the client's config dir, no daemon needed (see `remotes`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import RemoteConfigError
from ..escape import escape_controls
from ..exit_codes import ExitCode
from ..remotes import (
    add_remote,
    config_dir,
    generate_client_keys,
    load_client_keys,
    load_remotes,
    remove_remote,
)

__all__ = ["LOCAL_COMMANDS", "add_remote_parsers", "run_local_command"]

#: Commands that only touch the client's own files: they never connect.
LOCAL_COMMANDS = ("keys", "remote")


def add_remote_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    keys = sub.add_parser(
        "keys",
        parents=[common],
        help="this client's CURVE key pair, for remote daemons (hdsp --remote)",
        description="The client's CURVE key pair, in the config dir (~/.config/hdsp/keys). "
        "A remote daemon's admin authorises its public key: `hdspd keys authorize NAME KEY`.",
    )
    actions = keys.add_subparsers(dest="action", metavar="ACTION")
    generate = actions.add_parser(
        "generate",
        parents=[common],
        help="make the key pair (kept if there is one) and print the public key",
    )
    generate.add_argument(
        "--replace",
        action="store_true",
        help="make a new pair even if there is one (the old key stops working)",
    )
    actions.add_parser("show", parents=[common], help="print the public key (the default)")

    remote = sub.add_parser(
        "remote",
        parents=[common],
        help="named remote daemons over TCP (CURVE): add, list, remove",
        description="A remote is a daemon listening on TCP (its tcp.listen setting), "
        "under CURVE. `hdsp --remote NAME ...` (or HDSP_REMOTE=NAME) sends any command "
        "there.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  hdsp keys generate      (then the daemon's admin authorises the key)\n"
        "  hdsp remote add work tcp://ws.example.org:7737 --server-key='KEY'\n"
        "  hdsp --remote work tasks",
    )
    actions = remote.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", parents=[common], help="save (or replace) a remote")
    add.add_argument("name", help="what --remote calls it")
    add.add_argument("address", help="tcp://HOST:PORT (the daemon's tcp.listen; events: PORT+1)")
    add.add_argument(
        "--server-key",
        required=True,
        metavar="KEY",
        help="the daemon's public key, as `hdspd keys` prints it on its host",
    )
    actions.add_parser("list", parents=[common], help="the saved remotes")
    rm = actions.add_parser("remove", aliases=["rm"], parents=[common], help="forget a remote")
    rm.add_argument("name")


def _out(text: str) -> None:
    sys.stdout.write(escape_controls(text) + "\n")


def run_local_command(args: argparse.Namespace) -> int:
    try:
        if args.command == "keys":
            return _keys(args)
        return _remote(args)
    except (RemoteConfigError, OSError) as exc:
        print(f"hdsp: {escape_controls(str(exc))}", file=sys.stderr)
        return ExitCode.USAGE


def _keys(args: argparse.Namespace) -> int:
    if args.action == "generate":
        made = generate_client_keys(replace=args.replace)
        keys = load_client_keys()
        if not args.json:
            what = "made a new" if made else "kept the existing"
            print(f"hdsp: {what} key pair in {keys.path.parent}", file=sys.stderr)
            print(
                "hdsp: on the daemon's host, its admin runs: hdspd keys authorize NAME -- "
                f"'{keys.public.decode()}'",
                file=sys.stderr,
            )
    else:
        keys = load_client_keys()
    if args.json:
        _out(json.dumps({"publicKey": keys.public.decode(), "path": str(keys.path)}))
    else:
        _out(keys.public.decode())
    return ExitCode.OK


def _remote(args: argparse.Namespace) -> int:
    if args.action == "add":
        remote = add_remote(args.name, args.address, args.server_key)
        if not args.json:
            _out(f"saved remote {remote.name}: {remote.address} (events on {remote.events})")
            _out(f"use it with `hdsp --remote {remote.name} ...` or HDSP_REMOTE={remote.name}")
        return ExitCode.OK
    if args.action in ("remove", "rm"):
        if not remove_remote(args.name):
            print(f"hdsp: no remote named {escape_controls(args.name)!r}", file=sys.stderr)
            return ExitCode.USAGE
        if not args.json:
            _out(f"removed remote {args.name}")
        return ExitCode.OK
    remotes = load_remotes()
    for remote in remotes.values():
        if args.json:
            _out(
                json.dumps(
                    {"name": remote.name, "address": remote.address, "serverKey": remote.server_key}
                )
            )
        else:
            _out(f"{remote.name:<16} {remote.address}  server key {remote.server_key}")
    if not remotes and not args.json:
        _out(f"No remotes ({config_dir() / 'remotes.json'}): `hdsp remote add NAME ADDRESS ...`.")
    return ExitCode.OK
