"""Files and directories replaced whole: a reader sees the old one or the complete new one, never a part
(a directory may be absent for the moment between its two renames)."""

from __future__ import annotations

import os
import shutil
import tempfile
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


@contextmanager
def replaced_directory(path: Path) -> Iterator[Path]:
    """Yields a new temporary directory beside `path` for the caller to fill. When the block ends without an
    exception it is swapped into place (swap_directory); it is removed in any case, so a failed or interrupted
    build never leaves a partial directory and `path` stays as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield work
        swap_directory(work, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def swap_directory(src: Path, dst: Path) -> None:
    """Swap a finished directory into place by renames; the old one is removed only after, and put back if the
    swap fails. Between the two renames `dst` is briefly absent: a reader may find no directory, never a part."""
    old = None
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        dst.rename(old)
    try:
        src.rename(dst)
    except BaseException:
        if old is not None:
            old.rename(dst)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
