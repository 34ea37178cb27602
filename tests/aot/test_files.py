"""replaced_atomically, replaced_directory: the old file or directory or the whole new one, and no leftovers."""

import os
import stat
import threading
from pathlib import Path

import pytest

from gpt_aot.base import files
from gpt_aot.base.files import replaced_atomically, replaced_directory, swap_directory


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "weights.safetensors"
    path.write_bytes(b"old")
    with pytest.raises(OSError, match="disk full"), replaced_atomically(path) as tmp:
        tmp.write_bytes(b"ne")  # half of it, then the failure
        raise OSError("disk full")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["weights.safetensors"]


def test_a_write_that_succeeds_replaces_the_file(tmp_path):
    path = tmp_path / "manifest.json"
    for content in (b"first", b"second"):
        with replaced_atomically(path) as tmp:
            assert tmp.parent == path.parent and tmp != path  # a rename within one directory
            assert not path.exists() or path.read_bytes() != content  # not visible before the block ends
            tmp.write_bytes(content)
        assert path.read_bytes() == content
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_a_link_planted_at_a_predictable_temporary_name_is_not_followed(tmp_path):
    # Another user who can guess the temporary name could plant a link there and have the write land elsewhere.
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"untouched")
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    path = artifact / "manifest.sig"
    planted = artifact / f".manifest.sig.{os.getpid()}.tmp"  # the name it once had
    planted.symlink_to(victim)
    names = set()
    for content in (b"first", b"second"):
        with replaced_atomically(path) as tmp:
            assert not tmp.is_symlink() and tmp.is_file()  # created here, exclusively
            assert tmp.parent == artifact
            names.add(tmp.name)
            tmp.write_bytes(content)
        assert path.read_bytes() == content
    assert len(names) == 2 and planted.name not in names  # a fresh, unguessable name each time
    assert victim.read_bytes() == b"untouched"
    assert planted.is_symlink()


def test_a_replaced_file_has_the_mode_the_umask_gives(tmp_path):
    old = os.umask(0o022)
    try:
        with replaced_atomically(tmp_path / "manifest.sig") as tmp:
            tmp.write_text("{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "manifest.sig").stat().st_mode) == 0o644


def test_a_directory_build_that_fails_leaves_the_old_one_and_no_temporary(tmp_path):
    dst = tmp_path / "cpu"
    for content in ("first", "second"):
        with replaced_directory(dst) as work:
            assert work.parent == dst.parent and not any(work.iterdir())
            (work / "manifest.json").write_text(content)
        assert (dst / "manifest.json").read_text() == content
    with pytest.raises(OSError, match="disk full"), replaced_directory(dst) as work:
        (work / "manifest.json").write_text("third")
        raise OSError("disk full")
    assert (dst / "manifest.json").read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["cpu"]


def test_a_failed_swap_puts_the_old_directory_back(tmp_path, monkeypatch):
    # The two-rename fallback, taken where the file system cannot exchange directories.
    monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    dst, src = tmp_path / "cpu", tmp_path / ".cpu.work"
    dst.mkdir()
    (dst / "manifest.json").write_text("old")
    src.mkdir()
    (src / "manifest.json").write_text("new")
    real_rename = Path.rename

    def rename(self, target):
        if self == src:
            raise OSError("disk full")
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(OSError, match="disk full"):
        swap_directory(src, dst)
    assert (dst / "manifest.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cpu.work", "cpu"]  # no old directory left over
    monkeypatch.setattr(Path, "rename", real_rename)
    swap_directory(src, dst)
    assert (dst / "manifest.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu"]


def test_a_reader_never_finds_the_directory_absent_while_it_is_replaced(tmp_path):
    dst = tmp_path / "cpu"
    with replaced_directory(dst) as work:
        (work / "manifest.json").write_text("0")
    absent, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            try:
                (dst / "manifest.json").read_text()
            except FileNotFoundError:
                absent.append(True)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(1, 300):
            with replaced_directory(dst) as work:
                (work / "manifest.json").write_text(str(i))
    finally:
        stop.set()
        reader.join()
    assert not absent, f"the directory was absent {len(absent)} times"
    assert (dst / "manifest.json").read_text() == "299"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu"]


def test_a_built_directory_has_the_modes_the_umask_gives(tmp_path):
    old = os.umask(0o022)
    try:
        with replaced_directory(tmp_path / "cpu") as work:
            (work / "manifest.json").write_text("{}")
            (work / "golden.safetensors").write_bytes(b"g")
            (work / "golden.safetensors").chmod(0o600)  # as safetensors' writer leaves its files
            with replaced_atomically(work / "weights.safetensors") as tmp:
                tmp.write_bytes(b"w")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "cpu").stat().st_mode) == 0o755
    for name in ("manifest.json", "weights.safetensors", "golden.safetensors"):
        assert stat.S_IMODE((tmp_path / "cpu" / name).stat().st_mode) == 0o644
