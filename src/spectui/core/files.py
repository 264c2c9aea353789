"""Files and folders spectui creates for the user alone (recordings, logs, crash reports).

Folders are made owner-only (0700) and files 0600. A file is opened in one ``open()`` call
that the kernel decides: ``O_CREAT | O_EXCL`` for a new file, ``O_APPEND | O_NOFOLLOW`` for one
appended to across runs. There is no ``exists()``-then-create step, so a link planted between
a check and the write cannot win, and a dangling symlink counts as present, not absent. A
symlink, a FIFO, a file with other hard links or one owned by another user is refused with an
`UnsafeFileError` whose ``strerror`` says so in a few words; nothing is written through it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
"""Mode of a folder spectui creates for private files."""
FILE_MODE = 0o600
"""Mode of a private file spectui creates."""

_LINK = "it is a symbolic link (refused: nothing is written through a link)"
_WRITE = os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW
# O_NONBLOCK: opening a FIFO someone planted must fail (ENXIO) or return, never hang; it
# changes nothing for a regular file.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class UnsafeFileError(OSError):
    """A path spectui refuses to write through (a symlink, not a regular file, ...)."""


def _refuse(path: Path, why: str) -> UnsafeFileError:
    return UnsafeFileError(errno.EPERM, why, str(path))


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def ensure_private_dir(folder: Path) -> str | None:
    """Create ``folder`` (and its parents) with the leaf owner-only; an existing one is kept.

    Returns a one-line warning when an existing folder is open to other users (group or other
    mode bits, or another owner), else None. OSError when it cannot be made or is not a folder.
    """
    try:
        folder.mkdir(mode=DIR_MODE, parents=True)
        return None
    except FileExistsError:
        pass
    info = folder.stat()  # follows a link: a folder the user linked to is theirs to choose
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(folder, "it is not a folder")
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.geteuid():
        return f"{folder} belongs to another user (uid {info.st_uid}): files there are not private"
    if mode & 0o077:
        return (
            f"{folder} is open to other users (mode {mode:04o}): files there are not private; "
            f"`chmod 700 {folder}` to fix"
        )
    return None


def _checked(fd: int, path: Path) -> int:
    """``fd`` when it is a regular file of ours with no other name; else closed and refused."""
    info = os.fstat(fd)
    why = None
    if not stat.S_ISREG(info.st_mode):
        why = "it is not a regular file"
    elif info.st_nlink > 1:
        why = "it has other hard links"
    elif info.st_uid != os.geteuid():
        why = "it belongs to another user"
    if why is not None:
        os.close(fd)
        raise _refuse(path, why)
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.fchmod(fd, FILE_MODE)
    return fd


def open_new(path: Path) -> int:
    """A new owner-only file at ``path`` (write-only fd). FileExistsError if the name is taken
    by a file; UnsafeFileError if by a symlink (dangling or not)."""
    try:
        return os.open(path, _WRITE | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        if _is_link(path):
            raise _refuse(path, _LINK) from None
        raise


def open_append(path: Path) -> int:
    """``path`` opened for appending (created owner-only when absent); a symlink, FIFO, device,
    hard-linked or foreign file is refused (UnsafeFileError) before a byte is written."""
    try:
        fd = os.open(path, _WRITE | os.O_CREAT | os.O_APPEND | _NONBLOCK, FILE_MODE)
    except OSError as error:
        if error.errno == errno.ELOOP or _is_link(path):
            raise _refuse(path, _LINK) from None
        if error.errno == errno.ENXIO:  # a FIFO with no reader
            raise _refuse(path, "it is not a regular file") from None
        raise
    return _checked(fd, path)


def open_replace(path: Path) -> int:
    """``path`` emptied for rewriting (created when absent), with `open_append`'s refusals;
    the file is emptied only after it passed them."""
    fd = open_append(path)
    os.ftruncate(fd, 0)
    return fd


def open_unique(path: Path) -> tuple[Path, int]:
    """A new owner-only file at ``path``, or at ``<stem>-2<suffix>``, ``-3``, ... when a file
    already holds the name; a symlink at a name is refused, not stepped over."""
    candidate, number = path, 2
    while True:
        try:
            return candidate, open_new(candidate)
        except FileExistsError:
            candidate = path.with_name(f"{path.stem}-{number}{path.suffix}")
            number += 1


def write_new(path: Path, text: str) -> Path:
    """Write ``text`` to a new owner-only file (its folder made 0700); returns the path used
    (``-2``, ... when the name is taken)."""
    ensure_private_dir(path.parent)
    used, fd = open_unique(path)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    return used
