"""The sandbox every shell command and kernel of the agent starts in.

Mechanism: bubblewrap (`bwrap`, Debian/Ubuntu package `bubblewrap`), alone.
It gives what the policy needs in one tool, each part enforced by the kernel:

- a mount namespace: the file system read-only, a private `/tmp`, the user's
  secrets and hdsp's own files covered by empty mounts, the workspace bound
  read-write, and for a kernel its own socket directory and no other kernel's
  (see :mod:`.layout` for the order: no bind shows a hidden path again);
- a PID namespace with its own `/proc`: the daemon's `/proc/<pid>/environ` (its
  API keys) is not there, and when the namespace's init dies the kernel kills
  every process in it, so `setsid cmd &` or a kernel's `Popen(...,
  start_new_session=True)` cannot outlive the tool, the kernel, or the daemon
  (`--die-with-parent`);
- a user namespace with no capabilities and no nested user namespaces, so the
  mounts cannot be undone from inside (they are locked to the outer namespace);
- a network namespace of its own unless `sandbox.network` is true.

Landlock was considered as a second layer or the fallback and is not used: its
read rules are an allowlist (read only under these directories), which cannot
say "everything but ~/.ssh" without listing every place a Python environment or
a tool may live, and it can neither hide `/proc/<pid>` of a same-user process nor
kill a process tree. Without bwrap, therefore, the sandbox is *unavailable*, and
commands and kernels are refused with a message that says what to install, or
how to choose `sandbox.mode off` knowingly. hdsp never silently runs unconfined.

Modes (`sandbox.mode`), compared with Codex's sandbox modes:

- `workspace-write` (the default; Codex's `workspace-write`): writes only in the
  workspace and the private `/tmp`; no network unless `sandbox.network = true`
  (Codex too keeps the network off by default in this mode: it is what stops a
  prompt-injected agent from sending the user's data away);
- `read-only` (Codex's `read-only`): the workspace is read-only too; writes only
  in the private `/tmp`;
- `off` (Codex's `danger-full-access`): no OS sandbox; every command and kernel
  start logs a warning, each command's result says so, and status shows it.

In every mode, `off` included, children get an environment built from an
allowlist (:mod:`.environment`) with the daemon's known secrets removed: `off`
lifts the confinement, not the secret hygiene.

Costs: bwrap adds about 20-80 ms to the start of a command or a kernel, nothing
to a kernel's executions (they go over the same ipc sockets).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import structlog

from hdsp.daemon.config.settings import SandboxSettings
from hdsp.daemon.paths import Paths
from hdsp.protocol import SandboxStatus

from .environment import child_environment
from .layout import MountLayout, PrivatePathBound, base_argv, bwrap_argv

__all__ = ["HIDDEN_IN_HOME", "PRIVATE_CACHES", "Sandbox", "SandboxUnavailable"]

log = structlog.get_logger("hdsp.sandbox")

#: Paths under the home directory the sandbox never shows: keys, credentials,
#: keyrings, most tools' settings (hdsp's among them), other kernels' connection
#: files (they hold the key that lets anyone run code in them).
HIDDEN_IN_HOME = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".pg_service.conf",  # libpq's service file may hold a password (store.url ?service=)
    ".pypirc",
    ".npmrc",
    ".password-store",
    ".docker",
    ".kube",
    ".config",
    ".local/share/python_keyring",
    ".local/share/keyrings",
    ".local/share/jupyter/runtime",
)

#: Where the libraries a child runs keep their settings and caches in a sandbox:
#: its private /tmp (the home's are hidden or read-only there).
PRIVATE_CACHES = {
    "MPLCONFIGDIR": "/tmp/.config/matplotlib",
    "XDG_CONFIG_HOME": "/tmp/.config",
    "XDG_CACHE_HOME": "/tmp/.cache",
    # IPython ignores a read-only ~/.ipython anyway, warning on every kernel start.
    "IPYTHONDIR": "/tmp/.ipython",
}

#: How long the check that bwrap works may take.
_PROBE_TIMEOUT = 15.0


class SandboxUnavailable(Exception):
    """The sandbox cannot run here and the mode is not `off`; the message says why
    and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Sandbox:
    """Wraps commands in the sandbox the current settings ask for.

    `settings` is read on every use, so `hdsp config set sandbox.mode ...` applies
    to the next command and the next kernel start. `secret_values` returns the
    secrets the daemon knows, which no child environment may contain.
    """

    def __init__(
        self,
        settings: Callable[[], SandboxSettings],
        *,
        paths: Paths,
        secret_values: Callable[[], Iterable[str]] = tuple,
        environ: Mapping[str, str] | None = None,
        interpreter: Sequence[Path] | None = None,
    ) -> None:
        self._settings = settings
        self.paths = paths
        self._secret_values = secret_values
        self._environ = os.environ if environ is None else environ
        #: Where the Python that runs kernels (the daemon's) and hdsp's own modules
        #: live: shown read-only again when they lie under /tmp, which the sandbox
        #: replaces with an empty one (a checkout or venv there could not start a
        #: kernel: "bwrap: execvp …/python: No such file or directory").
        self.interpreter = list(interpreter) if interpreter is not None else _interpreter()
        self._lock = threading.Lock()
        #: bwrap_path setting -> (the binary found, why it cannot run or None).
        self._probes: dict[str, tuple[str | None, str | None]] = {}

    # ---- state --------------------------------------------------------------------

    @property
    def settings(self) -> SandboxSettings:
        return self._settings()

    @property
    def enabled(self) -> bool:
        """Whether commands and kernels are to be confined (the mode is not off)."""
        return self.settings.mode != "off"

    def probe(self) -> str | None:
        """Check (once per `bwrap_path`) that bwrap can make a sandbox here; the
        problem, or None. Blocking: it runs bwrap once (tens of milliseconds)."""
        return self._probe(self.settings.bwrap_path)[1]

    def _probe(self, setting: str) -> tuple[str | None, str | None]:
        with self._lock:
            known = self._probes.get(setting)
            if known is None:
                known = self._probes[setting] = _probe_bwrap(setting)
                if known[1] is not None:
                    log.warning("the sandbox is unavailable", problem=known[1])
        return known

    def problem(self) -> str | None:
        """Why a command or kernel would be refused now; None when it may run."""
        if not self.enabled:
            return None
        return self.probe()

    def status(self) -> SandboxStatus:
        s = self.settings
        if s.mode == "off":
            return SandboxStatus(mode=s.mode, network=True, mechanism="none")
        problem = self.probe()
        return SandboxStatus(
            mode=s.mode,
            network=s.network,
            mechanism="unavailable" if problem else "bwrap",
            problem=problem,
        )

    def describe(self) -> str:
        """One line for a tool result: what the sandbox allowed the command."""
        s = self.settings
        if s.mode == "off":
            return (
                "WARNING: no sandbox (sandbox.mode is off): this ran with all of the user's access."
            )
        writes = "the workspace and /tmp" if s.mode == "workspace-write" else "/tmp only"
        network = "network allowed" if s.network else "no network"
        return (
            f"Ran in a sandbox ({s.mode}): writes only in {writes}, {network}, no access "
            "to ~/.ssh, ~/.config, keyrings, credentials or hdsp's files."
        )

    # ---- what a child gets ----------------------------------------------------------

    def environment(self, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a command or kernel (allowlisted, no known secrets)."""
        s = self.settings
        env = child_environment(
            self._environ,
            secret_values=self._secret_values(),
            network=s.mode == "off" or s.network,
            overrides=overrides,
        )
        if self.enabled:
            env["TMPDIR"] = "/tmp"  # the private one; the host's may be hidden
            # ~/.config and ~/.cache are hidden or read-only in the sandbox: the
            # libraries that want a writable one get a private one in /tmp
            # (matplotlib warned "mkdir -p failed" on every kernel's first plot).
            for name, value in PRIVATE_CACHES.items():
                env.setdefault(name, value)
        return env

    def wrap(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        cwd: Path | None = None,
        sockets: Path | None = None,
        unsetenv: Sequence[str] = (),
    ) -> list[str]:
        """`argv` as it runs in the sandbox: in `cwd` (default: `workspace`), able
        to write `workspace` (unless read-only) and a kernel's own `sockets`
        directory, whose parent (every kernel's directories) is hidden.

        Raises:
            SandboxUnavailable: the mode is not off and bwrap cannot run here, or
                the workspace lies inside hdspd's runtime or data dir.
        """
        s = self.settings
        if s.mode == "off":
            log.warning("running without a sandbox (sandbox.mode is off)", argv0=argv[0])
            return list(argv)
        found, problem = self._probe(s.bwrap_path)
        if problem is not None or found is None:
            raise SandboxUnavailable(problem or "bwrap was not found")
        hidden = self.hidden_paths()
        if sockets is not None:
            hidden.append(sockets.parent)
        layout = MountLayout(
            hidden=hidden,
            workspace=workspace,
            writable=s.mode == "workspace-write",
            sockets=sockets,
            reexposed=[self.home, *self.interpreter],
            private=[self.paths.data_dir, self.paths.runtime_dir],
            network=s.network,
            cwd=cwd or workspace,
            unsetenv=unsetenv,
        )
        try:
            return bwrap_argv(found, layout, argv)
        except PrivatePathBound as exc:
            raise SandboxUnavailable(str(exc)) from None

    # ---- the kernel service's launcher (see hdsp.daemon.kernels.KernelLauncher) -----

    def kernel_refusal(self) -> str | None:
        return self.problem()

    def kernel_command(self, argv: Sequence[str], *, cwd: Path, sockets: Path) -> list[str]:
        # jupyter_client names itself the kernel's parent; inside the sandbox the
        # parent is the namespace's init, so ipykernel would take it for orphaned
        # and exit. --die-with-parent does that watching instead.
        return self.wrap(argv, workspace=cwd, sockets=sockets, unsetenv=["JPY_PARENT_PID"])

    def kernel_environment(self) -> dict[str, str]:
        return self.environment()

    @property
    def interrupts_by_message(self) -> bool:
        """A SIGINT to the process a kernel manager started reaches bwrap, which it
        ends (and the kernel with it): sandboxed kernels are interrupted with an
        `interrupt_request` on their control channel instead."""
        return self.enabled

    # ---- paths ----------------------------------------------------------------------

    @property
    def home(self) -> Path:
        home = self._environ.get("HOME")
        return Path(home) if home else Path.home()

    def hidden_paths(self) -> list[Path]:
        """Every path the sandbox covers, with symlinks resolved as well."""
        env = self._environ
        home = self.home
        paths = [home / name for name in HIDDEN_IN_HOME]
        if xdg_config := env.get("XDG_CONFIG_HOME"):
            paths.append(Path(xdg_config))
        if xdg_data := env.get("XDG_DATA_HOME"):
            data = Path(xdg_data)
            paths += [data / "python_keyring", data / "keyrings", data / "jupyter" / "runtime"]
        if jupyter_runtime := env.get("JUPYTER_RUNTIME_DIR"):
            paths.append(Path(jupyter_runtime))
        # The user's runtime dir holds the D-Bus session socket (the Secret Service
        # keyring answers there) and hdsp's control socket.
        if xdg_runtime := env.get("XDG_RUNTIME_DIR"):
            paths.append(Path(xdg_runtime))
        paths.append(Path(f"/run/user/{os.getuid()}"))
        paths += [self.paths.data_dir, self.paths.runtime_dir]
        out: list[Path] = []
        for path in paths:
            path = Path(os.path.abspath(path))
            out.append(path)
            real = Path(os.path.realpath(path))
            if real != path:
                out.append(real)
        return out


def _probe_bwrap(setting: str) -> tuple[str | None, str | None]:
    fix = "or, knowingly, run without one: hdsp config set sandbox.mode off"
    found = shutil.which(setting)
    if found is None:
        return None, (
            f"The sandbox is unavailable: bubblewrap ({setting!r}) was not found. Install "
            f"it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
            f"bubblewrap) or point sandbox.bwrap_path at it, {fix}."
        )
    argv = [*base_argv(found), "--", "true"]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return found, f"The sandbox is unavailable: {found} did not run ({exc}); {fix}."
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[:500] or f"exit {done.returncode}"
        said = "".join(c if c.isprintable() else " " for c in said)
        return found, (
            f"The sandbox is unavailable: bubblewrap ({found}) cannot create one here "
            f"({said}). User namespaces may be disabled (sysctl "
            "kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
            f"kernel.apparmor_restrict_unprivileged_userns=0), {fix}."
        )
    return found, None


def _interpreter() -> list[Path]:
    """The daemon's Python (its environment and the installation that environment
    comes from) and the folder of hdsp's modules (a checkout, for an editable
    install): what a sandboxed kernel runs."""
    package = Path(__file__).resolve().parents[2]
    found = [
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.executable).resolve().parent,
        package,
    ]
    return list(dict.fromkeys(found))
