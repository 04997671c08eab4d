"""What the tests (and bench/) share: a daemon in a subprocess, helpers that
script and read turns, raw peers, terminals. The wire-level fake model APIs are
in tests/fakes."""
