"""What a failure of the store means, in deskdex's terms: sqlite3, tantivy and OS errors
translated into the StoreError tree (deskdex.errors), with a message that says what to do.

SQLite names the cause by its result code, the OS by errno. tantivy raises ValueError and names
the cause only in its text ("No space left on device (os error 28)", "code: 30"), and sometimes
not at all: a writer whose thread died says "An index writer was killed", whatever killed it.
Then the file system holding the store is asked: mounted read-only, or out of space.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
from contextlib import contextmanager
from typing import Iterator

from deskdex.errors import DiskFull, StoreError, StoreLocked, StoreReadOnly, StoreUnwritable

# With less free space than this, a failed write that names no cause is put down to a full disk:
# a segment tantivy writes at a commit can be this big (its writer's heap is 64 MB).
LOW_SPACE = 16 * 2**20

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}
_TANTIVY_ERRNO = re.compile(r"\(os error (\d+)\)|\bcode: (\d+)")

# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_FULL = {sqlite3.SQLITE_FULL}
_SQLITE_LOCKED = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_SQLITE_READ_ONLY = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH}
_SQLITE_IO = {sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN}
_SQLITE_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


def unwritable(kind: type[StoreUnwritable], where: str, detail: str = "") -> StoreUnwritable:
    """The error for a condition outside deskdex, saying what to do about it."""
    because = f" ({detail})" if detail else ""
    if issubclass(kind, DiskFull):
        text = f"no space left on the device holding {where}{because}: free some space"
    elif issubclass(kind, StoreReadOnly):
        text = f"{where} cannot be written, its file system or files are read-only{because}: make it writable again"
    elif issubclass(kind, StoreLocked):
        text = f"another program holds a lock on {where}{because}: let it finish or end it"
    else:
        text = f"cannot write to {where}{because}: check the device"
    return kind(text + "; a running daemon resumes indexing by itself")


def from_errno(code: int | None, where: str, detail: str) -> StoreError:
    """An OS error number met while writing ``where``."""
    if code in _FULL:
        return unwritable(DiskFull, where, detail)
    if code in _READ_ONLY:
        return unwritable(StoreReadOnly, where, detail)
    return from_file_system(where, detail)


def from_file_system(where: str, detail: str) -> StoreError:
    """A write failed without a cause we can read: ask the file system holding ``where``."""
    try:
        st = os.statvfs(where if os.path.exists(where) else os.path.dirname(where))
    except OSError:
        return unwritable(StoreUnwritable, where, detail)
    if st.f_flag & os.ST_RDONLY:
        return unwritable(StoreReadOnly, where, detail)
    if st.f_bavail * st.f_frsize < LOW_SPACE:
        return unwritable(DiskFull, where, detail)
    return StoreError(f"cannot write to {where}: {detail}")


def from_os(exc: OSError, where: str) -> StoreError:
    return from_errno(exc.errno, where, exc.strerror or str(exc))


def from_sqlite(exc: sqlite3.Error, where: str) -> StoreError | None:
    """None for an error of the sqlite3 module itself (a closed connection, a wrong number of
    parameters): a bug of ours, left as it is."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    primary = code & 0xFF
    if primary in _SQLITE_FULL:
        return unwritable(DiskFull, where, str(exc))
    if primary in _SQLITE_LOCKED:
        return unwritable(StoreLocked, where, str(exc))
    if primary in _SQLITE_READ_ONLY:
        return unwritable(StoreReadOnly, where, str(exc))
    if primary in _SQLITE_IO:
        return from_file_system(where, f"{exc} ({exc.sqlite_errorname})")
    if primary in _SQLITE_DAMAGED:
        return StoreError(f"the catalog {where} is damaged ({exc}): move it away and index again")
    return StoreError(f"catalog error in {where}: {exc}")


def from_tantivy(exc: ValueError, where: str) -> StoreError:
    found = _TANTIVY_ERRNO.search(str(exc))
    code = int(found.group(1) or found.group(2)) if found else None
    return from_errno(code, where, str(exc))


def translate(exc: Exception, where: str) -> StoreError | None:
    """The StoreError for a library error raised while working on the store at ``where``; None
    when it is not the store's (a bug, which must show as one)."""
    if isinstance(exc, sqlite3.Error):
        return from_sqlite(exc, where)
    if isinstance(exc, OSError):
        return from_os(exc, where)
    if isinstance(exc, ValueError):  # only tantivy's calls are wrapped where a ValueError can come
        return from_tantivy(exc, where)
    return None


@contextmanager
def translated(where: str) -> Iterator[None]:
    """Library errors inside become StoreErrors (``raise ... from``): wrap calls into sqlite3,
    tantivy or the OS that work on the store at ``where``, and nothing else."""
    try:
        yield
    except (sqlite3.Error, OSError, ValueError) as exc:
        error = translate(exc, where)
        if error is None:
            raise
        raise error from exc
