"""Read-only views of the index for the socket server's threads: one per search that may run at
once and one more. Each is used by one thread at a time (its catalog connection is not shared),
and a search on one never waits for another, however long that one takes."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from deskdex.index import Collection


class ViewPool:
    def __init__(self, data_dir: str, size: int) -> None:
        self._views = [Collection.open(data_dir) for _ in range(size)]
        self._free = list(self._views)
        self._cond = threading.Condition()

    @contextmanager
    def view(self) -> Iterator[Collection]:
        """A view of the index, the caller's alone until it is done (waits for one to be free)."""
        with self._cond:
            self._cond.wait_for(lambda: self._free)
            view = self._free.pop()
        try:
            yield view
        finally:
            with self._cond:
                self._free.append(view)
                self._cond.notify()

    @property
    def suspended(self) -> bool:
        """Whether every view has let go of tantivy."""
        return all(view.suspended for view in self._views)

    def suspend(self) -> None:
        """Let the free views go of tantivy; those in use are let go of next time: the caller (the
        main thread) never waits for a search."""
        with self._cond:
            for view in self._free:
                view.suspend()

    def close(self) -> None:
        for view in self._views:
            view.close()
