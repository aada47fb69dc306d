"""One writer per home at a time: an exclusive lock file that a second writer fails on at once with
IndexBusy, naming the process that holds it. Readers never lock."""

from __future__ import annotations

import fcntl
import os

from deskdex.errors import IndexBusy

from .storeerrors import translated

LOCK = "writer.lock"


class WriterLock:
    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self._fd: int | None = None

    def acquire(self) -> None:
        with translated(self.data_dir):
            fd = os.open(os.path.join(self.data_dir, LOCK), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise IndexBusy(f"another deskdex process (pid {holder}) is writing to {self.data_dir}; "
                            "wait for it to finish or stop it") from None
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:
            pass  # only says who holds the lock (a full disk may refuse it): the lock is what counts

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
