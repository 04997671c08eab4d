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
  (`env`, `xargs`, `sh -c`, `git -c`, `find -exec`, `sed e`, ... see `_risk`).
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
from functools import cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

__all__ = [
    "CommandAnalysis",
    "CommandJudgement",
    "Judgement",
    "SimpleCommand",
    "Word",
    "analyse",
    "judge_command",
]

#: Longer commands are not read (a person can read them).
MAX_COMMAND_CHARS = 64 * 1024
#: How deep `sh -c 'sh -c ...'`, wrappers of wrappers, and the like are followed.
_MAX_DEPTH = 8


# ---- words and simple commands -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Word:
    """One word of a command as the shell will see it."""

    #: The word after quote removal; None when an expansion decides it.
    value: str | None
    #: Unquoted `*`, `?` or `[`: pathname expansion may turn it into other words.
    glob: bool = False

    @property
    def literal(self) -> str | None:
        """The value when nothing at run time can change it."""
        return None if self.glob else self.value


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    words: tuple[Word, ...]
    #: Names assigned before the program (`PATH=/tmp ls`).
    assignments: tuple[str, ...] = ()

    @property
    def program(self) -> str | None:
        """The program name without its directory; None when expansion decides it."""
        if not self.words or (name := self.words[0].literal) is None:
            return None
        return name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class CommandAnalysis:
    """What `analyse` saw in one command string."""

    #: Every simple command the shell may run, substitutions and bodies included,
    #: as written (wrappers are not looked through here).
    commands: tuple[SimpleCommand, ...]
    #: Why the command is never approved automatically (first found first).
    hazards: tuple[str, ...]
    #: Parts the parser cannot see into: a denied program could hide there.
    unseen: tuple[str, ...]


@dataclass
class _Walk:
    commands: list[SimpleCommand] = field(default_factory=list)
    hazards: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)
    #: Byte offsets of `&>` operators, which dash reads as `&` then `>`.
    amp_redirects: list[int] = field(default_factory=list)

    def hazard(self, why: str) -> None:
        if why not in self.hazards:
            self.hazards.append(why)

    def cannot_see(self, why: str) -> None:
        if why not in self.unseen:
            self.unseen.append(why)


@cache
def _parser() -> Parser:
    return Parser(Language(tree_sitter_bash.language()))


def analyse(command: str) -> CommandAnalysis:
    """Parse `command` once and collect its simple commands and hazards."""
    walk = _Walk()
    if len(command) > MAX_COMMAND_CHARS:
        walk.cannot_see(f"it is longer than {MAX_COMMAND_CHARS} characters")
        return CommandAnalysis((), ("it is too long to check",), tuple(walk.unseen))
    if _CONTROL.search(command):
        # dash splits words on blanks and newlines only; a parser may not agree
        # on what other control or space characters mean.
        walk.hazard("it contains control characters or unusual spaces")
        if "\x00" in command:
            walk.cannot_see("it contains a NUL character")
    source = command.encode("utf-8", "surrogateescape")
    _walk_tree(source, walk)
    if walk.amp_redirects:
        # Also read it the way dash does: `ls &>/dev/null rm x` runs `rm x`.
        dash = bytearray(source)
        for offset in sorted(walk.amp_redirects, reverse=True):
            dash[offset + 1 : offset + 1] = b" "
        dash_walk = _Walk()
        _walk_tree(bytes(dash), dash_walk)
        walk.commands.extend(dash_walk.commands)
        for why in dash_walk.unseen:
            walk.cannot_see(why)
    return CommandAnalysis(tuple(walk.commands), tuple(walk.hazards), tuple(walk.unseen))


_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f\x85\xa0\u1680\u2000-\u200f\u2028-\u202f\u205f\u3000\ufeff]"
)


def _walk_tree(source: bytes, walk: _Walk) -> None:
    root = _parser().parse(source).root_node
    if root.has_error:
        walk.cannot_see("the shell parser cannot read all of it")
    _visit(root, walk, source)


#: Nodes that only hold words, names or operators: walked for what they contain.
_PLAIN = frozenset(
    {
        "program", "list", "pipeline", "negated_command", "command_name", "word",
        "string", "string_content", "raw_string", "concatenation", "number",
        "simple_expansion", "expansion", "variable_name", "special_variable_name",
        "subscript", "file_descriptor", "heredoc_start", "heredoc_content",
        "heredoc_end", "heredoc_body", "regex", "extglob_pattern", "test_operator",
        "binary_expression", "unary_expression", "ternary_expression",
        "parenthesized_expression", "postfix_expression", "array", "comment",
    }
)  # fmt: skip
#: Nodes whose `$` child is an expansion's own; elsewhere a lone `$` is suspect.
_DOLLAR_OWNERS = frozenset({"command", "command_name", "concatenation", "file_redirect"})
_CONTROL_FLOW = frozenset(
    {
        "if_statement", "elif_clause", "else_clause", "while_statement",
        "for_statement", "c_style_for_statement", "case_statement", "case_item",
        "do_group",
    }
)  # fmt: skip


def _visit(node: Node, walk: _Walk, source: bytes) -> None:
    kind = node.type
    if node.is_error or node.is_missing:
        walk.cannot_see("the shell parser cannot read all of it")
    elif not node.is_named:
        if kind == "&":
            walk.hazard("it runs a command in the background (`&`)")
        elif kind == "|&":
            walk.hazard("`|&` means something else to /bin/sh (dash)")
        elif kind == "$" and node.parent is not None and node.parent.type in _DOLLAR_OWNERS:
            # `$"..."` (bash's translated string) is `$` glued to a string for
            # dash; the parser splits it into two words.
            walk.hazard("`$'...'` and `$\"...\"` mean something else to /bin/sh (dash)")
            walk.cannot_see("a lone `$` before a quote means something else to /bin/sh (dash)")
        return
    elif kind == "command":
        _command(node, walk)
    elif kind == "file_redirect":
        _redirect(node, walk)
    elif kind == "heredoc_redirect":
        walk.hazard("it feeds a here-document to a command")
    elif kind == "herestring_redirect":
        walk.hazard("`<<<` means something else to /bin/sh (dash)")
        walk.cannot_see("`<<<` means something else to /bin/sh (dash)")
    elif kind in ("variable_assignment", "variable_assignments"):
        walk.hazard("it sets a shell variable")
    elif kind in ("declaration_command", "unset_command"):
        walk.hazard("it sets or unsets shell variables")
    elif kind == "subshell":
        walk.hazard("it runs commands in a subshell")
    elif kind == "compound_statement":
        walk.hazard("it groups commands in braces")
    elif kind == "function_definition":
        walk.hazard("it defines a shell function")
    elif kind in _CONTROL_FLOW:
        walk.hazard("it uses shell control flow (if, for, while, case)")
    elif kind == "test_command":
        walk.hazard("`[[`/`((` are not /bin/sh (dash) syntax")
        walk.cannot_see("`[[`/`((` are not /bin/sh (dash) syntax")
    elif kind == "command_substitution":
        walk.hazard("it runs a command substitution (`$(...)` or backticks)")
    elif kind == "process_substitution":
        walk.hazard("it uses process substitution (`<(...)`), which /bin/sh (dash) lacks")
        walk.cannot_see("process substitution means something else to /bin/sh (dash)")
    elif kind == "arithmetic_expansion":
        walk.hazard("it uses arithmetic expansion")
    elif kind in ("ansi_c_string", "translated_string"):
        walk.hazard("`$'...'` and `$\"...\"` mean something else to /bin/sh (dash)")
    elif kind == "brace_expression":
        walk.hazard("it uses brace expansion, which /bin/sh (dash) lacks")
    elif kind == "redirected_statement":
        pass  # its body and its redirects are visited below
    elif kind not in _PLAIN:
        walk.cannot_see(f"the shell parser found a {kind.replace('_', ' ')} it does not know")
    if (
        kind == "comment"
        and node.start_byte > 0
        and source[node.start_byte - 1] not in b" \t\n;&|()"
    ):
        walk.cannot_see("a `#` the parser reads as a comment may not be one to /bin/sh")
    for child in node.children:
        _visit(child, walk, source)


def _command(node: Node, walk: _Walk) -> None:
    words: list[Word] = []
    assignments: list[str] = []
    for child in node.named_children:
        if child.type == "variable_assignment":
            name = child.child_by_field_name("name")
            assignments.append(_text(name) if name is not None else "")
        elif child.type == "command_name":
            words.extend(_word(w) for w in child.named_children)
        elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
            continue
        else:
            words.append(_word(child))
    if assignments:
        walk.hazard(f"it sets {', '.join(assignments)} for the command it runs")
    if words:
        walk.commands.append(SimpleCommand(tuple(words), tuple(assignments)))


#: Operators of `file_redirect` that duplicate or close a descriptor.
_DUPLICATIONS = frozenset({">&", "<&", ">&-", "<&-"})


def _redirect(node: Node, walk: _Walk) -> None:
    operator = next((c.type for c in node.children if not c.is_named), "")
    targets = [c for c in node.named_children if c.type != "file_descriptor"]
    if operator in ("&>", "&>>"):
        walk.amp_redirects.append(next(c.start_byte for c in node.children if not c.is_named))
        walk.hazard("`&>` means something else to /bin/sh (dash): `&` then `>`")
        return
    if operator in _DUPLICATIONS and all(
        t.type == "number" or _word(t).literal == "-" for t in targets
    ):
        return
    if operator in (">", ">>", "<", "") and len(targets) == 1:
        if _word(targets[0]).literal == "/dev/null":
            return
    if operator == "<":
        walk.hazard("it redirects input from a file")
    else:
        walk.hazard("it redirects output to a file")


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


_DQ_ESCAPES = frozenset('$`"\\')


def _word(node: Node) -> Word:
    """The value of a word node, as dash would see it after quote removal."""
    kind = node.type
    if kind == "number":
        return Word(_text(node))
    if kind == "raw_string":
        return Word(_text(node)[1:-1])
    if kind == "word":
        return _unquoted(_text(node))
    if kind == "string":
        if any(c.type != "string_content" for c in node.named_children):
            return Word(None)
        return Word(_double_quoted(_text(node)[1:-1]))
    if kind == "concatenation":
        parts = [_word(c) for c in node.named_children]
        # The parser leaves some characters (`{`, `}` of `{}`) out of its parts.
        if any(p.value is None for p in parts) or not _covers(node):
            return Word(None)
        value = "".join(p.value or "" for p in parts)
        if _braced(value) and any(p.type == "word" for p in node.named_children):
            return Word(None)
        return Word(value, any(p.glob for p in parts))
    return Word(None)


def _covers(node: Node) -> bool:
    """Whether the named children of `node` span all of its text."""
    at = node.start_byte
    for child in node.children:
        if child.start_byte != at:
            return False
        at = child.end_byte
    return at == node.end_byte


def _unquoted(text: str) -> Word:
    if text.startswith("~"):
        return Word(None)  # tilde expansion
    out: list[str] = []
    glob = False
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt != "\n":
                out.append(nxt)
        else:
            glob = glob or ch in "*?["
            if ch in "$`":
                return Word(None)  # an expansion the parser kept inside the word
            out.append(ch)
    value = "".join(out)
    if _braced(text):
        return Word(None)
    return Word(value, glob)


def _braced(text: str) -> bool:
    """Whether bash might brace-expand it (dash has no brace expansion)."""
    return "{" in text and "}" in text and ("," in text or ".." in text)


def _double_quoted(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and (text[i + 1] in _DQ_ESCAPES or text[i + 1] == "\n"):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


# ---- looking through wrappers (for deny rules) ------------------------------------


@dataclass(frozen=True, slots=True)
class _Wrapper:
    """A program that runs the program named by its arguments."""

    #: Options whose value is the next word (when not attached).
    takes_value: frozenset[str] = frozenset()
    #: Words after the options that come before the program (timeout's duration).
    operands: int = 0
    #: `NAME=value` words before the program are assignments (env).
    assignments: bool = False


def _w(takes: str = "", operands: int = 0, assignments: bool = False) -> _Wrapper:
    return _Wrapper(frozenset(takes.split()), operands, assignments)


_WRAPPERS: dict[str, _Wrapper] = {
    "env": _w("-u --unset -C --chdir -S --split-string -P", assignments=True),
    "command": _w(),
    "builtin": _w(),
    "exec": _w("-a"),
    "nice": _w("-n --adjustment"),
    "nohup": _w(),
    "timeout": _w("-s --signal -k --kill-after", operands=1),
    "sudo": _w("-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt "
               "-r --role -t --type -U --other-user -T --command-timeout", assignments=True),
    "doas": _w("-u -C"),
    "runuser": _w("-u --user -g --group -G --supp-group"),
    "stdbuf": _w("-i --input -o --output -e --error"),
    "time": _w("-f --format -o --output"),
    "xargs": _w("-a --arg-file -d --delimiter -E -e --eof -I -i --replace -L -l "
                "--max-lines -n --max-args -P --max-procs -s --max-chars --process-slot-var"),
    "setsid": _w(),
    "chroot": _w("--userspec --groups", operands=1),
    "ionice": _w("-c --class -n --classdata -p --pid -P --pgid -u --uid"),
    "taskset": _w(operands=1),
    "chrt": _w(operands=1),
    "flock": _w("-w --timeout -E --conflict-exit-code", operands=1),
    "unbuffer": _w(),
    "fakeroot": _w("-l --lib --faked -s -i"),
    "strace": _w("-e -o -p -s -u -a -b -I -O -P -S -X"),
    "ltrace": _w("-e -o -p -s -u -a -n -A -D -F -S"),
    "busybox": _w(),
    "catchsegv": _w(),
    "unshare": _w(),
    "nsenter": _w("-t --target"),
}  # fmt: skip

#: Shells whose `-c` string is shell code, parsed like the command itself.
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish"})
#: A denied program with no further words that also means `find -delete`.
_DELETERS = frozenset({"rm", "unlink", "rmdir"})
#: git's global options whose value is the next word.
_GIT_VALUE_OPTIONS = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix",
     "--exec-path", "--attr-source", "--list-cmds"}
)  # fmt: skip


def _after_options(words: Sequence[Word], spec: _Wrapper) -> list[Word] | None:
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
    if program in _WRAPPERS:
        inner = _after_options(rest, _WRAPPERS[program])
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
    elif program in _SHELLS:
        _shell(program, rest, seen, depth)
    elif program in ("eval", "trap", "watch", "su"):
        _code_argument(program, rest, seen, depth)
    elif program == "alias":
        seen.cannot_see("an alias changes what later words run")
    elif program == "find":
        _find(rest, seen, depth)
    elif program == "git":
        _git(words, seen)
    if program in _INTERPRETERS or program in _AWK or program in ("sed", "git"):
        # Code in another language (or a git alias) is no shell a deny rule can read.
        if why := _risk(SimpleCommand(tuple(words))):
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


# ---- what an allowed program's arguments may do (for approvals) -------------------

_RUNS_CODE: dict[str, str] = {
    **{name: f"`{name}` runs another program" for name in _WRAPPERS},
    **{name: f"`{name}` runs shell code" for name in _SHELLS},
    "eval": "`eval` runs its arguments as shell code",
    "source": "`source` runs a file as shell code",
    ".": "`.` runs a file as shell code",
    "trap": "`trap` runs its argument as shell code",
    "alias": "`alias` changes what later commands run",
    "fc": "`fc` runs commands from history",
    "watch": "`watch` runs its arguments as shell code",
    "su": "`su` runs commands as another user",
    "parallel": "`parallel` runs other programs",
    "script": "`script` runs a shell",
    "systemd-run": "`systemd-run` runs another program",
    "ssh": "`ssh` runs commands on another machine",
}
#: Interpreters and the options that hand them code inline.
_INTERPRETERS: dict[str, str] = {
    "python": "c", "python3": "c", "python2": "c", "pypy": "c", "pypy3": "c",
    "perl": "eE", "ruby": "e", "node": "ep", "nodejs": "ep", "php": "r",
    "Rscript": "e", "lua": "e", "julia": "e", "deno": "", "bun": "e",
}  # fmt: skip
_INTERPRETER_LONG = ("--eval", "--print", "--command", "--exec")

#: git subcommands that are git's own (an unknown one may be an alias).
_GIT_BUILTINS = frozenset(
    """add am annotate apply archive blame branch bundle cat-file check-attr
    check-ignore check-mailmap check-ref-format checkout checkout-index cherry
    cherry-pick citool clean clone column commit commit-graph commit-tree count-objects
    describe diagnose diff diff-files diff-index diff-tree fast-export fast-import
    fetch fetch-pack fmt-merge-msg for-each-ref for-each-repo format-patch fsck gc
    get-tar-commit-id grep hash-object help index-pack init interpret-trailers log
    ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base
    merge-file merge-index merge-tree mktag mktree multi-pack-index mv name-rev notes
    pack-objects pack-refs patch-id prune prune-packed pull push range-diff read-tree
    rebase reflog remote repack replace request-pull rerere reset restore rev-list
    rev-parse revert rm shortlog show show-branch show-index show-ref sparse-checkout
    stash status stripspace switch symbolic-ref tag unpack-file unpack-objects
    update-index update-ref update-server-info var verify-commit verify-pack
    verify-tag version whatchanged worktree write-tree""".split()
)
#: git subcommands that run commands or helpers by design, or write git's config.
_GIT_RUNS_CODE = frozenset(
    """config submodule bisect filter-branch difftool mergetool daemon instaweb
    credential hook send-email upload-pack receive-pack shell for-each-repo
    maintenance""".split()
)
#: git arguments (any subcommand) that name a program to run or a file to write.
_GIT_RISKY_ARGS = ("--exec", "--upload-pack", "--receive-pack", "--output", "--template",
                   "--config", "--extcmd", "--open-files-in-pager", "--tool")  # fmt: skip
_GIT_REMOTE = frozenset({"clone", "fetch", "pull", "ls-remote", "archive"})
_GIT_SAFE_GLOBALS = frozenset(
    {"--no-pager", "-P", "--bare", "--literal-pathspecs", "--glob-pathspecs",
     "--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects",
     "--no-optional-locks", "--no-advice", "--version", "--help", "-h"}
)  # fmt: skip

_FIND_RISKY = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
_AWK = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
_AWK_RISKY = re.compile(r"system|getline|[|>]|@|ENVIRON|PROCINFO")
#: Directories whose programs may be named by path (`/usr/bin/ls` is `ls`).
_SYSTEM_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})


def _risk(command: SimpleCommand) -> str | None:
    """Why an allowed prefix does not make this command safe; None if it does."""
    name = command.words[0].literal or ""
    if "/" in name and name.rsplit("/", 1)[0] not in _SYSTEM_DIRS:
        return f"it runs {name!r} by a path outside the system directories"
    program = command.program or ""
    if program in _RUNS_CODE:
        return _RUNS_CODE[program]
    args = [w.literal for w in command.words[1:]]
    checked = program in _INTERPRETERS or program in _AWK or program in ("git", "find", "sed")
    if checked and any(a is None for a in args):
        return f"an expansion or glob decides the arguments of `{program}`"
    values = [a or "" for a in args]
    if program in _INTERPRETERS:
        return _interpreter_risk(program, values)
    if program == "git":
        return _git_risk(values)
    if program == "find":
        if risky := next((a for a in values if a in _FIND_RISKY), None):
            return f"`find {risky}` runs commands, deletes or writes files"
    if program in _AWK:
        return _awk_risk(program, values)
    if program == "sed":
        return _sed_risk(values)
    return None


def _interpreter_risk(program: str, args: list[str]) -> str | None:
    letters = _INTERPRETERS[program]
    for arg in args:
        if arg.startswith(_INTERPRETER_LONG) or (
            letters and arg.startswith("-") and not arg.startswith("--")
            and any(ch in letters for ch in arg[1:])
        ):  # fmt: skip
            return f"`{program} {arg}` runs code given on the command line"
        if arg == "-":
            break
        if not arg.startswith("-"):
            return None  # a script (or `-m module`'s module) to run
    return f"`{program}` runs code it reads from its input"


def _git_risk(args: list[str]) -> str | None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        option = args[i]
        if option not in _GIT_SAFE_GLOBALS:
            return f"`git {option}` changes how or where git runs (it can run any command)"
        i += 1
    if i == len(args):
        return None
    sub, rest = args[i], args[i + 1 :]
    if sub not in _GIT_BUILTINS:
        return f"`git {sub}` is not a git command (it may be an alias that runs anything)"
    if sub in _GIT_RUNS_CODE:
        return f"`git {sub}` can run commands or change git's configuration"
    for arg in rest:
        if arg.startswith(_GIT_RISKY_ARGS):
            return f"`git {sub} {arg}` runs a program or writes a file"
        if sub in _GIT_REMOTE and (arg == "-u" or arg.startswith("-u")):
            return f"`git {sub} -u` runs a program"
        if sub == "rebase" and (arg in ("-x", "-i") or arg.startswith(("-x", "--interactive"))):
            return "`git rebase -x/-i` runs commands"
        if sub in ("archive", "format-patch", "bundle") and arg.startswith("-o"):
            return f"`git {sub} {arg}` writes a file"
        if sub == "grep" and arg.startswith("-O"):
            return "`git grep -O` runs a program"
        if sub in ("clone", "submodule") and arg.startswith("-c"):
            return f"`git {sub} -c` sets configuration that can run commands"
    return None


def _awk_risk(program: str, args: list[str]) -> str | None:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        option = args[i]
        if option in ("-F", "-v"):
            i += 2
        elif option.startswith(("-F", "-v")) and len(option) > 2:
            i += 1
        else:
            return f"`{program} {option}` is not an option known to be safe"
    if i < len(args) and args[i] == "--":
        i += 1
    if i >= len(args):
        return f"`{program}` has no program text"
    if _AWK_RISKY.search(args[i]):
        return f"the `{program}` program may run commands or write files (system, |, >, getline)"
    return None


_SED_SIMPLE = frozenset("pdDnNgGhHxlqQ=z{}")
_SED_S_FLAGS = frozenset("gpiImM0123456789")


def _sed_risk(args: list[str]) -> str | None:
    scripts: list[str] = []
    i = 0
    positional = False
    while i < len(args):
        arg = args[i]
        if arg in ("-e", "--expression"):
            if i + 1 < len(args):
                scripts.append(args[i + 1])
            i += 2
            positional = True
            continue
        if arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
            positional = True
        elif arg.startswith(("-i", "--in-place", "-f", "--file")) or arg.startswith("-e"):
            return "`sed` with `-i`, `-f` or joined options edits files or reads a script"
        elif arg in (
            "-n",
            "--quiet",
            "--silent",
            "-E",
            "-r",
            "--regexp-extended",
            "-z",
            "-u",
            "--posix",
            "-s",
            "--separate",
            "--debug",
            "--sandbox",
            "--",
        ):
            pass
        elif arg.startswith("-") and len(arg) > 1:
            return f"`sed {arg}` is not an option known to be safe"
        elif not positional:
            scripts.append(arg)
            positional = True
        i += 1
    for script in scripts:
        if not _sed_script_is_safe(script):
            return "the `sed` script may run commands or write files (`e`, `w`, `r`)"
    return None


def _sed_script_is_safe(script: str) -> bool:
    """Whether a sed script only prints, deletes and substitutes (no `e`, `w`, `r`)."""
    i, n = 0, len(script)

    def delimited(at: int, parts: int) -> int:
        """Index after `parts` fields delimited by script[at]; -1 when unterminated."""
        if at >= n or script[at] in "\\\n":
            return -1
        delim = script[at]
        at += 1
        for _ in range(parts):
            while at < n and script[at] != delim:
                at += 2 if script[at] == "\\" else 1
            if at >= n:
                return -1
            at += 1
        return at

    while i < n:
        ch = script[i]
        if ch in " \t\n;":
            i += 1
            continue
        # an address: a number, `$`, or /regex/, optionally a range and `!`
        while i < n and (script[i].isdigit() or script[i] in "$,~!+ "):
            i += 1
        if i < n and script[i] == "/":
            i = delimited(i, 1)
            if i < 0:
                return False
            continue
        if i < n and script[i] == "\\":
            i = delimited(i + 1, 1)
            if i < 0:
                return False
            continue
        if i >= n:
            return True
        ch = script[i]
        if ch in _SED_SIMPLE:
            i += 1
            while i < n and script[i].isdigit():
                i += 1
        elif ch == "s":
            i = delimited(i + 1, 2)
            if i < 0:
                return False
            while i < n and script[i] not in ";\n}" and script[i] not in " \t":
                if script[i] not in _SED_S_FLAGS:
                    return False
                i += 1
        elif ch == "y":
            i = delimited(i + 1, 2)
            if i < 0:
                return False
        else:
            return False
    return True


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
        if simple.program in _RUNS_CODE:
            return CommandJudgement(Judgement.UNDECIDED, f"not auto-approved: {_risk(simple)}")
        match = next((raw for raw, words in allow if _matches(words, simple.words)), None)
        if match is None:
            shown = " ".join(w.value if w.value is not None else "…" for w in simple.words[:3])
            return CommandJudgement(
                Judgement.UNDECIDED,
                f"not auto-approved: {shown!r} matches no allowed command prefix",
            )
        if why := _risk(simple):
            return CommandJudgement(Judgement.UNDECIDED, f"not auto-approved: {why}")
        if match not in used:
            used.append(match)
    return CommandJudgement(
        Judgement.ALLOWED, "allowed command prefix " + ", ".join(repr(u) for u in used)
    )
