"""What a program's own arguments can make it do: the tables of wrappers (programs
that run the program their arguments name), shells and interpreters, and the
checks that say why an allowed prefix does not make a command safe (`git -c`,
`find -exec`, `sed e`, `awk` with `system`, ...). :mod:`.commands` looks through
the wrappers for deny rules and asks `risk` before approving.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .shell_parse import SimpleCommand

__all__ = [
    "AWK",
    "INTERPRETERS",
    "RUNS_CODE",
    "SHELLS",
    "WRAPPERS",
    "Wrapper",
    "risk",
]


# ---- wrappers and shells ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Wrapper:
    """A program that runs the program named by its arguments."""

    #: Options whose value is the next word (when not attached).
    takes_value: frozenset[str] = frozenset()
    #: Words after the options that come before the program (timeout's duration).
    operands: int = 0
    #: `NAME=value` words before the program are assignments (env).
    assignments: bool = False


def _w(takes: str = "", operands: int = 0, assignments: bool = False) -> Wrapper:
    return Wrapper(frozenset(takes.split()), operands, assignments)


WRAPPERS: dict[str, Wrapper] = {
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
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish"})


# ---- what an allowed program's arguments may do (for approvals) -------------------

RUNS_CODE: dict[str, str] = {
    **{name: f"`{name}` runs another program" for name in WRAPPERS},
    **{name: f"`{name}` runs shell code" for name in SHELLS},
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
INTERPRETERS: dict[str, str] = {
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
AWK = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
_AWK_RISKY = re.compile(r"system|getline|[|>]|@|ENVIRON|PROCINFO")
#: Directories whose programs may be named by path (`/usr/bin/ls` is `ls`).
_SYSTEM_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})


def risk(command: SimpleCommand) -> str | None:
    """Why an allowed prefix does not make this command safe; None if it does."""
    name = command.words[0].literal or ""
    if "/" in name and name.rsplit("/", 1)[0] not in _SYSTEM_DIRS:
        return f"it runs {name!r} by a path outside the system directories"
    program = command.program or ""
    if program in RUNS_CODE:
        return RUNS_CODE[program]
    args = [w.literal for w in command.words[1:]]
    checked = program in INTERPRETERS or program in AWK or program in ("git", "find", "sed")
    if checked and any(a is None for a in args):
        return f"an expansion or glob decides the arguments of `{program}`"
    values = [a or "" for a in args]
    if program in INTERPRETERS:
        return _interpreter_risk(program, values)
    if program == "git":
        return _git_risk(values)
    if program == "find":
        if risky := next((a for a in values if a in _FIND_RISKY), None):
            return f"`find {risky}` runs commands, deletes or writes files"
    if program in AWK:
        return _awk_risk(program, values)
    if program == "sed":
        return _sed_risk(values)
    return None


def _interpreter_risk(program: str, args: list[str]) -> str | None:
    letters = INTERPRETERS[program]
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
