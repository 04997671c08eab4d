"""nbclient's own test notebooks, as the reference for hdsp's output rules.

nbclient's sdist ships them (`tests/files/*.ipynb`), its wheel does not; so they
are fetched the ordinary way, `pip download --no-binary :all:` of the nbclient
version installed here, and unpacked into a cache in the virtual environment
(`<venv>/hdsp-test-cache/nbclient-<version>/files`). Nothing of them is copied
into hdsp's repository. A download that cannot work fails the test that needs
them with the reason: it is never a silent skip.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path, PurePosixPath

__all__ = ["NbclientFilesUnavailable", "nbclient_test_files"]


class NbclientFilesUnavailable(RuntimeError):
    """nbclient's sdist could not be downloaded or has no test notebooks."""


def _cache_root() -> Path:
    return Path(sys.prefix) / "hdsp-test-cache"


def nbclient_test_files() -> Path:
    """The folder of nbclient's test notebooks for the installed nbclient,
    downloaded and unpacked on first use."""
    release = version("nbclient")
    target = _cache_root() / f"nbclient-{release}" / "files"
    if (target / "Clear Output.ipynb").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"nbclient=={release}",
            "--dest",
            scratch,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        archives = sorted(Path(scratch).glob("nbclient-*.tar.gz"))
        if done.returncode != 0 or not archives:
            raise NbclientFilesUnavailable(
                f"could not download nbclient {release}'s sdist (its test notebooks are the "
                f"reference of this test): `{' '.join(command)}` exited {done.returncode}:\n"
                f"{done.stderr.strip()[-2000:]}"
            )
        unpacked = Path(scratch) / "files"
        unpacked.mkdir()
        found = 0
        with tarfile.open(archives[0]) as archive:
            for member in archive.getmembers():
                parts = PurePosixPath(member.name).parts
                # nbclient-X/tests/files/NAME (older sdists: nbclient-X/nbclient/tests/files)
                if not member.isfile() or len(parts) < 4 or parts[-3:-1] != ("tests", "files"):
                    continue
                source = archive.extractfile(member)
                assert source is not None
                with source, open(unpacked / parts[-1], "wb") as sink:
                    shutil.copyfileobj(source, sink)
                found += 1
        if not (unpacked / "Clear Output.ipynb").is_file():
            raise NbclientFilesUnavailable(
                f"nbclient {release}'s sdist ({archives[0].name}) has no tests/files/"
                f"Clear Output.ipynb ({found} test files found): its layout changed"
            )
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
    return target
