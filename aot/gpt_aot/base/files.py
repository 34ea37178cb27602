"""Files and directories replaced whole: a reader sees the old one or the complete new one, never a part.
What they hold gets the modes the umask gives (0644 files, 0755 directories under 022)."""

from __future__ import annotations

import ctypes
import errno
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
    is untouched. The temporary file is created here, under a name no other user can predict and exclusively (never
    through a link planted in the directory), with the mode the umask gives a new file."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
        finally:
            os.close(fd)
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
    exception it is swapped into place (swap_directory), with the mode the umask gives a new directory; it is
    removed in any case, so a failed or interrupted
    build never leaves a partial directory and `path` stays as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield work
        _give_umask_modes(work)
        swap_directory(work, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def swap_directory(src: Path, dst: Path) -> None:
    """Put a finished directory in place of `dst` in one atomic step: a reader of `dst` sees the old directory or
    the new one, whole, at every instant (renameat2's RENAME_EXCHANGE, then the old one is removed). Where the file
    system cannot exchange, two renames: `dst` is then briefly absent, never partial, and put back if the second
    fails."""
    if dst.exists() and _exchange(src, dst):
        shutil.rmtree(src, ignore_errors=True)  # src now holds the old directory
        return
    old = None
    if dst.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dst.name}.old.", dir=dst.parent))  # an empty directory to rename onto
        dst.rename(old)
    try:
        src.rename(dst)
    except BaseException:
        if old is not None:
            old.rename(dst)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux renameat2); False where the kernel or file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(error, os.strerror(error), str(b))


def _give_umask_modes(directory: Path) -> None:
    """The modes a new directory and new files get under the umask (0755/0644 under 022), whatever wrote them:
    mkdtemp makes 0700, and safetensors writes 0600, either of which would hide the artifact from a service
    that runs as another user."""
    mask = _umask()
    os.chmod(directory, 0o777 & ~mask)
    for entry in directory.rglob("*"):
        os.chmod(entry, (0o777 if entry.is_dir() else 0o666) & ~mask)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
