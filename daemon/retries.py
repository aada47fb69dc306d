"""Failures that may pass another time (a timeout, a crash, a memory limit: pipeline/indexer.py),
tried again when their back-off is over: which are due under the watched folders, and when the
daemon's main thread must wake up for the next one."""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from deskdex.errors import StoreError, StoreUnwritable
from deskdex.index import Collection
from deskdex.pipeline import Changed, Record

logger = logging.getLogger(__name__)


class RetrySchedule:
    def __init__(self, coll: Collection, backoff: Callable[[int], float], stalled: Callable[[StoreError], None],
                 note: Callable[[str], None]) -> None:
        """``backoff(n)``: the wait after the n-th failure in a row; ``stalled``: told when the
        index cannot be written; ``note``: told other failures, for ``status``."""
        self.coll = coll
        self.backoff = backoff
        self.stalled = stalled
        self.note = note
        self.next: float | None = None  # the earliest scheduled retry under the folders (epoch s)

    def due(self) -> bool:
        return self.next is not None and self.next <= time.time()

    def wait(self) -> float | None:
        """Seconds until the next retry, at most an hour: a wait's clock stops while the computer
        sleeps, the retry's does not. None without one."""
        return None if self.next is None else min(3600.0, max(0.1, self.next - time.time()))

    def take_due(self, asked: list[str | None], folders: list[str], now: float) -> list[Record] | None:
        """The files under ``folders`` whose failure is to be tried again now (those ``asked``
        for made due first), as changes to apply; None when the index cannot be written (the
        caller keeps ``asked`` for later)."""
        try:
            for path in asked:
                self.coll.retries.retry_now(None if path is None else [path], now)
            scheduled = self.coll.retries.scheduled(folders)
            due: list[Record] = [Changed(path) for _, path, at in scheduled if at <= now]
        except StoreUnwritable as exc:
            self.stalled(exc)
            return None
        except StoreError as exc:
            self.note(f"could not look for failed files to try again: {exc}")
            return []
        if due:
            logger.info("trying %d failed files again", len(due))
        return due

    def schedule(self, folders: list[str], tried: Sequence[Record] = (), started: float = 0.0) -> None:
        """When to wake up for the next retry. A failure still due after a pass that tried it
        (left alone, e.g. excluded) waits its first back-off again, so that nothing spins."""
        if self.coll.failed:
            return  # the work is kept and done again once the index can be written
        tried_paths = {r.path for r in tried if isinstance(r, Changed)}
        try:
            scheduled = self.coll.retries.scheduled(folders)
            nxt: float | None = None
            for uri, path, at in scheduled:
                if at <= started and path in tried_paths:
                    at = started + self.backoff(1)
                    self.coll.retries.set_retry(uri, at)
                nxt = at if nxt is None else min(nxt, at)
            self.coll.commit()
        except StoreUnwritable as exc:
            self.stalled(exc)
            return
        except StoreError as exc:
            self.note(f"could not schedule the next try of failed files: {exc}")
            nxt = None
        self.next = nxt
        if nxt is not None:
            logger.debug("next try of a failed file at %s", time.ctime(nxt))
