"""What the daemon's main thread has to do, handed over by other threads: the watcher's records,
folders to rescan, ``deskdex index`` jobs, ``deskdex retry`` requests, an account change to look at,
and the folders to walk once more after they appeared.

One condition guards it all; the main thread waits on it (daemon/loop.py) and every producer
notifies it, so nothing polls.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Iterable

from deskdex.errors import DeskdexError
from deskdex.pipeline import Changed, Record, Rescan, Summary

# Why a watcher asks for a rescan when it lost events (pipeline/watch.py): said in ``status``.
LOST_EVENTS = ("overflow", "watch_limit", "unwatchable")


class IndexJob:
    """``deskdex index PATH...`` handed to the running daemon: done by the main loop, the one
    writer, between its other work; the socket thread that asked waits for the summary."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.done = threading.Event()
        self.summary: Summary | None = None
        self.error: DeskdexError | None = None


@dataclass
class Batch:
    """Everything the queue held when the main loop took it (``WorkQueue.take``)."""

    records: list[Record] = field(default_factory=list)
    rescans: set[str] = field(default_factory=set)
    jobs: list[IndexJob] = field(default_factory=list)
    retries_asked: list[str | None] = field(default_factory=list)
    relooks: list[Changed] = field(default_factory=list)


class WorkQueue:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._records: list[Record] = []
        self._rescan: set[str] = set()
        self._jobs: list[IndexJob] = []
        self._relook: dict[str, float] = {}  # folders that appeared -> when to walk them once more (monotonic)
        self._retry_asked: list[str | None] = []  # ``deskdex retry [PATH]``s not yet taken up
        self._check_accounts = False

    # -- producers (any thread) ------------------------------------------------------------------
    def add(self, records: Iterable[Record]) -> list[Rescan]:
        """Queue the watcher's records; returns the rescans asked for because events were lost."""
        lost = []
        with self.cond:
            for r in records:
                if isinstance(r, Rescan):
                    self._rescan.add(r.path)
                    if r.reason in LOST_EVENTS:
                        lost.append(r)
                else:
                    self._records.append(r)
            self.cond.notify_all()
        return lost

    def rescan(self, paths: Iterable[str]) -> None:
        with self.cond:
            self._rescan.update(paths)
            self.cond.notify_all()

    def put_back(self, records: Iterable[Record] = (), rescans: Iterable[str] = (),
                 asked: Iterable[str | None] = ()) -> None:
        """Work taken that could not be done (the index cannot be written): first in line again."""
        with self.cond:
            self._records[:0] = list(records)
            self._rescan.update(rescans)
            self._retry_asked[:0] = list(asked)

    def submit(self, job: IndexJob) -> None:
        """Under ``cond``, held by the caller (which looks whether the daemon stops first)."""
        self._jobs.append(job)
        self.cond.notify_all()

    def ask_retry(self, path: str | None) -> None:
        with self.cond:
            self._retry_asked.append(path)
            self.cond.notify_all()

    def ask_accounts_check(self) -> None:
        with self.cond:
            self._check_accounts = True
            self.cond.notify_all()

    def relook_later(self, folders: list[str], after: float) -> None:
        """Walk ``folders`` once more ``after`` seconds from now."""
        with self.cond:
            due = time.monotonic() + after
            self._relook.update((folder, due) for folder in folders)

    # -- the main thread -------------------------------------------------------------------------
    def has_changes(self) -> bool:
        """Changes to index are waiting (what waits for mains power). Under ``cond``."""
        return bool(self._records or self._rescan or self._retry_asked)

    def has_work(self) -> bool:
        """Anything is waiting but jobs (which a pause does not hold back). Under ``cond``."""
        return self.has_changes() or self._check_accounts or self.relook_due()

    def has_jobs(self) -> bool:
        return bool(self._jobs)

    def relook_due(self) -> bool:
        return any(t <= time.monotonic() for t in self._relook.values())

    def next_relook(self) -> float | None:
        """When the next second look is due (monotonic), None without one."""
        return min(self._relook.values()) if self._relook else None

    def take(self) -> Batch:
        """Everything queued, and the second looks that are due, as one batch (an account change
        is taken before, ``take_check_accounts``: what it queues goes with the batch)."""
        with self.cond:
            now = time.monotonic()
            due = sorted(p for p, t in self._relook.items() if t <= now)
            for p in due:
                del self._relook[p]
            batch = Batch(self._records, self._rescan, self._jobs, self._retry_asked, [Changed(p) for p in due])
            self._records, self._rescan, self._jobs, self._retry_asked = [], set(), [], []
            return batch

    def take_check_accounts(self) -> bool:
        """Whether an account change is to be looked at (asked once). Under ``cond``."""
        check, self._check_accounts = self._check_accounts, False
        return check

    def take_records_alone(self) -> list[Record]:
        """The records queued, when nothing else waits that a pass under way would hold up (a
        rescan, a job, a retry, an account change); else none. Under ``cond``."""
        if not self._records or self._rescan or self._jobs or self._retry_asked or self._check_accounts:
            return []
        records, self._records = self._records, []
        return records

    def take_jobs(self) -> list[IndexJob]:
        with self.cond:
            jobs, self._jobs = self._jobs, []
        return jobs

    def __len__(self) -> int:
        """Records, rescans and second looks waiting. Under ``cond``."""
        return len(self._records) + len(self._rescan) + len(self._relook)
