"""Shell commands judged on their parse (approvals/commands.py): bypass attempts
of string prefixes never come out approved, denied programs are found however
they are spelled or wrapped, and plain allowed commands still run unasked."""

from __future__ import annotations

import time

import pytest

from hdsp.daemon.approvals import Decision, command_decision
from hdsp.daemon.approvals.commands import analyse

ALLOWED = ["ls", "git status", "echo", "cat", "find", "git", "grep", "sed", "awk", "python"]
DENIED = ["rm", "git push"]

#: Each must ask or be denied, never approved; with `rm` and `git push` denied.
BYPASSES = [
    # dash reads `&>` as `&` then `>`: `touch pwn` runs (the original finding).
    "ls &>/dev/null touch pwn",
    "ls &>>log",
    "ls >| clobbered",
    "ls >> appended",
    "ls <> rw",
    "ls 2>errors",
    "ls >&file",
    "ls > /outside/x",
    "echo > .hdspignore",
    "echo hi >.git/config",
    "cat < secret.env",
    "cat <<EOF\n$(touch pwn)\nEOF",
    "cat <<'EOF'\nhi\nEOF",
    "cat <<< word",
    "ls $(touch pwn)",
    "ls `touch pwn`",
    'echo "$(touch pwn)"',
    "echo ${x:-$(touch pwn)}",
    "cat <(touch pwn)",
    "ls >(touch pwn)",
    "ls; touch pwn",
    "ls && touch pwn",
    "ls || touch pwn",
    "ls | touch pwn",
    "ls & touch pwn",
    "ls &",
    "ls\ntouch pwn",
    "ls |& touch pwn",
    "\\rm x",
    "/bin/rm x",
    '"rm" x',
    "r''m x",
    'r"m" -rf /',
    "env rm x",
    "env -i rm x",
    "env FOO=1 ls",
    "command rm x",
    "exec rm x",
    "xargs rm",
    "echo x | xargs rm",
    "nice rm x",
    "nice -n 5 rm x",
    "nohup ls",
    "timeout 5 rm x",
    "timeout -s KILL 5 ls",
    "sudo ls",
    "stdbuf -o0 ls",
    "time ls",
    "builtin echo hi",
    "find . -delete",
    "find . -exec rm {} \\;",
    "find . -execdir sh -c 'touch pwn' \\;",
    "find . -ok ls \\;",
    "find . -fprint /outside/x",
    "sh -c 'rm x'",
    "sh -c 'ls'",
    "bash -c 'touch pwn'",
    "echo touch pwn | sh",
    "eval touch pwn",
    "eval 'rm x'",
    "source ./x.sh",
    ". ./x.sh",
    "f() { touch pwn; }; f",
    "ls() { touch pwn; }; ls",
    "PATH=/tmp ls",
    "LD_PRELOAD=/tmp/x.so ls",
    "IFS=/ ls",
    "BASH_ENV=/tmp/x ls",
    "LC_ALL=C ls",
    "x=1",
    "export PATH=/tmp",
    "${x}",
    "$x",
    "$x -la",
    "/bin/r? x",
    "/bin/l* x",
    "{ls,-la}",
    "find {.,-delete}",
    "find . -de\\lete",
    "ls $(rm x)",
    "git -c alias.x='!sh -c id' x",
    "git -c core.fsmonitor='touch pwn' status",
    "git --config-env=core.pager=X log",
    "git --exec-path=/tmp status",
    "git --exec-path /tmp status",
    "git x",
    "git config alias.x '!touch pwn'",
    "git -C /elsewhere status",
    "git log --output=/outside/x",
    "git archive -o /outside/x HEAD",
    "git clone -u 'touch pwn' repo",
    "git grep -Otouch pwn",
    "git rebase -x 'touch pwn' main",
    "git submodule foreach 'touch pwn'",
    "git -C . push origin main",
    "ls -la; rm -rf /",
    "(rm x)",
    "(touch pwn)",
    "{ rm x; }",
    "{ ls; }",
    "if true; then touch pwn; fi",
    "for f in a; do touch $f; done",
    "while false; do ls; done",
    "case x in x) touch pwn;; esac",
    "echo $((1+2))",
    "((x=1))",
    "((rm x))",
    "[[ -f x ]]",
    "echo $'\\x41'",
    'echo $"hello"',
    "l\u0455",  # a Cyrillic dze: no program named ls
    "ls\u00a0-la",
    "ls\r\ntouch pwn",
    "ls " + "a " * 40000,
    "ls 'unterminated",
    "ls (",
    "ls # ok\ntouch pwn",
    "ls x#$(touch pwn)",
    "awk 'BEGIN{system(\"touch pwn\")}'",
    "awk '{print > \"/outside/x\"}' f",
    "awk -f prog.awk f",
    "sed -n '1e touch pwn' f",
    "sed 's/x/touch pwn/e' f",
    "sed 'w /outside/x' f",
    "sed -i s/a/b/ f",
    "python -c 'import os'",
    "echo 'import os' | python",
    "./ls",
    "sub/ls",
    "/tmp/ls",
    "alias ls=touch",
    "trap 'touch pwn' EXIT",
    "! touch pwn",
    "cat a.txt | touch pwn",
    "watch ls",
    "a=(1 2)",
]


@pytest.mark.parametrize("command", BYPASSES)
def test_bypass_attempts_are_never_approved(command: str) -> None:
    decision, reason = command_decision(command, ALLOWED, DENIED)
    assert decision is not Decision.APPROVE, reason
    assert decision is Decision.DENY or reason, "an ask must say why"
    # Without a deny list nothing can be denied, and nothing is approved either.
    decision, reason = command_decision(command, ALLOWED, [])
    assert decision is None, reason
    assert reason


def test_there_are_enough_bypass_attempts() -> None:
    assert len(BYPASSES) >= 60


#: Spelled, wrapped or hidden: each runs `rm` (or `git push`) and is denied.
DENIED_SPELLINGS = [
    "rm x",
    "\\rm x",
    "/bin/rm x",
    "/usr/bin/rm -rf x",
    '"rm" x',
    "'rm' x",
    "r''m x",
    'r"m" x',
    "r\\m x",
    "env rm x",
    "env -i FOO=1 rm x",
    "env -u HOME -- rm x",
    "command rm x",
    "command -p rm x",
    "exec rm x",
    "builtin exec rm x",
    "xargs rm",
    "xargs -n 1 -I{} rm {}",
    "nice rm x",
    "nice -n 5 rm x",
    "nice -n5 rm x",
    "nohup rm x",
    "timeout 5 rm x",
    "timeout -k 1 -s KILL 5s rm x",
    "sudo rm x",
    "sudo -u root -E rm x",
    "stdbuf -o0 rm x",
    "time rm x",
    "time nice env rm x",
    "find . -delete",
    "find . -name '*.tmp' -delete",
    "find . -exec rm {} \\;",
    "find . -exec /bin/rm -f {} +",
    "find . -execdir env rm {} \\;",
    "sh -c 'rm x'",
    "bash -c 'ls; rm x'",
    "bash -lc 'rm x'",
    "sh -c 'sh -c \"rm x\"'",
    "eval rm x",
    "eval 'ls; rm x'",
    "trap 'rm x' EXIT",
    "ls $(rm x)",
    "ls `rm x`",
    'echo "$(rm x)"',
    "cat <(rm x)",
    "cat <<EOF\n$(rm x)\nEOF",
    "x=$(rm x)",
    "ls -la; rm -rf /",
    "ls && rm x",
    "ls || rm x",
    "ls | rm x",
    "ls & rm x",
    "ls\nrm x",
    "(rm x)",
    "{ rm x; }",
    "f() { rm x; }",
    "if true; then rm x; fi",
    "for f in a; do rm $f; done",
    "case x in x) rm x;; esac",
    "! rm x",
    "ls &>/dev/null rm x",
    "ls |& rm x",
    "git push",
    "git push --force origin main",
    "git -C . push",
    "git --no-pager -c x=y push",
    "env git push",
    "FORCE=1 git push",
]


@pytest.mark.parametrize("command", DENIED_SPELLINGS)
def test_denied_programs_are_found_however_spelled(command: str) -> None:
    decision, reason = command_decision(command, ["*"], DENIED)
    assert decision is Decision.DENY, reason
    assert "denied" in reason and ("'rm'" in reason or "'git push'" in reason)


#: A deny list applies, but the parser cannot see what runs: a person is asked.
UNSEEN = [
    "$x",
    "${x} -rf /",
    "/bin/r? x",
    "$(echo rm) x",
    'eval "$cmd"',
    'sh -c "$cmd"',
    "echo rm x | sh",
    "echo rm x | sudo -s",
    "bash < script",
    "xargs $x",
    "env $x",
    "git -c alias.x='!rm -rf /' x",
    "alias l=ls",
    "PATH=/tmp ls",
    "((rm x))",
    "python -c 'import os; os.remove(\"x\")'",
    "perl -e 'unlink \"x\"'",
    "awk 'BEGIN{system(\"rm x\")}'",
    "sed 's/x/rm x/e' f",
    "git config alias.x '!rm -rf .' && git x",
    "ls 'unterminated",
    "ls " + "a " * 40000,
    "rm$IFS" + "x",
    "ls x#$(rm x)",
]


@pytest.mark.parametrize("command", UNSEEN)
def test_what_cannot_be_seen_asks_when_a_deny_list_applies(command: str) -> None:
    decision, reason = command_decision(command, ["*"], DENIED)
    assert decision in (Decision.ASK, Decision.DENY), reason
    assert reason
    # Everything allowed and nothing denied: the user's '*' approves it.
    assert command_decision(command, ["*"], [])[0] is Decision.APPROVE


APPROVED = [
    ("ls", ["ls"]),
    ("ls -la", ["ls"]),
    ("/usr/bin/ls -la", ["ls"]),
    ("'ls' -la", ["ls"]),
    ("git status", ["git status"]),
    ("git   status --short", ["git status"]),
    ("git --no-pager log --oneline -5", ["git"]),
    ("git diff HEAD~1 -- src", ["git"]),
    ("cat a.txt | grep x", ["cat", "grep"]),
    ("ls -la && git status 2>&1 | grep -v x", ["ls", "git status", "grep"]),
    ("ls; echo done", ["ls", "echo"]),
    ("ls || echo none", ["ls", "echo"]),
    ("ls >/dev/null 2>&1", ["ls"]),
    ("ls 2>/dev/null", ["ls"]),
    ("ls 2>&-", ["ls"]),
    ("ls\necho next", ["ls", "echo"]),
    ("ls # a comment $(rm x)", ["ls"]),
    ("echo 'rm -rf /'", ["echo"]),
    ('echo "a \\"quoted\\" $HOME"', ["echo"]),
    ("echo $HOME", ["echo"]),
    ("find . -name '*.py' -type f", ["find"]),
    ("grep -rn 'def main' src", ["grep"]),
    ("sed -n '1,5p' notes.md", ["sed"]),
    ("sed 's/a/b/g;s|x|y|' f", ["sed"]),
    ("awk -F, '{print $1}' data.csv", ["awk"]),
    ("python script.py --flag", ["python"]),
    ("python -m pytest -q", ["python"]),
    ("! ls x", ["ls"]),
]


@pytest.mark.parametrize(("command", "allowed"), APPROVED)
def test_allowed_commands_still_run_unasked(command: str, allowed: list[str]) -> None:
    decision, reason = command_decision(command, allowed, DENIED)
    assert decision is Decision.APPROVE, reason
    assert "allowed command prefix" in reason


def test_prefixes_are_whole_words_of_the_resolved_argv() -> None:
    assert command_decision("git push", ["git status"], [])[0] is None
    assert command_decision("lsblk", ["ls"], [])[0] is None
    assert command_decision("rm -r data", ["*"], ["rm -rf"])[0] is Decision.APPROVE
    assert command_decision("rm -rf data", ["*"], ["rm -rf"])[0] is Decision.DENY
    assert command_decision("'rm' '-rf' data", ["*"], ["rm -rf"])[0] is Decision.DENY
    # A denied `rm -rf` is not every deletion: find -delete only counts for `rm`.
    assert command_decision("find . -delete", ["*"], ["rm -rf"])[0] is Decision.APPROVE
    assert command_decision("find . -delete", ["*"], ["unlink"])[0] is Decision.DENY


def test_reasons_say_what_made_it_ask_or_deny() -> None:
    def why(command: str, denied: list[str] | None = None) -> str:
        return command_decision(command, ["ls", "echo", "git", "find"], denied or [])[1]

    assert "redirects output to a file" in why("ls > x")
    assert "`&>`" in why("ls &>/dev/null touch pwn")
    assert "`env` runs another program" in why("env ls")
    assert "background" in why("ls &")
    assert "command substitution" in why("ls $(date)")
    assert "'touch pwn' matches no allowed" in why("ls; touch pwn")
    assert "may be an alias" in why("git x")
    assert "`find -exec`" in why("find . -exec ls \\;")
    assert "(`env` runs it)" in why("env rm x", ["rm"])
    assert "`find -delete`" in why("find . -delete", ["rm"])
    assert "reads from its input" in why("echo x | sh", ["rm"])


def test_dash_reading_of_ampersand_redirect_is_analysed() -> None:
    """bash reads `&>` as one operator; dash, which runs the command, reads `&`
    then `>`: both readings are searched for denied programs."""
    programs = {c.program for c in analyse("ls &>/dev/null touch pwn").commands}
    assert {"ls", "touch"} <= programs


def test_it_is_fast() -> None:
    command = "git status && ls -la | grep x; echo done # " + "x" * 200
    command_decision(command, ALLOWED, DENIED)  # the parser is built once
    start = time.perf_counter()
    for _ in range(200):
        command_decision(command, ALLOWED, DENIED)
    per_call = (time.perf_counter() - start) / 200
    assert per_call < 0.02, f"{per_call * 1000:.2f} ms per command"
