"""The kernel's inotify interface (Linux), in plain code: ``inotify_init1``, ``inotify_add_watch`` and
``inotify_rm_watch`` through ctypes, and the ``struct inotify_event`` records read from the
descriptor. Nothing of watchdog's: its private inotify classes changed under us twice.

``Inotify.read`` sleeps in poll() on the descriptor and on an eventfd that ``wake`` writes, with no
timeout unless one is asked for, so a reader thread never wakes while nothing happens. Names are
the kernel's bytes (a name that is not UTF-8 stays exact); callers decode them with os.fsdecode.

Two users: pipeline/treewatch.py (recursive watches of every watched folder on one descriptor) and
``FolderWatch`` below (a few named files in one folder: the config file, /etc/passwd).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import select
import struct
import sys
import threading
from dataclasses import dataclass
from typing import Callable, Iterable

logger = logging.getLogger(__name__)

# <sys/inotify.h>
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
IN_CLOEXEC = os.O_CLOEXEC
IN_NONBLOCK = os.O_NONBLOCK

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (of the NUL-padded name that follows)
_READ_SIZE = 256 * 1024  # whole events only: the kernel returns as many as fit


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One ``struct inotify_event``: ``wd`` -1 for a queue overflow; ``name`` empty for an event of
    the watched folder itself."""

    wd: int
    mask: int
    cookie: int
    name: bytes

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & IN_ISDIR)


def parse(buf: bytes) -> list[RawEvent]:
    """The events in what one read() of an inotify descriptor returned."""
    out = []
    i = 0
    while i + _HEADER.size <= len(buf):
        wd, mask, cookie, length = _HEADER.unpack_from(buf, i)
        start = i + _HEADER.size
        out.append(RawEvent(wd, mask, cookie, buf[start:start + length].split(b"\0", 1)[0]))
        i = start + length
    return out


class _Libc:
    """The three calls, looked up once on first use (importing this module anywhere costs nothing)."""

    _lib: ctypes.CDLL | None = None

    @classmethod
    def get(cls) -> ctypes.CDLL:
        if cls._lib is None:
            lib = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter already uses
            try:
                lib.inotify_init1.argtypes = [ctypes.c_int]
                lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
                lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
            except AttributeError as exc:
                raise OSError(errno.ENOSYS, f"no inotify on this system ({sys.platform})") from exc
            for f in (lib.inotify_init1, lib.inotify_add_watch, lib.inotify_rm_watch):
                f.restype = ctypes.c_int
            cls._lib = lib
        return cls._lib


def _check(result: int, what: str) -> int:
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def available() -> bool:
    """Whether this system has inotify (Linux)."""
    try:
        _Libc.get()
    except OSError:
        return False
    return True


class Inotify:
    """One inotify instance. OSError (EMFILE) past the system's limit of instances per user."""

    def __init__(self) -> None:
        lib = _Libc.get()
        self.fd = _check(lib.inotify_init1(IN_CLOEXEC | IN_NONBLOCK), "inotify_init1")
        self._wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._poll = select.poll()
        self._poll.register(self.fd, select.POLLIN)
        self._poll.register(self._wake, select.POLLIN)

    def add_watch(self, path: str, mask: int) -> int:
        """Watch ``path`` (the same watch descriptor again for a folder watched already). OSError
        with the kernel's errno: ENOSPC past the watch limit, ENOENT for a path gone, ENOTDIR..."""
        return _check(_Libc.get().inotify_add_watch(self.fd, os.fsencode(path), mask), f"inotify_add_watch {path!r}")

    def rm_watch(self, wd: int) -> None:
        """Remove a watch; one the kernel removed already (its IN_IGNORED is on the way) is no error."""
        try:
            _check(_Libc.get().inotify_rm_watch(self.fd, wd), "inotify_rm_watch")
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise

    def read(self, timeout: float | None = None) -> list[RawEvent] | None:
        """The events queued, waiting for some up to ``timeout`` seconds (None: as long as it takes);
        [] when the time is up; None once ``wake`` was called (for good: the reader should end)."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000) + 1)
        while True:
            ready = {fd for fd, _ in self._poll.poll(ms)}
            if self._wake in ready:
                return None
            if not ready:
                return []
            try:
                return parse(os.read(self.fd, _READ_SIZE))
            except BlockingIOError:  # another reader took them (not ours), or a spurious wakeup
                continue

    def wake(self) -> None:
        """Make ``read`` return None, now and from then on (it never reads the eventfd back)."""
        os.eventfd_write(self._wake, 1)

    def close(self) -> None:
        """Close the descriptor (the kernel drops every watch); call once the reader has ended."""
        for fd in (self.fd, self._wake):
            try:
                os.close(fd)
            except OSError:
                pass


class FolderWatch:
    """Files named ``names`` in one folder (not below it), followed on a thread of its own:
    ``on_change()`` whenever one is written, made, replaced, renamed or removed, or events were
    lost; ``on_gone()`` once if the folder itself goes. For the config file and the account files,
    which editors and useradd replace by a rename rather than write in place.

    OSError from ``start`` when no inotify instance or watch can be had."""

    MASK = (IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF
            | IN_MOVE_SELF | IN_ONLYDIR)

    def __init__(self, folder: str, names: Iterable[str], on_change: Callable[[], None],
                 on_gone: Callable[[], None] | None = None, name: str = "deskdex-folderwatch") -> None:
        self.folder = folder
        self._names = {os.fsencode(n) for n in names}
        self._on_change = on_change
        self._on_gone = on_gone
        self._inotify: Inotify | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> FolderWatch:
        inotify = Inotify()
        try:
            inotify.add_watch(self.folder, self.MASK)
        except OSError:
            inotify.close()
            raise
        self._inotify = inotify
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._inotify is None:
            return
        self._inotify.wake()
        if self._thread.is_alive():
            self._thread.join()
        self._inotify.close()
        self._inotify = None

    def _run(self) -> None:
        assert self._inotify is not None
        gone = False
        while (events := self._inotify.read()) is not None:
            changed = False
            for e in events:
                if e.mask & IN_Q_OVERFLOW or e.name in self._names:
                    changed = True
                elif e.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) and not gone:
                    gone = changed = True  # the file went with its folder
                    if self._on_gone is not None:
                        self._call(self._on_gone)
            if changed:
                self._call(self._on_change)

    @staticmethod
    def _call(callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:  # the callback's bug must not end the watch
            logger.exception("folder watch callback failed")
