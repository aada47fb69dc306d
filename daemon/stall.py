"""An index that cannot be written (a full disk, a lock another program holds on the catalog, a
read-only file system): why, and how long the daemon waits before it tries again (1 s, doubled
after each failure up to a minute)."""

from __future__ import annotations

import threading

from deskdex.errors import StoreError

# Seconds before trying a store that cannot be written again: the first wait, doubled after each
# failure up to the last.
RETRY_FIRST = 1.0
RETRY_MOST = 60.0


class Stall:
    def __init__(self) -> None:
        self.error: StoreError | None = None  # why the index cannot be written now (no traceback kept)
        self.retry_in = 0.0  # back-off before the next try; 0 while the index can be written

    def failed(self, exc: StoreError) -> bool:
        """The index could not be written: wait longer than last time. True for the first failure
        since the index was last written."""
        first = not self.retry_in
        self.retry_in = RETRY_FIRST if first else min(RETRY_MOST, self.retry_in * 2)
        self.error = type(exc)(str(exc))
        return first

    def written(self) -> None:
        """The index was written: the next stall starts with a short wait again."""
        self.retry_in = 0.0

    def wait(self, stop: threading.Event) -> bool:
        """Wait out the back-off; False when ``stop`` was set meanwhile."""
        return not (self.retry_in and stop.wait(self.retry_in))

    def over(self) -> StoreError | None:
        """The index can be written again: the stall that ended, if there was one."""
        error, self.error = self.error, None
        return error
