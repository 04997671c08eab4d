"""`hdsp config` (the daemon's settings: get, set, export, import), `hdsp profile`
(provider profiles) and `hdsp secret` (API keys in the daemon's keyring).

A secret's value is read before connecting (:func:`read_secret_value`), and never
from argv, where `ps` and shell history would show it.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from hdsp.protocol import ErrorCode, encode

from ..errors import CommandFailed
from ..exit_codes import ExitCode
from .console import Console
from .profiles_view import profile_lines

if TYPE_CHECKING:
    from ..client import Client

__all__ = [
    "add_config_parser",
    "add_profile_parser",
    "add_secret_parser",
    "read_secret_value",
    "warn_plaintext",
]


def warn_plaintext(cli: Console, path: str | None, what: str = "API keys are") -> None:
    """Say so when the daemon's keyring keeps keys unencrypted."""
    if path is not None:
        cli.out(
            f"  keyring: {what} stored in plain text at {path} (keyrings.alt's "
            "PlaintextKeyring); use a desktop keyring to have them encrypted"
        )


def _out_json(cli: Console, value: Any) -> None:
    if cli.args.json:
        cli.out_raw(json.dumps(value, ensure_ascii=False))
    else:
        cli.out(json.dumps(value, indent=2, ensure_ascii=False))


async def run_config(cli: Console, client: Client) -> int:
    a = cli.args
    if a.action == "get":
        view = await client.get_settings()
        if a.key is None:
            _out_json(cli, view.settings)
            return ExitCode.OK
        found, value = _lookup(view.settings, a.key)
        if not found:
            raise CommandFailed(
                ErrorCode.INVALID_REQUEST,
                f"No setting {a.key!r}; `hdsp config get` prints them all.",
            )
        _out_json(cli, value)
        return ExitCode.OK
    if a.action == "set":
        _check_known_key((await client.get_settings()).settings, a.key)
        view = await client.update_settings(_patch(a.key, _parse_value(a.value)))
        found, value = _lookup(view.settings, a.key)
        _out_json(cli, value if found else None)
        return ExitCode.OK
    if a.action == "export":
        exported = await client.export_settings()
        text = json.dumps(exported.settings, indent=2, ensure_ascii=False) + "\n"
        if a.file is None or a.file == "-":
            sys.stdout.write(text)
        else:
            fd = os.open(a.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        if exported.secret_names and not a.json:
            names = ", ".join(exported.secret_names)
            print(
                f"hdsp: secrets are not exported; set them where you import: {names} "
                "(`hdsp secret set NAME`).",
                file=sys.stderr,
            )
        return ExitCode.OK
    # import
    try:
        if a.file == "-":
            document = json.load(sys.stdin)
        else:
            import anyio

            document = json.loads(await anyio.Path(a.file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST, f"Cannot read settings from {a.file}: {exc}"
        ) from None
    if not isinstance(document, dict):
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST, f"{a.file} holds no settings (not a JSON object)."
        )
    result = await client.import_settings(document, merge=not a.replace)
    if a.json:
        cli.out_raw(encode(result).decode())
    else:
        for path in result.applied:
            cli.out(f"imported  {path}")
        for rejection in result.rejected:
            cli.out(f"left out  {rejection.path}: {rejection.reason}")
    return ExitCode.FAILED if result.rejected else ExitCode.OK


def add_config_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    config = sub.add_parser("config", parents=[common], help="the daemon's settings")
    actions = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = actions.add_parser("get", parents=[common], help="print the settings, or one key")
    get.add_argument("key", nargs="?", help="dotted key, e.g. retry.max_attempts")
    put = actions.add_parser("set", parents=[common], help="change one setting")
    put.add_argument("key", help="dotted key, e.g. kernels.default_timeout_seconds")
    put.add_argument("value", help="a JSON value (null restores the default); else a string")
    export = actions.add_parser("export", parents=[common], help="write the settings (no secrets)")
    export.add_argument("file", nargs="?", help="where to write them (default: stdout)")
    load = actions.add_parser(
        "import", parents=[common], help="apply exported settings (exit 1 if parts were left out)"
    )
    load.add_argument("file", help="a file written by `hdsp config export` ('-' for stdin)")
    load.add_argument("--replace", action="store_true", help="replace the settings, not merge")
    config.set_defaults(handler=run_config)


async def run_profile(cli: Console, client: Client) -> int:
    a = cli.args
    if a.action == "add":
        options = dict(_option(text) for text in a.option)
        info = await client.save_profile(
            a.name,
            provider=a.provider,
            model=a.model,
            base_url=a.base_url,
            options=options,
            secret=a.secret,
            select=a.use,
        )
        if a.json:
            cli.out_raw(encode(info).decode())
            return ExitCode.OK
        cli.out(f"saved profile {info.name}" + (" (current)" if info.current else ""))
        if info.secret is not None and not info.secret_set:
            cli.out(f"its key is not set yet: hdsp secret set {info.secret}")
        if not info.current:
            cli.out(f"use it with `hdsp profile use {info.name}` or `--profile {info.name}`")
        return ExitCode.OK
    if a.action == "use":
        listing = await client.select_profile(a.name)
    elif a.action == "rm":
        listing = await client.delete_profile(a.name)
    else:
        listing = await client.list_profiles()
    if a.json:
        for info in listing.profiles:
            cli.out_raw(encode(info).decode())
        return ExitCode.OK
    for line in profile_lines(listing.profiles):
        cli.out(line)
    if listing.current is None:
        cli.out("No current profile: `hdsp profile use NAME` picks one.")
    warn_plaintext(cli, listing.plaintext_keyring)
    return ExitCode.OK


def add_profile_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    profile = sub.add_parser("profile", parents=[common], help="provider profiles")
    actions = profile.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", parents=[common], help="list profiles (* marks the current one)")
    add = actions.add_parser("add", parents=[common], help="add or replace a profile")
    add.add_argument("name")
    add.add_argument(
        "--provider", required=True, help="anthropic, openai, openai-compatible or demo"
    )
    add.add_argument("--model", required=True, help="model id, e.g. claude-sonnet-4-6")
    add.add_argument("--base-url", help="API base URL, e.g. http://localhost:11434/v1")
    add.add_argument("--secret", help="NAME of the secret holding the key (`hdsp secret set`)")
    add.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="provider option, e.g. thinking_budget=4096 (repeatable)",
    )
    add.add_argument("--use", action="store_true", help="also make it the current profile")
    use = actions.add_parser("use", parents=[common], help="make a profile the current one")
    use.add_argument("name")
    rm = actions.add_parser("rm", parents=[common], help="remove a saved profile")
    rm.add_argument("name")
    profile.set_defaults(handler=run_profile)


async def run_secret(cli: Console, client: Client) -> int:
    a = cli.args
    if a.action == "list":
        view = await client.get_settings()
        for secret in view.secrets:
            if a.json:
                cli.out_raw(encode(secret).decode())
                continue
            state = f"set ({secret.source})" if secret.is_set else "not set"
            env = f"  env: {', '.join(secret.env_vars)}" if secret.env_vars else ""
            error = f"  ({secret.error})" if secret.error else ""
            cli.out(f"{secret.name:<16} {state}{env}{error}")
        return ExitCode.OK
    if a.action == "set":
        info = await client.set_secret(a.name, a.value)
    else:
        info = await client.delete_secret(a.name)
    if a.json:
        cli.out_raw(encode(info).decode())
    elif a.action == "set":
        backend = info.keyring_backend or "hdspd's keyring"
        if info.plaintext_keyring is not None:
            cli.out(
                f"secret {info.name} stored in plain text at {info.plaintext_keyring} "
                f"(keyring backend: {backend})"
            )
            print(
                "hdsp: warning: this keyring does not encrypt: anyone who can read that "
                "file reads the key. A desktop keyring (Secret Service, KWallet) encrypts.",
                file=sys.stderr,
            )
        else:
            cli.out(f"secret {info.name} stored (keyring backend: {backend})")
    elif info.is_set:
        cli.out(f"secret {info.name} removed from the keyring; {info.source} still sets it")
    else:
        cli.out(f"secret {info.name} removed")
    return ExitCode.OK


def read_secret_value(args: argparse.Namespace) -> int | None:
    """Put the value of `hdsp secret set NAME` in `args.value`, read before
    connecting; the exit code when none was given."""
    try:
        args.value = _read_secret(args.name)
    except (EOFError, KeyboardInterrupt):
        print("hdsp: no value given; nothing was stored.", file=sys.stderr)
        return ExitCode.USAGE
    if not args.value:
        print("hdsp: the value is empty; nothing was stored.", file=sys.stderr)
        return ExitCode.USAGE
    return None


def add_secret_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    secret = sub.add_parser("secret", parents=[common], help="API keys in the daemon's keyring")
    actions = secret.add_subparsers(dest="action", required=True, metavar="ACTION")
    put = actions.add_parser(
        "set", parents=[common], help="store a secret (asks for it, or reads one line of stdin)"
    )
    put.add_argument("name", help="e.g. anthropic, openai, or a name a profile uses")
    rm = actions.add_parser("rm", parents=[common], help="remove a secret from the keyring")
    rm.add_argument("name")
    actions.add_parser("list", parents=[common], help="secret names and whether they are set")

    secret.set_defaults(handler=run_secret)


# ---- settings helpers ---------------------------------------------------------


def _read_secret(name: str) -> str:
    """The value of a secret: asked for without echo on a terminal, else the first
    line of stdin (`pass show key | hdsp secret set name`)."""
    if sys.stdin.isatty():
        return getpass.getpass(f"Value of secret {name!r} (not shown): ").strip()
    return sys.stdin.readline().strip()


def _parse_value(text: str) -> Any:
    """A JSON value, or the text itself when it is not JSON (`hdsp config set
    current_profile work`)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CommandFailed(ErrorCode.INVALID_REQUEST, f"--option takes KEY=VALUE, not {text!r}.")
    return key.strip(), _parse_value(value)


def _patch(key: str, value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} from "a.b"."""
    patch: Any = value
    for part in reversed(key.split(".")):
        patch = {part: patch}
    return dict(patch)


#: Settings that are maps of names the user chooses (any name is a new entry).
_OPEN_MAPS = ("profiles", "models")


def _check_known_key(settings: dict[str, Any], key: str) -> None:
    """Refuse a dotted key the settings do not have, naming the ones they do."""
    if key.split(".", 1)[0] in _OPEN_MAPS and "." in key:
        return
    found, _ = _lookup(settings, key)
    if found:
        return
    parts = key.split(".")
    node: Any = settings
    known_at = ""
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            break
        node = node[part]
        known_at = f"{known_at}.{part}" if known_at else part
    if not isinstance(node, dict):
        raise CommandFailed(
            ErrorCode.INVALID_REQUEST, f"No setting {key!r}: {known_at} is a value, not a section."
        )
    where = f" under {known_at}" if known_at else ""
    prefix = f"{known_at}." if known_at else ""
    names = ", ".join(prefix + name for name in sorted(node))
    raise CommandFailed(
        ErrorCode.INVALID_REQUEST, f"No setting {key!r}. Known settings{where}: {names}."
    )


def _lookup(document: Any, key: str) -> tuple[bool, Any]:
    node = document
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node
