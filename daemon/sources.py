"""The daemon's sources beyond the local disk (mail accounts, network shares): one thread each, which
syncs its source (deskdex.pipeline's SourceSync) at start, then each ``interval`` seconds, and at once
when the server tells of a change (IMAP IDLE, SMB2 CHANGE_NOTIFY) or a client asks (the source_sync op).

A source that cannot be reached, or refuses its login, is a state (``status`` shows it with the
reason and the last good sync), never a crash, and what was indexed from it stays searchable; it is
tried again after a back-off that grows to its interval. Writes take the daemon's write lock, one
document at a time, so files, crawled pages and sources take turns. ``reload()`` (the source_reload
op, after ``deskdex source add`` or ``remove``) starts new sources, and stops removed ones and drops
what was indexed from them.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from deskdex.errors import (BadArgs, ConfigError, DeskdexError, NotConfigured, NotFound, SourceRefused,
                            SourceUnreachable)
from deskdex.pipeline import SourceSync
from deskdex.sources import SourceEntry, load_sources, normalise, open_entry

if TYPE_CHECKING:
    from deskdex.converters import Limits
    from deskdex.index import Collection
    from deskdex.settings import Settings
    from deskdex.sources import RemoteSource

logger = logging.getLogger(__name__)

FIRST_RETRY = 30.0  # seconds before an unreachable source is tried again (doubling up to its interval)
STOP_WAIT = 5.0  # seconds a stopping daemon waits for a sync under way (what it stored is committed)
TIMEOUT = 30.0  # seconds a server may take to answer


class SourceThread:
    """One configured source and the thread that keeps it in sync."""

    def __init__(self, entry: SourceEntry, scheduler: SourceScheduler) -> None:
        self.entry, self.scheduler = entry, scheduler
        self.stop_event = threading.Event()
        self.wake = threading.Event()
        self.synced = threading.Condition()
        self.rounds = 0  # syncs tried, for a client waiting on the next one
        self.state = "starting"  # syncing, ok, unreachable, refused, failed, off
        self.error: str | None = None
        self.last_sync: float | None = None  # when the last complete sync ended
        self.last_report: dict[str, Any] | None = None
        self.documents = 0
        self.source: RemoteSource | None = None
        self.thread = threading.Thread(target=self._loop, name="deskdex-source", daemon=True)

    def to_json(self) -> dict[str, Any]:
        report = self.last_report or {}
        return {"url": self.entry.url, "state": self.state, "error": self.error, "last_sync": self.last_sync,
                "documents": self.documents, "fetched": report.get("fetched", 0), "failed": report.get("failed", 0),
                "failures": report.get("failures", []), "interval": self._interval()}

    def _interval(self) -> float:
        return self.entry.interval or self.scheduler.settings().source_interval

    def stop(self) -> None:
        self.stop_event.set()
        self.kick()

    def kick(self) -> None:
        """Sync now (or as soon as the sync under way ends)."""
        self.wake.set()
        if self.source is not None:
            self.source.interrupt()

    def _loop(self) -> None:
        retry = FIRST_RETRY
        while not self.stop_event.is_set():
            self.wake.clear()
            ok = self._sync_once()
            with self.synced:
                self.rounds += 1
                self.synced.notify_all()
            if self.stop_event.is_set():
                break
            interval = self._interval()
            if ok:
                retry = FIRST_RETRY
                try:
                    self._wait(interval)
                except Exception:  # waiting on the server must never end the thread: sleep instead
                    logger.exception("waiting for changes of %s failed", self.entry.url)
                    self.wake.wait(interval)
            else:
                self.wake.wait(min(retry, interval))
                retry = min(retry * 2, interval)
        if self.source is not None:
            self.source.close()

    def _wait(self, seconds: float) -> None:
        """Until the server tells of a change, a client asks, or ``seconds`` pass."""
        assert self.source is not None
        until = time.monotonic() + seconds
        while not self.stop_event.is_set() and not self.wake.is_set():
            left = until - time.monotonic()
            if left <= 0:
                return
            started = time.monotonic()
            if self.source.wait_for_change(left):
                return
            if time.monotonic() - started < 1.0:  # the source cannot wait (it broke): sleep instead
                self.wake.wait(left)

    def _sync_once(self) -> bool:
        if self.scheduler.paused():
            self.state = "paused"
            return True
        self.state = "syncing"
        try:
            if self.source is None:
                self.source = self.scheduler.open(self.entry)
            settings = self.scheduler.settings()
            sync = SourceSync(self.scheduler.coll, self.scheduler.limits, self.scheduler.lock, self.stop_event,
                              commit_seconds=settings.commit_seconds, overrides=dict(settings.converters))
            report = sync.run(self.source)
        except (SourceUnreachable, SourceRefused) as exc:
            self.state = "unreachable" if isinstance(exc, SourceUnreachable) else "refused"
            self.error = str(exc)
            logger.warning("%s", exc)
            self._count()
            return False
        except NotConfigured as exc:
            self.state, self.error = "off", str(exc)
            logger.error("%s", exc)
            return False
        except DeskdexError as exc:  # the index cannot be written now (a full disk): tried again later
            self.state, self.error = "failed", str(exc)
            logger.warning("sync of %s failed: %s", self.entry.url, exc)
            return False
        except Exception as exc:  # a source must never take the daemon down
            self.state, self.error = "failed", f"{type(exc).__name__}: {exc}"
            logger.exception("sync of %s failed", self.entry.url)
            return False
        self.last_report = report.to_json()
        self.state, self.error = "ok", None
        if report.unlisted_folders:
            self.error = "not listed this time: " + ", ".join(report.unlisted_folders)
        if report.complete:
            self.last_sync = time.time()
        self._count()
        logger.info("synced %s: %d fetched, %d removed, %d failed in %.1f s", self.entry.url, report.fetched,
                    report.removed, sum(report.failed.values()), report.seconds)
        return True

    def _count(self) -> None:
        if self.source is not None:
            with self.scheduler.lock:
                self.documents = self.scheduler.coll.count_under(self.source.prefix, self.source.kind)


class SourceScheduler:
    def __init__(self, config_file: str, coll: Collection, lock: threading.RLock, limits: Limits,
                 settings: Callable[[], Settings], paused: Callable[[], bool], system: bool = False) -> None:
        self.config_file = config_file
        self.system = system  # enterprise mode: each document's readers from the server's rights
        self.coll, self.lock, self.limits = coll, lock, limits
        self.settings, self.paused = settings, paused
        self._guard = threading.Lock()
        self._threads: dict[str, SourceThread] = {}

    def start(self) -> SourceScheduler:
        try:
            self.reload()
        except ConfigError as exc:
            logger.warning("sources not synced: %s", exc)
        return self

    def reload(self) -> list[str]:
        """Read the configured sources again: start new ones (and changed ones again), stop removed
        ones and drop their documents. Answers the configured URLs."""
        entries = {e.url: e for e in load_sources(self.config_file)}
        with self._guard:
            gone = [t for url, t in self._threads.items() if url not in entries or t.entry != entries[url]]
            for t in gone:
                del self._threads[t.entry.url]
                t.stop()
            for url, entry in entries.items():
                if url not in self._threads:
                    thread = self._threads[url] = SourceThread(entry, self)
                    thread.thread.start()
        for t in gone:
            t.thread.join(STOP_WAIT)
            if t.entry.url not in entries:
                self._drop(t)
        return list(entries)

    def open(self, entry: SourceEntry) -> RemoteSource:
        """The source of ``entry`` as this daemon reads it (enterprise mode: with the readers' rights)."""
        return open_entry(entry, self.settings().sid_map, self.system, TIMEOUT)

    def _drop(self, t: SourceThread) -> None:
        """Delete what was indexed from a removed source."""
        try:
            source = t.source or self.open(t.entry)
        except NotConfigured as exc:
            logger.warning("%s removed: what was indexed from it stays (%s)", t.entry.url, exc)
            return
        dropped = SourceSync(self.coll, lock=self.lock).drop(source)
        logger.info("%s removed: %d documents dropped", t.entry.url, dropped)

    def original(self, uri: str) -> tuple[str, bytes]:
        """The name and bytes of a document of a source (a member: of its container) as the server
        holds them now, through a connection of its own (the sync's may be in use)."""
        top = uri.split("#", 1)[0]
        with self._guard:
            thread = next((t for t in self._threads.values() if t.source is not None
                           and top.startswith(t.source.prefix)), None)
        if thread is None:
            raise NotFound(f"no configured source holds {uri}")
        source = self.open(thread.entry)
        try:
            return source.original(top)
        finally:
            source.close()

    def status(self) -> list[dict[str, Any]]:
        with self._guard:
            threads = list(self._threads.values())
        return [t.to_json() for t in threads]

    def sync(self, url: str | None, wait: float) -> list[dict[str, Any]]:
        """Sync ``url`` (None: every source) now; with ``wait``, answer once those syncs ended or
        ``wait`` seconds passed, whichever is first."""
        with self._guard:
            if url is None:
                threads = list(self._threads.values())
            else:
                t = self._threads.get(normalise(url))
                if t is None:
                    raise BadArgs(f"no source {url} (deskdex source list)")
                threads = [t]
        rounds = [(t, t.rounds + (1 if t.state == "syncing" else 0)) for t in threads]
        for t in threads:
            t.kick()
        until = time.monotonic() + wait
        for t, before in rounds:
            with t.synced:
                while t.rounds <= before and (left := until - time.monotonic()) > 0:
                    t.synced.wait(left)
        return [t.to_json() for t in threads]

    def stop(self) -> None:
        with self._guard:
            threads = list(self._threads.values())
            self._threads.clear()
        for t in threads:
            t.stop()
        for t in threads:
            t.thread.join(STOP_WAIT)
            if t.thread.is_alive():
                logger.warning("the sync of %s did not end in %g s: abandoned", t.entry.url, STOP_WAIT)
