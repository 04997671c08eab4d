"""What a shell command runs, read with a real shell grammar, and whether the
user's allowed and denied command prefixes let it run without asking.

`execute_command` hands its string to `/bin/sh -c`, which here is dash. A check
on the string (a prefix, a regex) cannot see what dash will do with it: `ls
&>/dev/null touch pwn` starts with `ls` and runs `touch`; `\\rm`, `/bin/rm`,
`r''m` and `env rm` are all `rm`. So the command is parsed once into a syntax
tree and judged on that:

* **Parser: tree-sitter with tree-sitter-bash.** Both are MIT licensed (bashlex,
  the other candidate, is GPLv3, which this MIT project cannot ship), keep up
  with bash's grammar (bashlex has no `case`, arithmetic or several redirect
  forms), parse in C in microseconds, and never raise: an unreadable part
  becomes an ERROR node, which we can see and treat as "cannot tell". The
  grammar is bash's; where dash would read a construct differently (`&>`, `|&`,
  `$'..'`, `[[`, `<(..)`, `<<<`) the command is never approved, and for deny
  rules `&>` is also read the way dash reads it (`&` then `>`).

* **Approve** only when every simple command anywhere in the tree matches an
  allowed prefix as whole words of its *resolved* argv (quotes and backslashes
  removed, the program's directory dropped), and nothing else can run or be
  written: no redirection except fd duplications (`2>&1`) and writes to
  `/dev/null`, no command or process substitution, no arithmetic, no heredoc,
  no background `&`, no variable assignment of any kind, no subshell, group,
  function or control flow, no expansion or glob in a program name, no
  relative program path, and no program whose own arguments can run code
  (`env`, `xargs`, `sh -c`, `git -c`, `find -exec`, `sed e`, ... see
  `command_risks`).
  A pipeline or `;`/`&&`/`||` list of allowed commands is approved.

* **Deny** when a denied prefix matches any simple command anywhere: inside
  substitutions, subshells, functions, pipelines, the string of `sh -c`,
  `eval` and `trap`, and behind wrappers (`env`, `command`, `exec`, `nice`,
  `nohup`, `timeout`, `sudo`, `xargs`, `find -exec`, `stdbuf`, `time`, ...),
  whose own options are skipped. `git`'s global options are skipped too, so
  `git -C . push` is `git push`. A denied `rm` (`unlink`, `rmdir`) with no
  further words also denies `find -delete`.

* **Unseen**: what the parser cannot see through (a parse error, an unknown
  node, a program name made by expansion, `eval "$x"`, a shell reading its
  input, `git -c`, an alias) is neither approved nor denied: with a deny list
  it asks, since a denied program might hide there.

Comments are not executed: a `#` that starts a word (after a blank or at the
start) is a comment to dash and to the parser alike; one the parser reads as a
comment anywhere else makes the command unseen.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .command_risks import AWK, INTERPRETERS, RUNS_CODE, SHELLS, WRAPPERS, Wrapper, risk
from .shell_parse import CommandAnalysis, SimpleCommand, Word, analyse

__all__ = [
    "CommandAnalysis",
    "CommandJudgement",
    "Judgement",
    "SimpleCommand",
    "Word",
    "analyse",
    "judge_command",
]

#: How deep `sh -c 'sh -c ...'`, wrappers of wrappers, and the like are followed.
_MAX_DEPTH = 8


# ---- looking through wrappers (for deny rules) ------------------------------------

#: A denied program with no further words that also means `find -delete`.
_DELETERS = frozenset({"rm", "unlink", "rmdir"})
#: git's global options whose value is the next word.
_GIT_VALUE_OPTIONS = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix",
     "--exec-path", "--attr-source", "--list-cmds"}
)  # fmt: skip


def _after_options(words: Sequence[Word], spec: Wrapper) -> list[Word] | None:
    """The words of the program `spec`'s wrapper runs; None when an expansion hides
    where it starts."""
    i = 0
    operands = spec.operands
    while i < len(words):
        value = words[i].literal
        if value is None:
            return None
        if value == "--":
            i += 1
            break
        if value.startswith("-") and len(value) > 1:
            name = value.split("=", 1)[0]
            if name in spec.takes_value and "=" not in value:
                i += 2
                continue
            if value[:2] in spec.takes_value and not value.startswith("--") and len(value) > 2:
                i += 1  # `-n5`
                continue
            i += 1
            continue
        if spec.assignments and "=" in value and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", value):
            i += 1
            continue
        if operands:
            operands -= 1
            i += 1
            continue
        break
    while operands and i < len(words):
        operands -= 1
        i += 1
    return list(words[i:])


@dataclass
class _Seen:
    """Every argv a deny rule is matched against, and what could not be seen."""

    argvs: list[tuple[tuple[Word, ...], str]] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)

    def add(self, words: Sequence[Word], how: str) -> None:
        self.argvs.append((tuple(words), how))

    def cannot_see(self, why: str) -> None:
        if why not in self.unseen:
            self.unseen.append(why)


def _collect(analysis: CommandAnalysis, seen: _Seen, depth: int) -> None:
    for why in analysis.unseen:
        seen.cannot_see(why)
    for command in analysis.commands:
        _look_through(list(command.words), seen, depth, "")
        for name in command.assignments:
            if name in _RUNTIME_VARIABLES or name.startswith(("LD_", "DYLD_", "GIT_")):
                seen.cannot_see(f"{name}= changes what the command runs")


#: Variables that change which program runs or what a shell runs first.
_RUNTIME_VARIABLES = frozenset(
    {"PATH", "BASH_ENV", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
     "CDPATH", "PYTHONPATH", "PYTHONSTARTUP", "PERL5OPT", "PERL5LIB", "RUBYOPT",
     "NODE_OPTIONS", "EDITOR", "VISUAL", "PAGER"}
)  # fmt: skip


def _look_through(words: list[Word], seen: _Seen, depth: int, how: str) -> None:
    if not words:
        return
    if depth > _MAX_DEPTH:
        seen.cannot_see("it nests wrappers or shells too deeply to follow")
        return
    program = SimpleCommand(tuple(words)).program
    if program is None:
        seen.cannot_see("a program name is made by expansion or a glob")
        return
    seen.add(words, how)
    rest = words[1:]
    values = [w.literal for w in rest]
    if program in WRAPPERS:
        inner = _after_options(rest, WRAPPERS[program])
        if inner is None:
            seen.cannot_see(f"an expansion hides what `{program}` runs")
        elif program == "env" and any(
            v in ("-S", "--split-string") or (v or "").startswith(("-S", "--split-string"))
            for v in values
        ):
            seen.cannot_see("`env -S` splits a string into the command it runs")
        elif not inner and program in ("sudo", "doas", "runuser"):
            seen.cannot_see(f"`{program}` may run a shell that reads its input")
        else:
            _look_through(inner, seen, depth + 1, f"`{program}` runs it")
    elif program in SHELLS:
        _shell(program, rest, seen, depth)
    elif program in ("eval", "trap", "watch", "su"):
        _code_argument(program, rest, seen, depth)
    elif program == "alias":
        seen.cannot_see("an alias changes what later words run")
    elif program == "find":
        _find(rest, seen, depth)
    elif program == "git":
        _git(words, seen)
    if program in INTERPRETERS or program in AWK or program in ("sed", "git"):
        # Code in another language (or a git alias) is no shell a deny rule can read.
        if why := risk(SimpleCommand(tuple(words))):
            seen.cannot_see(why)


def _shell(program: str, rest: list[Word], seen: _Seen, depth: int) -> None:
    for i, word in enumerate(rest):
        value = word.literal
        if value is None:
            seen.cannot_see(f"an expansion hides what `{program}` runs")
            return
        if value.startswith("-") and not value.startswith("--") and "c" in value[1:]:
            if i + 1 >= len(rest) or (code := rest[i + 1].literal) is None:
                seen.cannot_see(f"an expansion hides the code `{program} -c` runs")
                return
            _collect(analyse(code), seen, depth + 1)
            return
        if value.startswith("-") or value.startswith("+"):
            continue
        return  # a script file: as opaque as any program
    seen.cannot_see(f"`{program}` runs the commands it reads from its input")


def _code_argument(program: str, rest: list[Word], seen: _Seen, depth: int) -> None:
    values = [w.literal for w in rest]
    if program == "su":
        if "-c" not in values and "--command" not in values:
            _shell("sh", [], seen, depth)  # su with no -c reads its input
            return
        i = values.index("-c") if "-c" in values else values.index("--command")
        code_words = rest[i + 1 : i + 2]
    elif program == "trap":
        code_words = rest[:1]
    elif program == "watch":
        code_words = [w for w in rest if not (w.literal or "").startswith("-")]
    else:
        code_words = rest
    if any(w.literal is None for w in code_words):
        seen.cannot_see(f"an expansion hides the code `{program}` runs")
        return
    _collect(analyse(" ".join(w.literal or "" for w in code_words)), seen, depth + 1)


_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _find(rest: list[Word], seen: _Seen, depth: int) -> None:
    i = 0
    while i < len(rest):
        value = rest[i].literal
        if value in _FIND_RUNS:
            end = i + 1
            while end < len(rest) and rest[end].literal not in (";", "+"):
                end += 1
            _look_through(rest[i + 1 : end], seen, depth + 1, f"`find {value}` runs it")
            i = end
        elif value == "-delete":
            for deleter in sorted(_DELETERS):
                seen.add((Word(deleter),), "`find -delete` deletes files")
        i += 1


def _git(words: list[Word], seen: _Seen) -> None:
    """Add `git SUBCOMMAND ...` without git's global options (`git -C . push`)."""
    i = 1
    while i < len(words):
        value = words[i].literal
        if value is None:
            return
        if not value.startswith("-"):
            break
        name = value.split("=", 1)[0]
        if name in ("-c", "--config-env") or (name == "--exec-path" and "=" in value):
            seen.cannot_see(f"`git {name}` can make git run any command")
        i += 2 if name in _GIT_VALUE_OPTIONS and "=" not in value and name != "--exec-path" else 1
    if i > 1:
        seen.add([words[0], *words[i:]], "")


# ---- the judgement ---------------------------------------------------------------


class Judgement(enum.Enum):
    #: Every command matches an allowed prefix and nothing else can run.
    ALLOWED = "allowed"
    #: A denied prefix matches a command it runs.
    DENIED = "denied"
    #: A deny list applies and part of the command cannot be seen into: ask.
    UNSEEN = "unseen"
    #: No rule decides (the reason says why an allowed prefix was not enough).
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class CommandJudgement:
    judgement: Judgement
    #: Why, for the model (a denial) and for the person asked.
    reason: str = ""


def _prefixes(raw: Sequence[str]) -> list[tuple[str, list[str]]]:
    out = []
    for prefix in raw:
        words = prefix.split()
        if words:
            words[0] = words[0].rsplit("/", 1)[-1] if words[0] != "/" else words[0]
            out.append((prefix, words))
    return out


def _matches(words: Sequence[str], argv: Sequence[Word]) -> bool | None:
    """Whether `argv` starts with `words` (the program by name); None: expansion hides it."""
    program = SimpleCommand(tuple(argv)).program
    if program is None:
        return None
    if program != words[0]:
        return False
    if len(argv) < len(words):
        # Too short to match, unless an expansion splits into more words.
        return None if any(w.literal is None for w in argv[1:]) else False
    for want, word in zip(words[1:], argv[1:], strict=False):
        if word.literal is None:
            return None
        if word.literal != want:
            return False
    return True


def judge_command(command: str, allowed: Sequence[str], denied: Sequence[str]) -> CommandJudgement:
    """Judge `command` against allowed and denied prefixes (see the module docstring)."""
    analysis = analyse(command)
    deny = _prefixes(denied)
    if deny:
        seen = _Seen()
        _collect(analysis, seen, 0)
        hidden: str | None = None
        for raw, words in deny:
            for argv, how in seen.argvs:
                found = _matches(words, argv)
                if found:
                    via = f" ({how})" if how else ""
                    return CommandJudgement(
                        Judgement.DENIED,
                        f"the command runs {raw!r}{via}, which matches the denied prefix "
                        f"{raw!r} (the user's denied_commands); do not try to get around it.",
                    )
                if found is None and hidden is None:
                    hidden = f"an expansion may make it run the denied {raw!r}"
        if seen.unseen or hidden:
            why = seen.unseen[0] if seen.unseen else hidden
            return CommandJudgement(
                Judgement.UNSEEN,
                f"a person must check it against the denied commands: {why}",
            )
    allow = _prefixes(allowed)
    if not allow:
        return CommandJudgement(Judgement.UNDECIDED)
    if any(words == ["*"] for _, words in allow):
        return CommandJudgement(Judgement.ALLOWED, "every command is allowed ('*')")
    if analysis.unseen:
        return CommandJudgement(Judgement.UNDECIDED, f"not auto-approved: {analysis.unseen[0]}")
    if analysis.hazards:
        return CommandJudgement(Judgement.UNDECIDED, f"not auto-approved: {analysis.hazards[0]}")
    if not analysis.commands:
        return CommandJudgement(Judgement.UNDECIDED, "not auto-approved: it runs no command")
    used: list[str] = []
    for simple in analysis.commands:
        if simple.program in RUNS_CODE:
            return CommandJudgement(Judgement.UNDECIDED, f"not auto-approved: {risk(simple)}")
        match = next((raw for raw, words in allow if _matches(words, simple.words)), None)
        if match is None:
            shown = " ".join(w.value if w.value is not None else "…" for w in simple.words[:3])
            return CommandJudgement(
                Judgement.UNDECIDED,
                f"not auto-approved: {shown!r} matches no allowed command prefix",
            )
        if why := risk(simple):
            return CommandJudgement(Judgement.UNDECIDED, f"not auto-approved: {why}")
        if match not in used:
            used.append(match)
    return CommandJudgement(
        Judgement.ALLOWED, "allowed command prefix " + ", ".join(repr(u) for u in used)
    )
