"""The environment of everything the agent runs: built from an allowlist.

A blocklist (drop `OPENAI_API_KEY`, ...) misses the next key someone exports
(`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, a database URL with a password), so a
child gets only the variables named here, which say where things are and how to
format them, never who the user is to a service. On top of that, any variable
whose name looks like a credential or whose value contains a secret the daemon
knows (its API keys) is dropped, whatever its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hdsp.daemon.logs import is_secret_key

__all__ = ["ALLOWED_NAMES", "ALLOWED_PREFIXES", "child_environment"]

#: Variables a child inherits from the daemon, by exact name.
ALLOWED_NAMES = frozenset(
    {
        # who and where
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "PATH",
        "PWD",
        # language, terminal, time
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "TZ",
        # Python and its environments
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "CONDA_EXE",
        "CONDA_SHLVL",
        "JUPYTER_PATH",
        "MPLBACKEND",
        "PYDEVD_DISABLE_FILE_VALIDATION",
        # native libraries and numerical threads
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "PKG_CONFIG_PATH",
        "JAVA_HOME",
        "CUDA_HOME",
        "CUDA_VISIBLE_DEVICES",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
    }
)

#: Variables a child inherits by prefix (locale categories, Python's own switches).
ALLOWED_PREFIXES = ("LC_", "PYTHON")

#: Never passed on though they match a prefix: the daemon's keyring choice says
#: where its secrets are.
_DENIED_NAMES = frozenset({"PYTHON_KEYRING_BACKEND", "PYTHONSTARTUP"})

#: Proxy settings, passed on only when the sandbox allows the network, and only
#: when they hold no credentials (`http://user:password@proxy`).
_PROXY_NAMES = frozenset(
    {"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}
)

#: Secrets shorter than this are not looked for inside values (they would match
#: by accident; the logs' redaction uses the same floor).
_MIN_SECRET = 8


def child_environment(
    parent: Mapping[str, str],
    *,
    secret_values: Iterable[str] = (),
    network: bool = True,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a child of a process whose environment is `parent`:
    the allowed variables, minus any that holds one of `secret_values`, plus
    `overrides` (which are the caller's, and kept as given)."""
    secrets = [s for s in secret_values if len(s) >= _MIN_SECRET]
    env: dict[str, str] = {}
    for name, value in parent.items():
        allowed = name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)
        if network and name in _PROXY_NAMES and "@" not in value:
            allowed = True
        if not allowed or name in _DENIED_NAMES or is_secret_key(name):
            continue
        if any(secret in value for secret in secrets):
            continue
        env[name] = value
    if overrides:
        env.update(overrides)
    return env
