"""Files the services write and read: whole-or-nothing writes, bounded reads, a folder lock.

Profiles (``vramgui.profiles``) and the Hub cache (``vramgui.sources``) write files the same way,
and neither layer may import the other, so the one implementation lives here, below both and
beside ``paths``. Standard library only, like ``core``; errors are plain ``OSError`` for the
caller to turn into a message of its own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from vramgui.core.units import format_bytes

# Temporary files are hidden (".xyz.tmp") beside their target, so a folder listing of "*.json"
# never sees a half-written file.
TEMP_PREFIX = "."
TEMP_SUFFIX = ".tmp"
# What os.link raises where the file system has no hard links (FAT, some network shares).
_NO_HARD_LINKS = {
    errno.EPERM,
    errno.EXDEV,
    errno.ENOSYS,
    getattr(errno, "ENOTSUP", errno.EPERM),
    getattr(errno, "EOPNOTSUPP", errno.EPERM),
}
# What flock raises where a file system cannot lock (some network shares): the lock then only
# holds between the threads of this process.
_NO_LOCKS = {
    errno.ENOLCK,
    errno.ENOSYS,
    getattr(errno, "ENOTSUP", errno.ENOLCK),
    getattr(errno, "EOPNOTSUPP", errno.ENOLCK),
}
_LOCK_POLL_SECONDS = 0.005

if sys.platform == "win32":
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno in _NO_LOCKS:
                return True
            raise
        return True

    def _unlock(fd: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)


class RefusedFile(OSError):
    """A file that was not read: not a regular file, or larger than the reader accepts.

    ``strerror`` says why, in words a user can act on.
    """


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes``.

    Anything else is refused before a byte is read: a named pipe blocks its reader forever, a
    device such as /dev/zero never ends, and a size is checked before the file is read, so a huge
    file costs a ``stat``, not its size in memory. Symbolic links to regular files are followed.

    Raises:
        RefusedFile: not a regular file, or larger than ``max_bytes``.
        OSError: the file cannot be opened or read.
    """
    _check_regular(path, os.stat(path), max_bytes)
    # O_NONBLOCK: were the file swapped for a pipe after the check, opening it must not wait.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        _check_regular(path, os.fstat(fd), max_bytes)
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:  # it grew after the check
        raise RefusedFile(errno.EFBIG, _too_large(size, max_bytes), str(path))
    return b"".join(chunks)


def file_kind(mode: int) -> str:
    """What a ``st_mode`` describes, in words ("a named pipe", "a folder")."""
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _check_regular(path: Path, info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise RefusedFile(errno.EINVAL, f"{file_kind(info.st_mode)}, not a regular file", str(path))
    if info.st_size > max_bytes:
        raise RefusedFile(errno.EFBIG, _too_large(info.st_size, max_bytes), str(path))


def _too_large(size: int, max_bytes: int) -> str:
    return f"{format_bytes(size)}, more than the {format_bytes(max_bytes)} accepted"


def write_atomic(path: Path, data: bytes, *, replace: bool = True, durable: bool = True) -> None:
    """Write a whole file or nothing: a temporary file beside it, then a rename (or a link).

    A crash at any moment leaves the old file or the new one, never half of one; a failed write
    leaves no temporary file behind.

    Args:
        path: the file to write.
        data: its new content.
        replace: replace ``path`` if it exists; when False, an existing ``path`` is never touched
            (the complete file is hard-linked into place, which fails if the name is taken).
        durable: flush the file and its folder to disk before returning (what user data needs;
            a cache can skip it).

    Raises:
        FileExistsError: ``replace`` is False and ``path`` exists (nothing was changed).
        OSError: any other failure (nothing was changed).
    """
    folder = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=folder)
    tmp = Path(tmp_name)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            _link_exclusive(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        fsync_folder(folder)


def _link_exclusive(tmp: Path, path: Path) -> None:
    """Move a complete temporary file to ``path`` only if ``path`` does not exist.

    A hard link fails when the target exists, so it is an atomic exclusive create of a complete
    file. File systems without hard links fall back to check-then-rename, which callers keep
    safe with :func:`locked`.
    """
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "file exists", str(path)) from None
        os.replace(tmp, path)
        return
    tmp.unlink()


def fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable; POSIX only (Windows cannot fsync a directory)."""
    if sys.platform == "win32":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename itself has happened
    finally:
        os.close(fd)


_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


@contextlib.contextmanager
def locked(lock_path: Path, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` against other threads and processes.

    The lock is the operating system's (``flock`` on POSIX, ``LockFileEx`` through ``msvcrt`` on
    Windows), which it releases when the holding process ends, however it ends: a crash leaves
    no lock to break, and the lock file itself stays in place (deleting it would let two holders
    lock two different files). Threads of this process also wait on one in-process lock per file,
    which keeps them apart on file systems that lock per process or not at all.

    Raises:
        TimeoutError: another holder kept the lock longer than ``timeout_s``.
        OSError: the lock file cannot be created or opened.
    """
    key = os.path.normcase(os.path.abspath(lock_path))
    with _thread_locks_guard:
        thread_lock = _thread_locks.setdefault(key, threading.Lock())
    deadline = time.monotonic() + timeout_s
    if not thread_lock.acquire(timeout=timeout_s):
        raise TimeoutError(f"{lock_path} stayed locked for {timeout_s:g} s")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        try:
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{lock_path} stayed locked for {timeout_s:g} s")
                time.sleep(_LOCK_POLL_SECONDS)
            try:
                yield
            finally:
                _unlock(fd)
        finally:
            os.close(fd)
    finally:
        thread_lock.release()
