"""Checkpoints of any names a POSIX file system allows (issue 32, hole 4), with
the real git, as properties: a save lists every file by its name, a later save
sees what changed, and a restore brings back the very bytes of every name and
of its content; what clients get (the checkpoint's record) encodes, with each
name shown as hdsp.protocol.file_names says. A fixed seed, bounded examples."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import anyio
import msgspec
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from hdsp.daemon.checkpoints import ShadowRepo
from hdsp.protocol import CheckpointInfo, encode, os_name, shown_name
from tests.support.file_names import NAME_MAX, NAME_SETTINGS, make_file, name_paths

#: Names git or hdsp treat apart in a workspace.
RESERVED = (b".git", b".gitignore", b".gitattributes", b".gitmodules", b".hdspignore")

_trees = st.lists(name_paths(max_depth=3, reserved=RESERVED), min_size=1, max_size=4)


def _files(root: Path) -> dict[bytes, bytes]:
    top = os.fsencode(root)
    found = {}
    for folder, _, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, top)] = f.read()
    return found


def _made(root: Path, tree: list[list[bytes]]) -> dict[bytes, bytes]:
    """The files of `tree`, each with content of its own; `assume`s that no
    path's folder is another's file."""
    for n, parts in enumerate(tree):
        try:
            make_file(root, parts, b"content %d \xff\n" % n)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            assume(False)
    return _files(root)


def _change_all(root: Path, paths: list[bytes]) -> None:
    """Rewrite every file of `paths`, then remove the first."""
    for path in paths:
        with open(os.path.join(os.fsencode(root), path), "wb") as f:
            f.write(b"changed\n")
    os.unlink(os.path.join(os.fsencode(root), paths[0]))


async def _round_trip(tree: list[list[bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        first_files = _made(workspace, tree)
        repo = ShadowRepo(Path(tmp) / "data", workspace, max_file_bytes=1 << 20)
        first = await repo.save("one")
        assert {os.fsencode(p) for p in first.changed} == set(first_files)
        info = CheckpointInfo(
            task_id="t",
            number=1,
            ts=1,
            commit=first.commit,
            reason="r",
            changed=[shown_name(p) for p in first.changed],
            notes=first.notes,
        )
        record = msgspec.json.decode(encode(info), type=CheckpointInfo)
        assert sorted(os.fsencode(os_name(p)) for p in record.changed) == sorted(first_files)

        # Change every file, remove the first: a second save sees just that.
        paths = sorted(first_files)
        _change_all(workspace, paths)
        second = await repo.save("two")
        assert {os.fsencode(p) for p in second.changed} == set(paths)
        changes = await repo.changes(first.commit, second.commit)
        assert {(letter, os.fsencode(p)) for letter, p in changes} == {
            ("D" if p == paths[0] else "M", p) for p in paths
        }
        diff = await repo.unified_diff(first.commit, second.commit, os.fsdecode(paths[-1]))
        diff.encode("utf-8")  # what a client gets encodes

        # A restore: the very names, the very bytes.
        await repo.restore(first.commit)
        assert _files(workspace) == first_files


@settings(NAME_SETTINGS, max_examples=10)
@given(_trees)
@example([[b"r\xff.csv"]])
@example([[b"dir\xfe", b"two\nlines"], [b"-rf"], [b"lit\\xff"]])
@example([[b"*"], [b"?"], [b"[a]"]])  # glob characters are names, never patterns
@example([[b"0:x"], [b"x"]])  # `:0:x` must not name stage 0 of x
@example([[b" trailing "], [b"#hash"], [b"!bang"]])
@example([[b"n" * NAME_MAX]])
def test_a_checkpoint_keeps_and_restores_every_name_byte_for_byte(
    tree: list[list[bytes]],
) -> None:
    anyio.run(_round_trip, tree)


async def test_nested_repositories_with_odd_names_are_left_out_literally(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    top = os.fsencode(workspace)
    for name in (b"*", b"n\xff\nx", b"a\\b "):
        os.makedirs(top + b"/" + name + b"/.git")
        make_file(workspace, [name, b"inside.txt"], b"theirs\n")
    make_file(workspace, [b"mine\xff.txt"], b"mine\n")
    make_file(workspace, [b"plain.txt"], b"plain\n")
    make_file(workspace, [b"sub", b"kept.txt"], b"kept\n")
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=1 << 20)
    saved = await repo.save("one")
    # A folder named `*` is left out alone, not every file with it.
    assert sorted(saved.changed) == ["mine\udcff.txt", "plain.txt", "sub/kept.txt"]
    assert sum("git repository of its own" in n for n in saved.notes) == 3
    assert all(n.isprintable() and n.encode() for n in saved.notes)  # shown escaped
    # A restart reads the list back; a name the exclude file could not spell
    # (a line break) is found again by its .git.
    again = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=1 << 20)
    make_file(workspace, [b"plain.txt"], b"changed\n")
    assert sorted((await again.save("two")).changed) == ["plain.txt"]


async def test_an_ignore_pattern_of_bytes_that_are_not_utf8_keeps_a_file_out(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    make_file(workspace, [b".hdspignore"], b"secret\xff.csv\n")
    make_file(workspace, [b"secret\xff.csv"], b"s\n")
    make_file(workspace, [b"kept\xff.csv"], b"k\n")
    repo = ShadowRepo(tmp_path / "data", workspace, max_file_bytes=1 << 20)
    saved = await repo.save("one")
    assert sorted(saved.changed) == [".hdspignore", "kept\udcff.csv"]
