"""A worker with the setting ``folders`` opens a file a task names beneath them, following no link.

Whoever can write to the broker names the paths a worker reads, and whoever can write to the share
can change a path between any check of it and its opening: a folder of the path swapped for a
symbolic link to a file only the worker's account may read would have its text sent back. So the
worker never checks a path and opens it later: it opens the file from a descriptor of the folder it
lies under, with Linux's openat2 (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: the kernel refuses any
symbolic link and any way out on the way), else component by component with O_NOFOLLOW |
O_DIRECTORY; it checks on the open descriptor that it is a regular file, and the converter reads
that descriptor (``/proc/PID/fd/N``), not the path."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections.abc import Sequence

from deskdex.converters import Source, check_regular, unreadable
from deskdex.errors import UnreadableFile
from deskdex.paths import display_path

# openat2(2), Linux 5.6: the same number on every architecture (the unified syscall table).
_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY  # as open_regular: a FIFO never blocks


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Syscall:
    """openat2 through libc's syscall(), or None where there is none (not Linux)."""

    def __init__(self) -> None:
        self.usable = platform.system() == "Linux"
        self._call = None
        if self.usable:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                self._call = libc.syscall
                self._call.restype = ctypes.c_long
            except (OSError, AttributeError):
                self.usable = False

    def openat2(self, dir_fd: int, rel: str) -> int:
        """The descriptor, or raises OSError (ENOSYS: no openat2 here, or a filter forbids it)."""
        assert self._call is not None
        how = _OpenHow(_FLAGS, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
        fd = int(self._call(_OPENAT2, dir_fd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how)))
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return fd


_SYSCALL = _Syscall()


def open_beneath(roots: Sequence[str], path: str, use_openat2: bool = True) -> int:
    """A descriptor of the regular file ``path``, opened beneath the first of ``roots`` (folders,
    trusted as configured) it lies under, no symbolic link followed below the root. Raises
    UnreadableFile saying why it was refused (outside the folders, a link on the way, not a
    regular file, gone, permission denied). ``use_openat2=False``: the walk of O_NOFOLLOW opens
    that stands in where the kernel has no openat2 (tested on its own)."""
    shown = display_path(path)
    if not os.path.isabs(path) or os.path.normpath(path) != path or path.startswith("//"):
        raise UnreadableFile(f"not an absolute path without . or ..: {shown}")
    root = next((r for r in roots if path == r or path.startswith(r.rstrip("/") + "/")), None)
    if root is None:
        raise UnreadableFile(f"outside the folders this worker converts (its setting folders): {shown}")
    rel = path[len(root):].lstrip("/") or "."
    try:
        dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise unreadable(root, exc) from exc
    try:
        fd = _open(dir_fd, rel, path, use_openat2)
    finally:
        os.close(dir_fd)
    try:
        check_regular(path, os.fstat(fd))  # NotRegular: a FIFO, a device, a folder...
        os.set_blocking(fd, True)  # a regular file: reads never block on O_NONBLOCK anyway
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open(dir_fd: int, rel: str, path: str, use_openat2: bool) -> int:
    if use_openat2 and _SYSCALL.usable:
        try:
            return _SYSCALL.openat2(dir_fd, rel)
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter (containers)
                raise _refusal(path, exc) from exc
    return _walk(dir_fd, rel, path)


def _walk(dir_fd: int, rel: str, path: str) -> int:
    """openat2's stand-in: each folder of ``rel`` opened from the last with O_NOFOLLOW |
    O_DIRECTORY, the file with O_NOFOLLOW, so that no component can be a link."""
    parts = rel.split("/")
    if ".." in parts:
        raise UnreadableFile(f"outside the folders this worker converts (its setting folders): {display_path(path)}")
    fd = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], _FLAGS | os.O_NOFOLLOW, dir_fd=fd)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    finally:
        os.close(fd)


def _refusal(path: str, exc: OSError) -> UnreadableFile:
    shown = display_path(path)
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        # ELOOP: a link (openat2, or the file itself in the walk); ENOTDIR: O_DIRECTORY | O_NOFOLLOW
        # on a link to a folder in the walk, or a file where a folder should be.
        return UnreadableFile("not opened: a symbolic link (or a file in place of a folder) on its path; a worker "
                              f"with the setting folders follows no link beneath them: {shown}")
    if exc.errno == errno.EXDEV:
        return UnreadableFile(f"outside the folders this worker converts (its setting folders): {shown}")
    return unreadable(path, exc)


def descriptor_source(source: Source, fd: int, limit: int) -> Source:
    """``source`` to be converted from the open descriptor ``fd`` of this process, not its path: the
    converter process reopens the very file through /proc (its name, URI, MIME hint and depth kept).
    Without /proc, its bytes are read here (up to ``limit`` + 1: past the limit is refused anyway)."""
    proc = f"/proc/{os.getpid()}/fd/{fd}"
    if os.path.exists(proc):
        return Source(uri=source.uri, name=source.name, path=proc, mime=source.mime, depth=source.depth)
    data = bytearray()
    while len(data) <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - len(data)))):
        data += chunk
    return Source(uri=source.uri, name=source.name, data=bytes(data), mime=source.mime, depth=source.depth)
