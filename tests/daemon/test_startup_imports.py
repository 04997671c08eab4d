"""hdspd keeps out the optional modules its libraries would import at start-up
and it never uses (see `hdsp.daemon.__main__._keep_out_unused_modules`): most of
the CPU between exec and the first answered command was spent on them."""

from __future__ import annotations

import re

from hdsp.client import connect
from hdsp.protocol import ListTasks, ListTasksData
from tests.support.daemon_process import DaemonProcess


def _imported(stderr: str) -> set[str]:
    """Modules Python's import-time log shows as loaded (a module kept out with
    None in sys.modules is never loaded, so neither are its submodules)."""
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr, re.M))


async def _import_log(daemon_process: DaemonProcess) -> str:
    """hdspd's stderr with Python's import-time log (and JSON logs, as the test
    harness asks), once it answered a command that needs the engine (the tool
    registry) and its warm-up is done."""
    daemon_process.extra_env["PYTHONPROFILEIMPORTTIME"] = "1"
    daemon_process.start()
    async with connect(daemon_process.runtime_dir, name="test") as client:
        await client.request(ListTasks(data=ListTasksData(limit=1)))
    daemon_process.wait_for_log("provider SDKs loaded; start-up objects frozen")
    return daemon_process.stderr()


async def test_the_daemon_answers_without_loading_format_checkers_or_rich(
    daemon_process: DaemonProcess,
) -> None:
    loaded = _imported(await _import_log(daemon_process))
    assert "jsonschema.validators" in loaded  # the warm-up's, and the log read right
    assert not {"rfc3987_syntax.syntax_helpers", "arrow.arrow", "rich.console"} & loaded
    # The PostgreSQL store's driver, only for a store.url that names a server.
    assert "psycopg" not in loaded


async def test_jsonschema_is_imported_by_the_warm_up_not_by_the_engine(
    daemon_process: DaemonProcess,
) -> None:
    """Commands wait for the engine, whose load logs "sandbox ready" once its
    modules are imported; jsonschema (the tools' schema checks) comes after, with
    the warm-up, which no command waits for."""
    stderr = await _import_log(daemon_process)
    engine_loaded = stderr.index('"event": "sandbox ready"')
    assert "hdsp.daemon.tools.registry" in _imported(stderr[:engine_loaded])
    assert "jsonschema" not in _imported(stderr[:engine_loaded])
    assert "jsonschema" in _imported(stderr[engine_loaded:])


async def test_the_daemon_without_mcp_servers_never_loads_the_mcp_sdk(
    daemon_process: DaemonProcess,
) -> None:
    """The `mcp` SDK is half a second of CPU: a connection's runner loads it, and the
    warm-up when the settings name a server; a daemon with none answers and warms
    up without it."""
    loaded = _imported(await _import_log(daemon_process))
    assert "hdsp.daemon.mcp.connection" in loaded  # the engine, and the log read right
    assert not {"mcp", "mcp_types", "mcp.client.session"} & loaded


async def test_the_engine_imports_neither_yaml_nor_pathspec_and_runs_no_ldconfig(
    daemon_process: DaemonProcess,
) -> None:
    """PyYAML (workspace modes files, slash commands' front matter) and pathspec
    (.hdspignore, protected paths) are a quarter of the engine's imports, and
    finding glibc's malloc_trim runs `ldconfig -p`: the warm-up does all three,
    after the engine is up."""
    stderr = await _import_log(daemon_process)
    engine_loaded = stderr.index('"event": "sandbox ready"')
    assert "hdsp.daemon.tools.workspace" in _imported(stderr[:engine_loaded])
    # (Submodules: the log leaves out a module importlib.import_module imports.)
    lazy = {"yaml.loader", "pathspec.pathspec", "ctypes.util"}
    assert not lazy & _imported(stderr[:engine_loaded])
    assert lazy <= _imported(stderr[engine_loaded:])
