"""The drawing of the daemon's errors (hdsp.daemon.errors' docstring) is the real
tree: every public error class is drawn, under its real parent, with its real code,
and nothing drawn is gone. And a wire code is written only where it is translated:
no module of the daemon spells an ``ErrorCode`` but to give its error class one."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import hdsp.daemon
from hdsp.daemon import errors
from hdsp.daemon.errors import HdspError
from hdsp.protocol import ErrorCode

# A line of a drawn tree: "    ", the branches above it, its own branch, a class name.
_LINE = re.compile(
    r"^    (?P<above>(?:│   |    )*)(?P<branch>[├└]── )?(?P<name>[A-Z]\w*)(?P<rest>.*)$"
)


def _daemon_errors() -> dict[str, type[BaseException]]:
    """Every public exception class defined in hdsp.daemon, by name."""
    for module in pkgutil.walk_packages(hdsp.daemon.__path__, "hdsp.daemon."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: dict[str, type[BaseException]] = {}
    todo: list[type[BaseException]] = [BaseException]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("hdsp.daemon.") and not sub.__name__.startswith("_"):
                assert found.get(sub.__name__, sub) is sub, f"two error classes named {sub}"
                found[sub.__name__] = sub
    return found


def _drawn() -> dict[str, tuple[str | None, str]]:
    """Every class the docstring draws: its parent there (None for a root) and the
    rest of its line."""
    drawn: dict[str, tuple[str | None, str]] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        depth = len(match["above"]) // 4 + (1 if match["branch"] else 0)
        if depth > len(stack):
            raise AssertionError(f"a branch without a parent: {line!r}")
        del stack[depth:]
        assert match["name"] not in drawn, f"{match['name']} is drawn twice"
        drawn[match["name"]] = (stack[-1] if stack else None, match["rest"])
        stack.append(match["name"])
    return drawn


def _parent(cls: type[BaseException], ours: dict[str, type[BaseException]]) -> str | None:
    """The nearest of the daemon's public error classes `cls` derives from."""
    for base in cls.__mro__[1:]:
        if ours.get(base.__name__) is base:
            return base.__name__
    return None


def test_the_drawing_is_the_tree_of_the_real_classes() -> None:
    ours = _daemon_errors()
    drawn = _drawn()
    assert len(ours) >= 50
    missing = sorted(set(ours) - set(drawn))
    assert not missing, f"draw these in hdsp.daemon.errors' docstring: {missing}"
    stale = sorted(set(drawn) - set(ours))
    assert not stale, f"drawn in hdsp.daemon.errors' docstring, but no such class: {stale}"
    misplaced = {
        name: (parent, _parent(ours[name], ours))
        for name, (parent, _) in drawn.items()
        if parent != _parent(ours[name], ours)
    }
    assert not misplaced, f"drawn under (the first), derived from (the second): {misplaced}"


def test_every_error_a_command_meets_carries_the_code_drawn_for_it() -> None:
    ours = _daemon_errors()
    codes = {str(code) for code in ErrorCode}
    replying = {name for name, cls in ours.items() if issubclass(cls, HdspError)}
    assert len(replying) >= 35
    for name, (_, rest) in _drawn().items():
        words = rest.split()
        if name in replying and words and words[0] in codes:
            assert ours[name].code == words[0], f"{name}: drawn {words[0]}"
    # The three errors that had none (issue 34) answer as their callers did.
    for name in ("UnknownMode", "UnknownAgent", "RewindRefused"):
        assert ours[name].code is ErrorCode.INVALID_REQUEST


# The one place a code is chosen for what the daemon raised.
_TRANSLATORS = {Path("errors.py")}
# `code = ErrorCode.X`: a class naming its code, the one way a module may spell one.
_CLASS_CODE = re.compile(r"^    code(?:: [\w\[\]]+)? = ErrorCode\.[A-Z_]+$")


def test_no_module_but_the_translator_spells_a_wire_code() -> None:
    root = Path(hdsp.daemon.__file__).parent
    spelled = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root) in _TRANSLATORS:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "ErrorCode." in line and not _CLASS_CODE.match(line):
                spelled.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
            if re.search(r"\bCommandError\(", line):
                spelled.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert len(list(root.rglob("*.py"))) > 100
    assert not spelled, "raise a named error class instead:\n" + "\n".join(spelled)
