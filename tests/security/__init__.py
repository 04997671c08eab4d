"""The security suite: each finding of the attack on hdsp (a scripted model, a
second uid, a hostile provider) as a regression test, against the real daemon.

    test_workspace.py         1  the default workspace is where hdsp runs, never $HOME
    test_terminal.py          2  spoofed asks: escapes shown, Enter approves nothing
    test_command_table.py     3  the parser's table of bypass attempts (150 of them)
    test_command_approval.py  3  the same, end to end through the daemon
    test_discovery.py         4  runtime dir and discovery file trusted only when ours
    test_secrets.py           5  keys kept out of events, the database, logs and exports
    test_sandbox.py           5, 9  what the agent's commands and kernels cannot reach
    test_files.py             6-9  protected notebooks, symlink races, modes, NUL bytes

Unit tests of the same parts stay beside their packages (tests/daemon/
test_file_confinement.py, test_secret_scrubbing.py, test_sandbox.py;
tests/client/test_escape.py).
"""
