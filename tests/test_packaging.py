"""The distribution as users get it: import rules between packages, and a real wheel.

DESIGN.md, "Layout": `hdsp.protocol` imports only msgspec and the standard library,
and `hdsp.client` never imports `hdsp.daemon`, so clients (and the JupyterLab
plugin) can be installed and imported without the daemon's dependencies.

Inside the daemon, layers only look down (STYLE.md 17): see :data:`DAEMON_LAYERS`.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from hdsp.protocol.version import __version__

REPO = Path(__file__).resolve().parents[1]

#: Import name -> source folder, as in pyproject's [tool.setuptools.package-dir].
SOURCES = {
    "hdsp.protocol": REPO / "protocol",
    "hdsp.client": REPO / "clients",
    "hdsp.daemon": REPO / "daemon",
}

# Folders under a package that hold no code of ours (a JupyterLab plugin's
# node_modules ships Python files of its own).
_NOT_SOURCE = {"node_modules", "__pycache__", "build", "dist", "lib"}


# --- a static reading of every import ------------------------------------------------


def python_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if not any(part in _NOT_SOURCE or part.startswith(".") for part in parts):
            yield path


def module_of(package: str, root: Path, path: Path) -> tuple[str, bool]:
    """Return the import name of the file at ``path`` and whether it is a package."""
    parts = path.relative_to(root).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join((package, *parts)), is_package


def imports_of(package: str, root: Path, path: Path) -> Iterator[tuple[int, str]]:
    """Yield (line, absolute module name) for every import in the file.

    Relative imports are resolved. For ``from X import name`` both ``X`` and
    ``X.name`` are yielded, since ``name`` may be a submodule.
    """
    module, is_package = module_of(package, root, path)
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                up = node.level - 1
                if up >= len(package_parts):
                    raise AssertionError(f"{path}:{node.lineno}: relative import beyond hdsp")
                base_parts = package_parts[: len(package_parts) - up]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            yield node.lineno, base
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}"


def violations(package: str, root: Path, allowed: Callable[[str], bool]) -> list[str]:
    return [
        f"{path.relative_to(root.parent)}:{line}: imports {name}"
        for path in python_files(root)
        for line, name in imports_of(package, root, path)
        if not allowed(name)
    ]


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def protocol_may_import(name: str) -> bool:
    top = name.partition(".")[0]
    return (
        top in sys.stdlib_module_names
        or top == "msgspec"
        or name == "hdsp"
        or in_package(name, "hdsp.protocol")
    )


def client_may_import(name: str) -> bool:
    return not in_package(name, "hdsp.daemon")


# --- sizes ------------------------------------------------------------------------

#: No product file is longer (issue 34): past it a module holds more than one thing.
MAX_LINES = 800
#: The files that each hold one concept's core, with their own tighter limits.
MAX_LINES_OF = {
    "daemon/tasks/manager.py": 500,
    "daemon/tasks/task.py": 450,
    "daemon/kernels/service.py": 500,
    "clients/client.py": 800,
}


def test_no_product_file_outgrows_its_limit() -> None:
    too_long = []
    for root in SOURCES.values():
        for path in python_files(root):
            name = path.relative_to(REPO).as_posix()
            lines = len(path.read_text(encoding="utf-8").splitlines())
            limit = MAX_LINES_OF.get(name, MAX_LINES)
            if lines > limit:
                too_long.append(f"{name}: {lines} lines (at most {limit})")
    assert not too_long, "split these by what each part holds:\n" + "\n".join(too_long)
    for name in MAX_LINES_OF:
        assert (REPO / name).is_file(), f"{name} moved: say where its limit goes"


def test_protocol_imports_only_msgspec_and_the_stdlib() -> None:
    assert any(python_files(SOURCES["hdsp.protocol"])), "no protocol sources found"
    found = violations("hdsp.protocol", SOURCES["hdsp.protocol"], protocol_may_import)
    assert not found, "hdsp.protocol may import only msgspec and the stdlib:\n" + "\n".join(found)


def test_client_never_imports_the_daemon() -> None:
    found = violations("hdsp.client", SOURCES["hdsp.client"], client_may_import)
    assert not found, "hdsp.client must not import hdsp.daemon:\n" + "\n".join(found)


def test_the_import_checker_catches_violations(tmp_path: Path) -> None:
    """The two rules above would notice a breach, relative imports included."""
    root = tmp_path / "clients"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from . import sub\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "mod.py").write_text(
        "import json\nfrom ...daemon import app\nfrom hdsp.daemon.tasks import Task\n"
    )
    found = violations("hdsp.client", root, client_may_import)
    assert found == [
        "clients/sub/mod.py:2: imports hdsp.daemon",
        "clients/sub/mod.py:2: imports hdsp.daemon.app",
        "clients/sub/mod.py:3: imports hdsp.daemon.tasks",
        "clients/sub/mod.py:3: imports hdsp.daemon.tasks.Task",
    ]
    # The protocol's rule, applied to the same tree: only stdlib and msgspec pass.
    (root / "__init__.py").write_text("from __future__ import annotations\nimport msgspec.json\n")
    (root / "sub" / "mod.py").write_text("import zmq\nfrom .. import sub\n")
    assert violations("hdsp.client", root, protocol_may_import) == [
        "clients/sub/mod.py:1: imports zmq",
        "clients/sub/mod.py:2: imports hdsp.client",
        "clients/sub/mod.py:2: imports hdsp.client.sub",
    ]


# --- the daemon's layers ------------------------------------------------------------

#: The daemon's parts, lowest layer first: a part (a subpackage, or a module at the top
#: of hdsp.daemon) may import its own layer and the layers below, never one above.
#: Parts of one layer may import each other as long as no import circle forms (a
#: separate rule). A new part must be placed here before it imports or is imported.
DAEMON_LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"protocol"}),  # hdsp.protocol: the wire types
    # Vocabulary and plumbing every layer may use.
    frozenset(
        {
            "hdsp.daemon",  # the package itself: its version
            "conversation",
            "errors",
            "logs",
            "scrubber",
            "paths",
            "lock",
            "sdnotify",
            "systemd_unit",
            "atomic_write",
            "bounded_text",
            "memory",
            "workspace_rules",
        }
    ),
    frozenset({"config", "store", "server"}),
    frozenset({"llm", "kernels"}),
    frozenset({"sandbox"}),
    frozenset({"tools"}),
    frozenset({"mcp"}),  # MCP servers' tools (issue 23)
    frozenset({"approvals"}),
    frozenset({"modes"}),  # which tools each mode may use; rules files, slash commands
    frozenset({"agents"}),  # agent definitions, their prompt, call_agent and finish
    frozenset({"checkpoints"}),
    frozenset({"tasks"}),
    frozenset({"commands"}),
    frozenset({"app", "__main__"}),
)

#: Parts whose imports are narrower than their layer allows: the ZeroMQ server knows
#: frames, sessions and errors, never what the commands do (and gives back the
#: memory of a peer it cut: `memory`, plumbing).
DAEMON_MAY_IMPORT_ONLY: Mapping[str, frozenset[str]] = {
    "server": frozenset({"protocol", "errors", "logs", "scrubber", "memory"}),
}

#: Parts of one layer that must not import each other: the kernels know no model.
DAEMON_APART: frozenset[frozenset[str]] = frozenset({frozenset({"llm", "kernels"})})


def module_graph(package: str, root: Path) -> dict[str, dict[str, int]]:
    """Every module of the package -> the modules of ours it imports, with a line.

    Every import counts: at the top, in a function, or under ``TYPE_CHECKING`` (a
    dependency that only the type checker sees is still one). ``from X import
    name`` counts as importing ``X.name`` when that is a module, else ``X``; any
    hdsp.protocol module counts as ``hdsp.protocol``.
    """
    files = {module_of(package, root, path)[0]: path for path in python_files(root)}

    def ours(name: str) -> str | None:
        if in_package(name, "hdsp.protocol"):
            return "hdsp.protocol"
        while name not in files:
            if "." not in name:
                return None
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges = graph[module] = {}
        by_line: dict[int, list[str]] = {}
        for line, name in imports_of(package, root, path):
            by_line.setdefault(line, []).append(name)
        for line, names in by_line.items():
            # imports_of yields X and X.name for `from X import name`: X.name alone
            # when it is a module (a submodule imported), X when it is not.
            submodules = {n for n in names if n in files}
            targets = {n for n in names if not any(m.startswith(n + ".") for m in submodules)}
            for name in targets:
                target = ours(name)
                if target is not None and target != module:
                    edges.setdefault(target, line)
    return graph


def daemon_part(module: str) -> str:
    """The layer table's name for the part a module belongs to."""
    if module == "hdsp.protocol":
        return "protocol"
    if module == "hdsp.daemon":
        return module
    return module.removeprefix("hdsp.daemon.").partition(".")[0]


def import_circles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """The graph's circles: its strongly connected components of two or more
    modules (Tarjan's algorithm, iteratively), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def layer_violations(
    package: str,
    root: Path,
    layers: tuple[frozenset[str], ...] = DAEMON_LAYERS,
) -> list[str]:
    """Every import that climbs a layer, breaks a narrower rule or closes a circle."""
    rank = {part: i for i, layer in enumerate(layers) for part in layer}
    graph = module_graph(package, root)
    found = []
    for module, edges in sorted(graph.items()):
        where = module.removeprefix(package + ".")
        part = daemon_part(module)
        if part not in rank:
            found.append(f"{where}: {part} has no place in DAEMON_LAYERS")
            continue
        for target, line in sorted(edges.items()):
            other = daemon_part(target)
            if other == part:
                continue
            if other not in rank:
                found.append(f"{where}:{line}: imports {target}, in no layer")
            elif rank[other] > rank[part]:
                found.append(f"{where}:{line}: imports {target}, a higher layer")
            elif part in DAEMON_MAY_IMPORT_ONLY and other not in DAEMON_MAY_IMPORT_ONLY[part]:
                found.append(f"{where}:{line}: imports {target}; {part} may not")
            elif frozenset({part, other}) in DAEMON_APART:
                found.append(f"{where}:{line}: imports {target}; {part} and {other} stay apart")
    for circle in import_circles(graph):
        found.append("import circle: " + " <-> ".join(circle))
    parts: dict[str, dict[str, int]] = {}
    for module, edges in graph.items():
        for target, line in edges.items():
            if daemon_part(target) != daemon_part(module):
                parts.setdefault(daemon_part(module), {})[daemon_part(target)] = line
    for circle in import_circles(parts):
        found.append("circle between parts: " + " <-> ".join(circle))
    return found


def test_daemon_layers_only_look_down() -> None:
    found = layer_violations("hdsp.daemon", SOURCES["hdsp.daemon"])
    assert not found, "the daemon's layers (DAEMON_LAYERS) are broken:\n" + "\n".join(found)


def test_no_package_of_the_daemon_imports_lazily() -> None:
    """No PEP 562 ``__getattr__`` in a package: a lazy import that hides a circle."""
    lazy = [
        str(path.relative_to(REPO))
        for path in python_files(SOURCES["hdsp.daemon"])
        if path.name == "__init__.py"
        and any(
            isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for node in ast.parse(path.read_text(encoding="utf-8")).body
        )
    ]
    assert not lazy, f"lazy-import shims: {lazy}"


def test_the_layer_checker_catches_violations(tmp_path: Path) -> None:
    """Upward imports, the server's narrow rule, parts kept apart, parts in no
    layer and circles (through TYPE_CHECKING and functions too) are all found."""
    root = tmp_path / "daemon"
    for folder in ("llm", "kernels", "server", "tasks"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "conversation.py").write_text("from .llm import models\n")
    (root / "llm" / "models.py").write_text("from hdsp.protocol import ErrorCode\n")
    (root / "kernels" / "outputs.py").write_text("from ..llm.models import table\n")
    (root / "server" / "handlers.py").write_text("from hdsp.daemon import conversation\n")
    (root / "tasks" / "task.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .manager import M\n"
    )
    (root / "tasks" / "manager.py").write_text("def f():\n    from . import task\n")
    (root / "extra.py").write_text("")
    # Parts of one layer in a circle that no circle of modules closes.
    for folder in ("config", "store"):
        (root / folder).mkdir()
        (root / folder / "__init__.py").write_text("")
    (root / "config" / "settings.py").write_text("import hdsp.daemon.store.database\n")
    (root / "store" / "database.py").write_text("")
    (root / "store" / "journal.py").write_text("from ..config import settings\n")
    assert layer_violations("hdsp.daemon", root) == [
        "conversation:1: imports hdsp.daemon.llm.models, a higher layer",
        "extra: extra has no place in DAEMON_LAYERS",
        "kernels.outputs:1: imports hdsp.daemon.llm.models; kernels and llm stay apart",
        "server.handlers:1: imports hdsp.daemon.conversation; server may not",
        "import circle: hdsp.daemon.tasks.manager <-> hdsp.daemon.tasks.task",
        "circle between parts: config <-> store",
    ]


# --- the same rules, at run time ----------------------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=REPO
    )


def test_importing_the_client_does_not_load_the_daemon() -> None:
    result = run_python(
        "import hdsp.client, sys; "
        "assert not any(m.startswith('hdsp.daemon') for m in sys.modules), "
        "sorted(m for m in sys.modules if m.startswith('hdsp.daemon'))"
    )
    assert result.returncode == 0, result.stderr


def test_importing_the_protocol_loads_only_msgspec_and_the_stdlib() -> None:
    result = run_python(
        "import json, sys, msgspec; before = set(sys.modules); import hdsp.protocol; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    foreign = [name for name in loaded if not protocol_may_import(name)]
    assert not foreign, f"importing hdsp.protocol loaded {foreign}"


# --- a wheel, installed in a clean virtualenv ----------------------------------------

# Left out of the copy the wheel is built from: environments, caches, earlier builds.
_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".typecheck",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "node_modules",
)


def run(args: list[str | Path], **kwargs: object) -> str:
    """Run a command; on failure, fail the test with everything it printed."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    result = subprocess.run(
        [str(arg) for arg in args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        **kwargs,  # type: ignore[call-overload]
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))} exited {result.returncode}\n"
        f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return str(result.stdout)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_wheel_installs_and_runs_in_a_clean_venv(tmp_path: Path) -> None:
    # Build from a copy, so the test leaves nothing in the work tree and does not
    # race with editors; in an isolated environment, as pip would for users.
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=_NOT_COPIED, symlinks=True)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    said = built.stdout + built.stderr
    assert built.returncode == 0, said
    # issue 33: no banner of setuptools warnings (a data folder taken for a package).
    assert "absent from the `packages` configuration" not in said, said
    (wheel,) = dist.glob("hdsp-*.whl")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for shipped in (
        "hdsp/protocol/schema.json",
        "hdsp/protocol/py.typed",
        "hdsp/daemon/hdspd.service",
        "hdsp/daemon/py.typed",
        "hdsp/client/py.typed",
    ):
        assert shipped in names, f"the wheel lacks {shipped}; check [tool.setuptools.package-data]"
    assert not any(name.startswith("tests/") for name in names)
    # The prebuilt JupyterLab panel (`make labext` built it; `make test` runs it
    # first), where JupyterLab looks for it: under its npm name. No Node.js needed.
    panel = "hdsp-0.1.0.data/data/share/jupyter/labextensions/@hdsp/jupyterlab/"
    with zipfile.ZipFile(wheel) as archive:
        meta = json.loads(archive.read(panel + "package.json"))
    assert meta["name"] == "@hdsp/jupyterlab"
    entry = meta["jupyterlab"]["_build"]["load"]
    assert panel + entry in names, f"the wheel lacks the panel's {entry}"
    assert not any("node_modules" in name or "/frontend/" in name for name in names)
    # ...once: not a second time inside the package, as package data.
    assert not any(name.startswith("hdsp/client/jupyterlab/labextension") for name in names)

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv])
    bin_dir = venv / "bin"
    # Dependencies come from the index; pip's cache keeps repeated runs quick. The
    # `lab` extra: the JupyterLab plugin's modules import jupyter_server.
    run([bin_dir / "python", "-m", "pip", "install", "--quiet", f"{wheel}[lab]"])

    # Run from an unrelated directory, so nothing is imported from the source tree.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert __version__ in run([bin_dir / "hdspd", "--version"], cwd=outside)
    assert __version__ in run([bin_dir / "hdsp", "--version"], cwd=outside)

    # The unit is read from the installed package, not from the source tree.
    where = run(
        [
            bin_dir / "python",
            "-c",
            "import hdsp.daemon.systemd_unit as s; print(s.__file__); print(s.unit_text('/x/hdspd'))",
        ],
        cwd=outside,
    )
    module_file, _, unit = where.partition("\n")
    assert Path(module_file).is_relative_to(venv)
    assert "ExecStart=/x/hdspd\n" in unit

    # Every module of the source tree is in the wheel and imports from it.
    expected = sorted(
        ("hdsp." + pkg + "." + ".".join(p.relative_to(REPO / root).with_suffix("").parts)).replace(
            ".__init__", ""
        )
        for root, pkg in (("protocol", "protocol"), ("daemon", "daemon"), ("clients", "client"))
        for p in python_files(REPO / root)
        if p.name != "__main__.py"
    )
    imported = run(
        [
            bin_dir / "python",
            "-c",
            "import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    importlib.import_module(name)\n"
            "print(len(sys.argv) - 1)",
            *expected,
        ],
        cwd=outside,
    )
    assert imported.strip() == str(len(expected))

    # labserver (issue 16): installing hdsp enables its jupyter_server extension
    # (the enable file in etc/jupyter/jupyter_server_config.d), and it loads.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env |= {"JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"), "JUPYTER_PLATFORM_DIRS": "1"}
    listed = subprocess.run(
        [bin_dir / "jupyter", "server", "extension", "list"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)  # (colours, stderr)
    venv_config = f"Config dir: {venv / 'etc' / 'jupyter'}"
    assert venv_config in report, report
    section = report.partition(venv_config)[2].partition("Config dir:")[0]
    assert "hdsp.client.jupyterlab enabled" in section, report
    assert re.search(r"hdsp\.client\.jupyterlab\s+OK", section), report

    # ...and JupyterLab finds the panel, enabled and OK (it lists on stderr).
    listed = subprocess.run(
        [bin_dir / "jupyter", "labextension", "list"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    line = next((ln for ln in report.splitlines() if "@hdsp/jupyterlab" in ln), "")
    assert "enabled" in line and "OK" in line, report
