"""Files replaced whole: a reader sees the old file or the complete new one, never a part."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """Yields a temporary path beside `path` for the caller to write. When the block ends without an exception the
    file is fsynced and renamed over `path`, then the directory fsynced; on an exception it is removed and `path`
    is untouched."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync(path.parent)  # the rename itself


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
