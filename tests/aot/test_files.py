"""replaced_atomically: the old file or the whole new one, and no leftovers."""

import pytest

from gpt_aot.files import replaced_atomically


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
