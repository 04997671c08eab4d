"""`hdsp` loads only what the command it runs needs: the SDK of `hdsp acp` (over
half a second to import) and the live view's rich come with their commands, and
it makes the parser of that command alone."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from hdsp.client.cli.parser import build_parser as _parser
from hdsp.client.cli.parser import command_of as _command_of
from tests.support.daemon_process import DaemonProcess


def _imported(daemon: DaemonProcess, *argv: str) -> set[str]:
    """The modules `hdsp ARGV` imports (`python -X importtime` tells), once it
    succeeded."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hdsp.client", *argv],
        env={"HDSP_RUNTIME_DIR": str(daemon.runtime_dir), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", r.stderr, re.M))


def test_hdsp_tasks_loads_neither_the_acp_sdk_nor_rich(daemon: DaemonProcess) -> None:
    loaded = _imported(daemon, "tasks")
    assert "hdsp.client.acp.command" in loaded  # the parser's module, and the log read right
    assert not {"acp", "acp.schema", "hdsp.client.acp.agent", "rich", "pydantic"} & loaded


@pytest.mark.parametrize(
    "argv",
    [
        ["tasks", "--limit", "3"],
        ["--json", "tasks", "--tree"],
        ["--runtime-dir", "/x", "show", "3f2a", "--full"],
        ["--remote=lab", "answer", "3f2a", "--no", "not that file"],
        ["remote", "rm", "lab"],
        ["config", "get", "retry.max_attempts"],
        ["mcp", "serve"],
    ],
)
def test_the_parser_of_the_command_run_alone_reads_argv_as_the_whole_parser(
    argv: list[str],
) -> None:
    """`hdsp` makes the parser of the subcommand it runs, not all seventy."""
    command = _command_of(argv)
    assert command is not None
    assert vars(_parser(command).parse_args(argv)) == vars(_parser().parse_args(argv))


def test_a_command_that_is_not_one_is_refused_with_every_command_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _command_of(["nosuch"]) == "nosuch"
    assert _command_of(["--help"]) is None and _command_of(["--run", "/x", "tasks"]) is None
    with pytest.raises(SystemExit):
        _parser("nosuch").parse_args(["nosuch"])
    error = capsys.readouterr().err
    assert "invalid choice: 'nosuch'" in error
    assert all(f"'{name}'" in error for name in ("run", "tasks", "remote", "acp", "completion"))


#: What a one-shot command does not need: an event loop, the async client, the
#: live view, the prompt (asyncio alone was a fifth of `hdsp tasks`' start-up).
_LOOP_AND_VIEWS = {
    "asyncio",
    "anyio",
    "anyio._core._eventloop",
    "anyio._backends._asyncio",
    "zmq.asyncio",
    "hdsp.client.client",
    "rich",
    "prompt_toolkit",
}


@pytest.mark.parametrize("argv", [["--help"], ["tasks"], ["--json", "tasks", "--limit", "2"]])
def test_hdsp_help_and_tasks_start_no_event_loop(daemon: DaemonProcess, argv: list[str]) -> None:
    loaded = _imported(daemon, *argv)
    assert "hdsp.client.cli" in loaded  # and the log read right
    assert not _LOOP_AND_VIEWS & loaded
    if argv == ["--help"]:
        assert "zmq" not in loaded  # no socket either
    else:
        assert "hdsp.client.oneshot" in loaded
