"""hdsp.daemon.systemd_unit: the user unit, written to real files and checked by systemd."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from importlib import resources
from pathlib import Path

import pytest

from hdsp.daemon.systemd_unit import (
    ENABLE_COMMAND,
    PLACEHOLDER,
    UNIT_NAME,
    ServiceInstallError,
    find_hdspd,
    install_service,
    installed_message,
    unit_text,
)

REPO = Path(__file__).resolve().parents[2]
HDSPD = "/opt/hdsp/bin/hdspd"


def exec_start(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=")


def executable(path: Path) -> Path:
    """A real executable at ``path``, for systemd to find."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_packaged_unit_is_the_one_in_systemd_dir() -> None:
    packaged = resources.files("hdsp.daemon").joinpath(UNIT_NAME).read_text(encoding="utf-8")
    in_tree = (REPO / "systemd" / UNIT_NAME).read_text(encoding="utf-8")
    assert packaged == in_tree, (
        "daemon/hdspd.service is the canonical unit; copy it to systemd/hdspd.service"
    )


def test_unit_text_substitutes_the_executable() -> None:
    text = unit_text(HDSPD)
    assert PLACEHOLDER not in text
    assert exec_start(text) == HDSPD
    assert "Type=notify" in text
    assert "KillMode=mixed" in text
    assert "WantedBy=default.target" in text


def test_unit_text_quotes_spaces_and_escapes_specifiers() -> None:
    assert exec_start(unit_text("/home/ana/my tools/bin/hdspd")) == (
        '"/home/ana/my tools/bin/hdspd"'
    )
    assert exec_start(unit_text("/home/ana/100%/bin/hdspd")) == "/home/ana/100%%/bin/hdspd"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("bin/hdspd", "not absolute"),
        ("/opt/x\nExecStartPre=/bin/evil/hdspd", "contains"),
        ("/opt/$HOME/hdspd", "contains"),
        ('/opt/"q"/hdspd', "contains"),
    ],
)
def test_unit_text_refuses_paths_systemd_would_misread(path: str, message: str) -> None:
    with pytest.raises(ServiceInstallError, match=message):
        unit_text(path)


def test_install_writes_the_unit(tmp_path: Path) -> None:
    unit_dir = tmp_path / "config" / "systemd" / "user"

    written = install_service(unit_dir=unit_dir, hdspd_path=HDSPD)

    assert written == unit_dir / UNIT_NAME
    assert written.read_text(encoding="utf-8") == unit_text(HDSPD)
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    assert sorted(p.name for p in unit_dir.iterdir()) == [UNIT_NAME], "no temp file left"


def test_install_again_with_the_same_unit_is_fine(tmp_path: Path) -> None:
    first = install_service(unit_dir=tmp_path, hdspd_path=HDSPD)
    before = first.stat().st_mtime_ns
    assert install_service(unit_dir=tmp_path, hdspd_path=HDSPD) == first
    assert first.stat().st_mtime_ns == before


def test_install_refuses_to_overwrite_a_different_unit(tmp_path: Path) -> None:
    target = tmp_path / UNIT_NAME
    target.write_text("[Service]\nExecStart=/usr/bin/other\n")

    with pytest.raises(ServiceInstallError) as caught:
        install_service(unit_dir=tmp_path, hdspd_path=HDSPD)

    message = str(caught.value)
    assert str(target) in message
    assert "--force" in message
    assert "--print" in message
    assert target.read_text() == "[Service]\nExecStart=/usr/bin/other\n"


def test_force_replaces_a_different_unit(tmp_path: Path) -> None:
    target = tmp_path / UNIT_NAME
    target.write_text("[Service]\nExecStart=/usr/bin/other\n")

    assert install_service(force=True, unit_dir=tmp_path, hdspd_path=HDSPD) == target
    assert target.read_text(encoding="utf-8") == unit_text(HDSPD)


def test_print_only_returns_the_text_and_writes_nothing(tmp_path: Path) -> None:
    text = install_service(print_only=True, unit_dir=tmp_path, hdspd_path=HDSPD)
    assert text == unit_text(HDSPD)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_location_says_what_to_do(tmp_path: Path) -> None:
    # A regular file where a directory should be: fails for root too.
    blocker = tmp_path / "systemd"
    blocker.write_text("not a directory")
    with pytest.raises(ServiceInstallError, match="--print") as caught:
        install_service(unit_dir=blocker / "user", hdspd_path=HDSPD)
    assert str(blocker / "user" / UNIT_NAME) in str(caught.value)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd is Linux-only")
def test_default_location_follows_xdg_config_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    written = install_service(hdspd_path=HDSPD)
    assert written == tmp_path / "systemd" / "user" / UNIT_NAME
    assert written.is_file()


def test_message_names_the_next_step(tmp_path: Path) -> None:
    message = installed_message(tmp_path / UNIT_NAME)
    assert str(tmp_path / UNIT_NAME) in message
    assert ENABLE_COMMAND in message
    assert ENABLE_COMMAND == (
        "systemctl --user daemon-reload && systemctl --user enable --now hdspd"
    )


def test_find_hdspd_finds_this_installations_executable() -> None:
    found = Path(find_hdspd())
    assert found.is_absolute()
    assert found.name == "hdspd"
    assert os.access(found, os.X_OK)


# --- systemd's own verdict -----------------------------------------------------------


def systemd_verify(unit: Path, tmp_path: Path) -> None:
    """Run `systemd-analyze --user verify` on ``unit``; fail on any complaint about it."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    # A user manager needs a runtime dir; none runs here, so give it a private one.
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_COLOR": "0"}
    result = subprocess.run(
        [tool, "--user", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    output = result.stdout + result.stderr
    complaints = [line for line in output.splitlines() if UNIT_NAME in line or "hdspd" in line]
    assert result.returncode == 0 and not complaints, output


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    venv_hdspd = Path(sysconfig.get_path("scripts")) / "hdspd"
    hdspd = venv_hdspd if os.access(venv_hdspd, os.X_OK) else executable(tmp_path / "bin" / "hdspd")
    unit = install_service(unit_dir=tmp_path / "units", hdspd_path=str(hdspd))
    systemd_verify(unit, tmp_path)


def test_systemd_reads_an_awkward_path_as_written(tmp_path: Path) -> None:
    # If the quoting or the %-escaping were wrong, systemd would look for another
    # file and report that it is not executable.
    hdspd = executable(tmp_path / "my tools 100%" / "bin" / "hdspd")
    unit = install_service(unit_dir=tmp_path / "units", hdspd_path=str(hdspd))
    systemd_verify(unit, tmp_path)


def test_systemd_notices_a_missing_executable(tmp_path: Path) -> None:
    """The verify helper above can fail: a unit pointing nowhere is rejected."""
    unit = install_service(unit_dir=tmp_path / "units", hdspd_path=str(tmp_path / "no-hdspd"))
    with pytest.raises(AssertionError, match="not executable"):
        systemd_verify(unit, tmp_path)
