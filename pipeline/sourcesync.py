"""Bringing the index in line with a source beyond the local disk (deskdex.sources): a mail account, a
network share. Each folder is compared with what the catalog holds under its prefix: what is gone is
deleted, what is new (or, where items can change, of another size or mtime) is fetched, converted in
an isolated worker like a local file (a message's attachments become its members) and stored.

The catalog is the only state: a sync killed at any moment starts over from what was committed,
fetching again only what is not there, and a URI is one row, so nothing is ever stored twice. A
folder's stamp (deskdex.sources' Folder) is kept with the rows, in the same commit, once the whole
folder is in: an unchanged folder is then not even listed. A server that cannot be reached stops
the sync with SourceUnreachable and deletes nothing: what was indexed from it stays searchable.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ContextManager, Iterator

from deskdex.converters import Limits, Source, WorkerPool
from deskdex.errors import ConversionError
from deskdex.index import Access, Row, bytes_checksum

if TYPE_CHECKING:
    from deskdex.converters import Outcome
    from deskdex.index import Collection
    from deskdex.sources import Folder, Item, RemoteSource

logger = logging.getLogger(__name__)

FAILURES_KEPT = 100  # failures a report lists (all are counted)


@dataclass
class SyncReport:
    """What one sync of a source did."""

    url: str
    folders: int = 0
    unchanged_folders: int = 0  # their stamp said nothing changed: not listed
    unlisted_folders: list[str] = field(default_factory=list)  # could not be listed now: kept as they were
    fetched: int = 0
    bytes: int = 0
    stored: int = 0
    members: int = 0
    removed: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (uri, reason, message)
    complete: bool = False  # every folder looked at, nothing stopped it
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "folders": self.folders, "unchanged_folders": self.unchanged_folders,
                "unlisted_folders": self.unlisted_folders, "fetched": self.fetched, "bytes": self.bytes,
                "stored": self.stored, "members": self.members, "removed": self.removed,
                "failed": sum(self.failed.values()), "failed_by_reason": dict(self.failed),
                "failures": [{"uri": u, "reason": r, "message": m} for u, r, m in self.failures],
                "complete": self.complete, "seconds": round(self.seconds, 3)}


class SourceSync:
    """Syncs sources into ``coll``; every write under ``lock`` (the daemon's write lock: file changes,
    crawled pages and sources take turns), commits every ``commit_every`` documents or ``commit_seconds``."""

    def __init__(self, coll: Collection, limits: Limits = Limits(), lock: ContextManager[Any] | None = None,
                 stop: threading.Event | None = None, commit_every: int = 500, commit_seconds: float = 30.0,
                 workers: int = 1, overrides: dict[str, str] | None = None) -> None:
        self.coll, self.limits = coll, limits
        self.overrides = overrides  # the setting converters, as for files
        self.workers = workers  # converter processes (the daemon's sync: one, beside its files' own)
        self.lock: ContextManager[Any] = lock if lock is not None else contextlib.nullcontext()
        self.stop = stop or threading.Event()
        self.commit_every, self.commit_seconds = commit_every, commit_seconds
        self._since_commit = 0
        self._last_commit = time.monotonic()

    def run(self, source: RemoteSource) -> SyncReport:
        """One sync of ``source``. Raises SourceUnreachable or SourceRefused (after committing what
        was stored); the report of a sync stopped by ``stop`` is not ``complete``."""
        report = SyncReport(source.url)
        started = time.monotonic()
        seen: list[Folder] = []
        # As files are: the user's converters, and each text's duplicate features made in the worker.
        pool = WorkerPool(self.workers, self.limits, idle=True, overrides=self.overrides,
                          enrich="deskdex.index.features:enrich")
        try:
            for folder in source.folders():
                if self.stop.is_set():
                    break
                seen.append(folder)
                report.folders += 1
                self._folder(source, folder, pool, report)
            else:
                if not self.stop.is_set():
                    self._forget_others(source, seen, report)
                    report.complete = True
        finally:
            pool.close()
            with self.lock:
                self.coll.commit()
            report.seconds = time.monotonic() - started
        return report

    def drop(self, source: RemoteSource) -> int:
        """Delete everything indexed from ``source`` (it was removed) with its folders' stamps, and
        commit: how many documents went (their members with them)."""
        with self.lock:
            uris = [uri for uri, *_ in self.coll.under(source.prefix, source.kind)]
            for uri in uris:
                self.coll.delete(uri)
            self.coll.set_meta(_stamps_key(source), None)  # added again, every folder is listed again
            self.coll.commit()
        return len(uris)

    # -- a folder ----------------------------------------------------------------------------------
    def _folder(self, source: RemoteSource, folder: Folder, pool: WorkerPool, report: SyncReport) -> None:
        stamps = self._stamps(source)
        if folder.stamp is not None and stamps.get(folder.prefix) == folder.stamp:
            report.unchanged_folders += 1
            return
        items = source.items(folder)
        if items is None:
            report.unlisted_folders.append(folder.name)
            return
        with self.lock:
            known = {uri: (size, mtime) for uri, _path, size, mtime in self.coll.under(folder.prefix, source.kind)
                     if not folder.flat or "/" not in uri[len(folder.prefix):]}  # a flat folder's: its direct items
        present = {i.uri for i in items}
        gone = [uri for uri in known if uri not in present]
        if gone:
            with self.lock:
                for uri in gone:
                    self.coll.delete(uri)
                    self._tick()
            report.removed += len(gone)
        todo = [i for i in items
                if i.uri not in known or i.size is not None and (i.size, i.mtime) != known[i.uri]]
        if todo:
            self._bring(source, folder, todo, pool, report)
        if folder.stamp is not None and not self.stop.is_set():
            with self.lock:
                stamps = self._stamps(source)
                stamps[folder.prefix] = folder.stamp
                self.coll.set_meta(_stamps_key(source), json.dumps(stamps))

    def _forget_others(self, source: RemoteSource, seen: list[Folder], report: SyncReport) -> None:
        """Delete what was indexed under folders the listing no longer has (or of an old UIDVALIDITY)."""
        flat = {f.prefix for f in seen if f.flat}  # a URI is a flat folder's when its own folder part is its prefix
        deep = [f.prefix for f in seen if not f.flat]
        with self.lock:
            gone = [uri for uri, *_ in self.coll.under(source.prefix, source.kind)
                    if uri[:uri.rfind("/") + 1] not in flat and not any(uri.startswith(p) for p in deep)]
            for uri in gone:
                self.coll.delete(uri)
                self._tick()
            stamps = self._stamps(source)
            prefixes = {f.prefix for f in seen}
            if set(stamps) - prefixes:
                self.coll.set_meta(_stamps_key(source), json.dumps({p: s for p, s in stamps.items() if p in prefixes}))
        report.removed += len(gone)

    def _stamps(self, source: RemoteSource) -> dict[str, str]:
        raw = self.coll.meta(_stamps_key(source))
        return json.loads(raw) if raw else {}

    # -- fetching, converting, storing --------------------------------------------------------------
    def _bring(self, source: RemoteSource, folder: Folder, todo: list[Item], pool: WorkerPool,
               report: SyncReport) -> None:
        fetched: dict[str, tuple[Item, str]] = {}

        def sources() -> Iterator[Source]:
            for item, data in source.fetch(folder, todo, self.limits.file_bytes):
                if self.stop.is_set():
                    return
                if data is None:
                    continue  # gone since it was listed: the next sync forgets it
                if isinstance(data, ConversionError):
                    with self.lock:
                        self._fail(source, item, item.uri, None, data.reason, str(data), report)
                    continue
                report.fetched += 1
                report.bytes += len(data)
                fetched[item.uri] = (item, bytes_checksum(data))
                yield Source(uri=item.uri, name=item.name, data=data, mime=item.mime)

        for src, outcomes in pool.map(sources(), stop=self.stop):
            item, raw = fetched.pop(src.uri)
            with self.lock:
                self._store(source, item, raw, outcomes, report)

    def _store(self, source: RemoteSource, item: Item, raw: str, outcomes: list[Outcome], report: SyncReport) -> None:
        for child in self.coll.descendants(item.uri):  # members are derived again from scratch
            self.coll.delete(child)
        for i, o in enumerate(outcomes):
            parent = None if i == 0 else o.uri.rsplit("#", 1)[0]
            if o.document is None:
                self._fail(source, item, o.uri, parent, o.reason, o.message, report)
                continue
            row = Row(uri=o.uri, parent=parent, path=item.display + o.uri[len(item.uri):], source=source.kind,
                      size=(item.size or 0) if i == 0 else 0, mtime=item.mtime or 0.0, raw_sum=raw if i == 0 else None,
                      readers=_readers(item))
            self.coll.put(row, o.document, o.extra.get("features"))
            if i == 0:
                report.stored += 1
            else:
                report.members += 1
            self._tick()

    def _fail(self, source: RemoteSource, item: Item, uri: str, parent: str | None, reason: str, message: str,
              report: SyncReport) -> None:
        """A failed row: the item is not fetched again until it changes (an IMAP message: never)."""
        logger.warning("%s: %s (%s)", uri, message, reason)
        report.failed[reason] += 1
        if len(report.failures) < FAILURES_KEPT:
            report.failures.append((uri, reason, message))
        row = Row(uri=uri, parent=parent, path=item.display + uri[len(item.uri):], source=source.kind,
                  size=item.size or 0, mtime=item.mtime or 0.0, status="failed", reason=reason, error=message,
                  title=item.name, readers=_readers(item))
        self.coll.put(row, None)
        self._tick()

    def _tick(self) -> None:
        self._since_commit += 1
        if self._since_commit >= self.commit_every or time.monotonic() - self._last_commit >= self.commit_seconds:
            self.coll.commit()
            self._since_commit = 0
            self._last_commit = time.monotonic()


def _readers(item: Item) -> str | None:
    """The catalog's ``readers`` of an item whose source told who may read it (enterprise mode)."""
    return Access(-1, item.readers, item.everyone).to_json() if item.readers is not None else None


def _stamps_key(source: RemoteSource) -> str:
    return "source-stamps:" + source.prefix
