"""replaced_atomically, replaced_directory: the old file or directory or the whole new one, and no leftovers."""

from pathlib import Path

import pytest

from gpt_aot.files import replaced_atomically, replaced_directory, swap_directory


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
    assert not (tmp_path / ".cpu.old").exists()
    monkeypatch.undo()
    swap_directory(src, dst)
    assert (dst / "manifest.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu"]
