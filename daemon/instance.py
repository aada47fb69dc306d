"""One daemon per home: an exclusive lock on a file beside the data, held while the daemon runs.

The kernel drops the lock when the process dies (even by ``kill -9``), so a stale lock file is
never a problem; the pid written in it only makes the message helpful.
"""

from __future__ import annotations

import logging
import os

from deskdex.errors import AlreadyRunning

logger = logging.getLogger(__name__)


class InstanceLock:
    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self._fd: int | None = None

    def acquire(self) -> "InstanceLock":
        """Take the lock or raise ``AlreadyRunning`` naming the holder's pid."""
        import fcntl  # POSIX; Windows would need msvcrt.locking

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise AlreadyRunning(f"a deskdex daemon (pid {holder}) already runs for this home "
                                 f"({os.path.dirname(self.path)}); stop it first, or use --home") from None
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock; the file stays, harmless
            self._fd = None

    def __enter__(self) -> "InstanceLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
