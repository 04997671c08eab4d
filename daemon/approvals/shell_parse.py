"""The shell grammar the approval rules read a command with: tree-sitter-bash
parses the string once, and a walk of its syntax tree collects every simple
command the shell may run (substitutions and bodies included, words resolved as
dash resolves them), what would keep it from being approved (hazards), and what
the parser cannot see into. :mod:`.commands` judges what this finds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

__all__ = [
    "MAX_COMMAND_CHARS",
    "CommandAnalysis",
    "SimpleCommand",
    "Word",
    "analyse",
]

#: Longer commands are not read (a person can read them).
MAX_COMMAND_CHARS = 64 * 1024


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

_DASH_QUOTES = "`$'...'` and `$\"...\"` mean something else to /bin/sh (dash)"
_NOT_DASH_TESTS = "`[[`/`((` are not /bin/sh (dash) syntax"
_HERESTRING = "`<<<` means something else to /bin/sh (dash)"
#: The named nodes that make a command more than a list of plain commands: the
#: hazard each is (for a deny list or an allow list to weigh), and for some
#: what of the command cannot be seen into.
_HAZARDS: dict[str, tuple[str, str | None]] = {
    "heredoc_redirect": ("it feeds a here-document to a command", None),
    "herestring_redirect": (_HERESTRING, _HERESTRING),
    "variable_assignment": ("it sets a shell variable", None),
    "variable_assignments": ("it sets a shell variable", None),
    "declaration_command": ("it sets or unsets shell variables", None),
    "unset_command": ("it sets or unsets shell variables", None),
    "subshell": ("it runs commands in a subshell", None),
    "compound_statement": ("it groups commands in braces", None),
    "function_definition": ("it defines a shell function", None),
    **dict.fromkeys(_CONTROL_FLOW, ("it uses shell control flow (if, for, while, case)", None)),
    "test_command": (_NOT_DASH_TESTS, _NOT_DASH_TESTS),
    "command_substitution": ("it runs a command substitution (`$(...)` or backticks)", None),
    "process_substitution": (
        "it uses process substitution (`<(...)`), which /bin/sh (dash) lacks",
        "process substitution means something else to /bin/sh (dash)",
    ),
    "arithmetic_expansion": ("it uses arithmetic expansion", None),
    "ansi_c_string": (_DASH_QUOTES, None),
    "translated_string": (_DASH_QUOTES, None),
    "brace_expression": ("it uses brace expansion, which /bin/sh (dash) lacks", None),
}


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
            walk.hazard(_DASH_QUOTES)
            walk.cannot_see("a lone `$` before a quote means something else to /bin/sh (dash)")
        return
    elif kind == "command":
        _command(node, walk)
    elif kind == "file_redirect":
        _redirect(node, walk)
    elif kind in _HAZARDS:
        hazard, unseen = _HAZARDS[kind]
        walk.hazard(hazard)
        if unseen is not None:
            walk.cannot_see(unseen)
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
