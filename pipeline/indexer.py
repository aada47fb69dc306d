"""Bring the index in line with a set of files and folders: convert what changed, reuse what
only moved, remove what is gone. The one place where sources, converters and index meet.

A failure that may not happen again (errors.TRANSIENT_REASONS: a timeout on a busy machine, a
crash, a memory limit) is tried again even though the file did not change: after a back-off (the
setting ``retry_first``, doubled after each failure up to a day), at once when deskdex or its
limits changed, and when asked (``deskdex retry``). Other failures wait for the file to change.

Fair (pipeline/turns.py): files are handed to the converters in turns by lane (enterprise mode:
by account), each when the pool has room for its account (``WorkerPool.has_room``), so one
account's slow files hold up no one else's. The daemon's passes take in changes while they
convert (``update``'s ``intake``): a file saved while slow files convert does not wait for them,
and what is stored is committed once no result has come for SETTLE seconds, not only every
``commit_seconds``."""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Hashable, Iterable, Iterator, cast

from deskdex.converters import (
    FORMATS_BASE, Document, Limits, Outcome, Registry, RunAs, Source, WorkerPool, as_user, compound_extension,
    extension, ocr_unavailable as unavailable, open_regular, uri_to_path,
)
from deskdex.errors import TRANSIENT_REASONS, ConfigError, ConversionError, Interrupted, NotRegular, SizeLimit, Vanished
from deskdex.index import Collection, Row, raw_checksum_of, sampled_checksum_of
from deskdex.paths import at_or_under, display_path, path_to_uri

from .progress import Progress, with_bar
from .scan import Excluder, FileInfo, walk
from .turns import FairQueue

if TYPE_CHECKING:
    from deskdex.cluster import RemotePool
    from deskdex.converters import Wakeup
    from deskdex.settings import Config

logger = logging.getLogger(__name__)


@dataclass
class Summary:
    indexed: int = 0  # converted (or re-converted) files
    reused: int = 0  # new or moved files whose bytes were known: no conversion
    unchanged: int = 0
    removed: int = 0
    members: int = 0  # documents found inside compound files
    failed: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (path, reason, message)
    seconds: float = 0.0
    bytes: int = 0

    def to_json(self) -> dict[str, object]:
        return {"indexed": self.indexed, "reused": self.reused, "unchanged": self.unchanged,
                "removed": self.removed, "members": self.members, "failed": sum(self.failed.values()),
                "failed_by_reason": dict(self.failed), "seconds": round(self.seconds, 3), "bytes": self.bytes,
                "failures": [{"path": p, "reason": r, "message": m} for p, r, m in self.failures]}


# (path, descriptor open there or None) -> (owner uid, readers JSON), see index/access.py
AccessOf = Callable[[str, "int | None"], "tuple[int, str] | None"]
RunAsOf = Callable[[str], RunAs]  # path -> the account whose rights read it (enterprise mode)

RETRY_MOST = 86400.0  # the longest back-off before a transient failure is tried again: a day

# Changes taken in while a pass converts (``Indexer.update``): the files to look at, and the paths
# the changes moved or deleted (a file out for conversion at or under one has its result dropped;
# the path was looked at again).
Intake = Callable[[], "tuple[list[FileInfo], list[str]]"]

# While conversions go on, what is stored is committed once no result came for SETTLE seconds
# (what is left converts slowly), at most every COMMIT_GAP seconds.
SETTLE = 0.5
COMMIT_GAP = 1.0


class Indexer:
    def __init__(self, coll: Collection, limits: Limits = Limits(), workers: int = 2, idle: bool = False,
                 commit_every: int = 1000, commit_seconds: float = 30.0,
                 stop: threading.Event | None = None, overrides: dict[str, str] | None = None,
                 retry_first: float = 60.0, broker: str = "", redelivery: float = 300.0) -> None:
        self.coll = coll
        self.limits = limits
        self.workers = workers
        self.idle = idle
        self.commit_every = commit_every
        self.commit_seconds = commit_seconds
        self._last_commit = time.monotonic()
        self._last_stored = 0.0  # when the last conversion's result was stored (monotonic)
        self._raw: dict[str, str] = {}  # raw checksum of each file out for conversion
        self._stored_bytes = 0  # bytes of files stored since the heap was last trimmed
        # Files that wait for a conversion under way: of the same path (changed again since), or
        # of the same bytes under another name (a copy, which then reuses its text); with their
        # lane and, for a copy, those bytes' checksum.
        self._deferred: list[tuple[FileInfo, Hashable, str | None]] = []
        self._lanes: dict[str, Hashable] = {}  # lane of each file out for conversion (pipeline/turns.py)
        self._stale: set[str] = set()  # files out for conversion that a change taken in named since
        self._pool: WorkerPool | RemotePool | None = None
        # Setting ``broker``: files are converted by ``deskdex worker`` processes through it
        # (deskdex.cluster); everything else stays here.
        self.broker = broker
        self.redelivery = redelivery
        self.converted = 0  # files converted since start (a move or rename must not add to it)
        self.stop = stop  # set by another thread: finish the file at hand, commit, raise Interrupted
        self.overrides = overrides  # the setting ``converters``: MIME type -> "module:function"
        self._registry = Registry(overrides=overrides)  # which files are read by their headers only
        self.retry_first = retry_first  # seconds before a transient failure is first tried again
        self._made_by_checked = False
        # Enterprise mode: who may read each file, stamped on its rows (members inherit it).
        # Unchanged files are looked at again on every pass, so permission changes are caught
        # without converting anything.
        self.access: AccessOf | None = None
        self._access: dict[str, tuple[int, str] | None] = {}
        # Enterprise mode: every read of a file is made with the rights of the account whose home
        # holds it, never root's (deskdex.converters.privilege), symlinks not followed.
        self.run_as: RunAsOf | None = None
        # Called with each file's path just before it is first read: tests swap a file for a FIFO
        # here, to check the time-of-check to time-of-use case without racing.
        self.before_read: Callable[[str], None] | None = None
        self._generation = 0  # of the changes taken in (see _lane)

    @classmethod
    def from_settings(cls, coll: Collection, cfg: Config, workers: int, idle: bool,
                      stop: threading.Event | None = None) -> Indexer:
        """An indexer with ``cfg``'s limits, converters, commit batches, retry back-off and broker."""
        s = cfg.settings
        return cls(coll, Limits.from_settings(cfg), workers=workers, idle=idle, commit_every=s.commit_every,
                   commit_seconds=s.commit_seconds, stop=stop, overrides=dict(s.converters),
                   retry_first=s.retry_first, broker=s.broker, redelivery=s.redelivery)

    def scan(self, roots: Iterable[str], excludes: Iterable[str] = ()) -> list[FileInfo]:
        excluder = Excluder(excludes)
        return [f for root in roots for f in walk(root, excluder)]

    def sync(self, roots: list[str], files: list[FileInfo], progress: Progress | None = None) -> Summary:
        """Index ``files`` (found under ``roots``) and drop catalog entries under the roots that are gone."""
        started = time.monotonic()
        summary = Summary()
        try:
            self.update(files, summary, progress)
            self._remove_missing(roots, {path_to_uri(f.path) for f in files}, summary)
        finally:
            self.coll.commit()
            self.release()
        # Texts lose their last document only when one is converted again, fails, moves or goes: a
        # pass that found nothing changed does not scan the text store for them (a tenth of such a
        # pass over 10,000 notes). Texts left by a run killed before this line go with the next change.
        if summary.indexed or summary.reused or summary.removed or summary.failed:
            self.coll.collect_garbage()
        self.coll.embed_missing(self.stop)
        summary.seconds = time.monotonic() - started
        return summary

    def update(self, files: Iterable[FileInfo], summary: Summary | None = None,
               progress: Progress | None = None, intake: Intake | None = None,
               wake: Wakeup | None = None) -> Summary:
        """Convert or reuse what changed among ``files``; commits only when a batch is due, or
        when what is left converts slowly. ``intake`` (the daemon) is asked for changes that came
        since, as the pass goes on (at once when ``wake`` is set): their files join the queue."""
        summary = summary or Summary()
        wanted: dict[str, FileInfo] = {}
        if not self._made_by_checked:
            self.retry_if_changed()
        # OCR last: every cheaper file first (see ``cost``); in turns by lane (see turns.py); a
        # file whose bytes are being converted under another name waits for that conversion and
        # then reuses its text (``_to_convert``).
        queue = FairQueue(cost)
        for info in self._not_unchanged(files, summary, progress):
            queue.push(info, self._lane(info, 0))
        # A broker's workers take every file at once, whoever's: nothing to take turns for.
        live = intake if not self.broker else None
        self._deferred, self._stale = [], set()
        try:
            while True:
                for source, outcomes in self._map(self._to_convert(queue, wanted, summary, progress, live),
                                                  queue, wake if live else None):
                    info = wanted.pop(source.uri)
                    self._lanes.pop(source.uri, None)
                    if source.uri in self._stale:
                        # A change taken in since moved or deleted this file (or renamed another
                        # onto it): its result is of a file no longer there; the path was looked at again.
                        self._stale.discard(source.uri)
                        self._raw.pop(source.uri, None)
                        self._access.pop(source.uri, None)
                    elif outcomes[0].document is None and not os.path.lexists(info.path):
                        self._vanished(info, source.uri, summary)
                    else:
                        self._store(info, outcomes, summary)
                    self._last_stored = time.monotonic()
                    self._undefer(queue, wanted)
                    if progress:
                        progress(1, info.path)
                    self._maybe_commit()
                if self.stop is not None and self.stop.is_set():
                    break
                self._undefer(queue, wanted)
                if not queue:
                    break
        except BaseException:
            # A failure (the index cannot be written) left conversions under way that no one
            # waits for: their results would pass for the next run's.
            self.release()
            self._raw.clear()
            self._lanes.clear()
            raise
        if self.stop is not None and self.stop.is_set():
            self._raw.clear()
            self._lanes.clear()
            raise Interrupted("stopped with files left to index; they are indexed on the next start")
        return summary

    def _map(self, sources: Iterator[Source | None], queue: FairQueue,
             wake: Wakeup | None) -> Iterator[tuple[Source, list[Outcome]]]:
        pool = self.pool
        if isinstance(pool, WorkerPool):
            return pool.map(sources, self.stop, wake=wake, lane=lambda s: self._lanes.get(s.uri),
                            tick=lambda: self._tick(queue))
        # Never None: every lane has room on a broker's pool (``_room``), and it takes no changes in.
        return pool.map(cast(Iterator[Source], sources), self.stop)

    def _lane(self, info: FileInfo, generation: int) -> Hashable:
        """Whose turn ``info`` takes (turns.py): in enterprise mode the account it is read as; on
        a desktop, the changes it came with (0: the pass's own files)."""
        user = self.run_as(info.path) if self.run_as is not None else None
        return (user, 0) if user is not None else (None, generation)

    def _room(self, lane: Hashable, spare_only: bool) -> bool:
        """Whether the pool would take a file of ``lane`` now (a lane is (account, generation));
        with ``spare_only``, only on the spare worker (turns.py)."""
        if not isinstance(self._pool, WorkerPool):
            return True
        user = cast("tuple[RunAs | None, int]", lane)[0]
        return self._pool.has_room(user, lane, spare_only)

    def _take_in(self, queue: FairQueue, intake: Intake, wanted: dict[str, FileInfo]) -> None:
        files, named = intake()
        if named and wanted:
            self._stale.update(uri for uri, info in wanted.items() if any(at_or_under(info.path, p) for p in named))
        if files:
            self._generation += 1
            for info in files:
                queue.push(info, self._lane(info, self._generation))

    def _undefer(self, queue: FairQueue, wanted: dict[str, FileInfo]) -> None:
        """Queue again the deferred files whose conversion under way is done."""
        waiting = set(self._raw.values())
        keep = []
        for info, lane, raw in self._deferred:
            if path_to_uri(info.path) in wanted or raw is not None and raw in waiting:
                keep.append((info, lane, raw))
            else:
                queue.push(info, lane)
        self._deferred = keep

    def _tick(self, queue: FairQueue) -> float | None:
        """Before the pool waits on its workers: commit what is stored once no result came for
        SETTLE seconds (what is left converts slowly, and would hold it up to ``commit_seconds``);
        seconds until the next look wanted (that, or a lane starving), or None."""
        waits = []
        if self.coll.dirty:
            now = time.monotonic()
            due = max(self._last_stored + SETTLE, self._last_commit + COMMIT_GAP)
            if now >= due:
                logger.debug("committing %d changes while conversions go on", self.coll.dirty)
                self.coll.commit()
                self._last_commit = time.monotonic()
            else:
                waits.append(due - now)
        if (turn := queue.next_turn()) is not None:
            waits.append(turn)
        return min(waits) if waits else None

    @property
    def pool(self) -> WorkerPool | RemotePool:
        if self._pool is None and self.broker:
            from deskdex.cluster import check_setting

            check_setting(self.broker, system=self.run_as is not None)
            from deskdex.cluster import RemotePool

            self._pool = RemotePool(self.broker, self.limits, self.redelivery)
        if self._pool is None:
            self._pool = WorkerPool(self.workers, self.limits, idle=self.idle, overrides=self.overrides,
                                    enrich="deskdex.index.features:enrich")
        return self._pool

    @property
    def holding_workers(self) -> bool:
        return self._pool is not None

    def worker_pids(self) -> list[int]:
        return self._pool.pids() if self._pool is not None else []

    def release(self) -> None:
        """End the worker processes (they are started again when there is work); their fork
        server stays, for ``release_fork_server``."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @property
    def made_by(self) -> str:
        """What the failures recorded now were made with: this deskdex, its limits and converters."""
        from deskdex import __version__ as ours  # what the installed distribution says (pyproject.toml's dynamic version)

        lim = self.limits
        # OCR's settings and whether it can run here: a scanned PDF that failed helper_missing is tried
        # again at once when tesserocr or a language is installed.
        ocr = f"ocr {lim.ocr.enabled} {','.join(lim.ocr.languages)} {not unavailable(lim.ocr)}"
        return (f"deskdex {ours}; time_limit {lim.time_seconds:g}; memory {lim.memory_bytes}; "
                f"max_file {lim.file_bytes}; converters {sorted((self.overrides or {}).items())}; {ocr}")

    def retry_if_changed(self) -> int:
        """Make every transient failure due now when deskdex, its limits or its converters changed
        since they were recorded: they may well pass now. Returns how many."""
        n = self.coll.retries.retry_all_if_changed(self.made_by, TRANSIENT_REASONS)
        self._made_by_checked = True
        if n:
            logger.info("deskdex, its limits or converters changed: trying %d failed files again", n)
        return n

    def backoff(self, attempts: int) -> float:
        """Seconds before the ``attempts``-th failure in a row is tried again."""
        return min(RETRY_MOST, self.retry_first * 2.0 ** min(max(attempts - 1, 0), 30))

    def remove(self, path: str) -> int:
        """A file or folder is gone: remove it and everything under or inside it."""
        uri = path_to_uri(path)
        n = self.coll.delete(uri) if self.coll.get(uri) is not None else 0
        for child_uri, *_ in list(self.coll.files_under(path)):
            n += self.coll.delete(child_uri)
        return n

    def move(self, src: str, dst: str) -> int:
        """A file or folder was renamed or moved: rewrite catalog entries, convert nothing."""
        n = 0
        if self.coll.get(path_to_uri(src)) is not None:
            n += self.coll.move(path_to_uri(src), path_to_uri(dst), display_path(dst))
            self.refresh_access(dst)
        old, new = path_to_uri(src), path_to_uri(dst)
        for uri, *_ in list(self.coll.files_under(src)):
            new_uri = new + uri[len(old):]
            new_path = uri_to_path(new_uri) or ""
            n += self.coll.move(uri, new_uri, display_path(new_path))
            self.refresh_access(new_path)
        return n

    def refresh_access(self, path: str, row: Row | None = None) -> bool:
        """Enterprise mode: look again at who may read ``path``; rewrite its rows (and its
        members') when that changed. No conversion. True when something was rewritten."""
        if self.access is None:
            return False
        row = row or self.coll.get(path_to_uri(path))
        if row is None:
            return False
        stamp = self.access(path, None)
        if stamp is None or (row.owner, row.readers) == stamp:
            return False
        for r in [row] + [c for u in self.coll.descendants(row.uri) if (c := self.coll.get(u)) is not None]:
            r.owner, r.readers = stamp
            self.coll.reuse(r, r)  # re-indexes from the stored text
        return True

    def _to_convert(self, queue: FairQueue, wanted: dict[str, FileInfo], summary: Summary,
                    progress: Progress | None, intake: Intake | None) -> Iterator[Source | None]:
        """Yield what must be converted, each file when its lane's turn comes and the pool has
        room for it, or None when none has (or, taking changes in, the queue is empty); settle
        unchanged and merely moved files on the way. Ends once the queue is empty, unless it
        takes changes in."""
        while True:
            if intake is not None:
                self._take_in(queue, intake, wanted)
            # Rows looked up LOOKUP_BATCH at a time where turns cannot matter: one lane, and no
            # changes to take in (a file taken from the queue is yielded before the next is).
            chunk = 1 if intake is not None or queue.lanes > 1 else LOOKUP_BATCH
            taken: list[tuple[FileInfo, Hashable]] = []
            while len(taken) < chunk and (got := queue.pop(self._room)) is not None:
                taken.append(got)
            if not taken:
                if not queue and intake is None:
                    return
                yield None
                continue
            for (info, uri, looked_up), (_, lane) in zip(self._with_rows(i for i, _ in taken), taken):
                if self.stop is not None and self.stop.is_set():
                    return
                if uri in wanted:  # out for conversion, changed since: looked at once that is stored
                    self._deferred.append((info, lane, None))
                    continue
                yield from self._settle_or_convert(info, uri, looked_up, lane, wanted, summary, progress)

    def _settle_or_convert(self, info: FileInfo, uri: str, looked_up: Row | None, lane: Hashable,
                           wanted: dict[str, FileInfo], summary: Summary,
                           progress: Progress | None) -> Iterator[Source]:
        """Settle ``info`` (unchanged, failed before it is read, reused), or yield it to convert."""
        if looked_up is not None and _unchanged(info, looked_up.size, looked_up.mtime, looked_up.retry_at):
            summary.unchanged += 1
            if self.refresh_access(info.path, looked_up):
                self._maybe_commit()
            if progress:
                progress(1, info.path)
            return
        # Read again: what was stored since the lookup (a copy's text, a cluster) counts below.
        row = self.coll.get(uri) if looked_up is not None else None
        user = self.run_as(info.path) if self.run_as is not None else None
        try:
            raw, info = self._checksum(info, uri, user)
        except Vanished:
            self._vanished(info, uri, summary)
            if progress:
                progress(1, info.path)
            return
        except ConversionError as exc:  # not a regular file, over the size limit, unreadable
            self._fail(info, uri, None, exc.reason, str(exc), summary)
            self._access.pop(uri, None)
            if progress:
                progress(1, info.path)
            return
        if raw in self._raw.values():
            # The same bytes are being converted under another name (a copy): never convert (OCR)
            # the same bytes twice; looked at again once that conversion is stored, and reused.
            self._deferred.append((info, lane, raw))
            return
        same = row if row is not None and row.raw_sum == raw and row.status == "ok" else None
        if same is None:
            same = self.coll.find_ok_by_raw_sum(raw)
        fresh = Row(uri=uri, path=display_path(info.path), size=info.size, mtime=info.mtime, raw_sum=raw)
        if same is not None and not self.coll.descendants(same.uri):
            settled = True
            if self.coll.reusable(fresh, same):
                self.coll.reuse(self._stamped(fresh, uri, done=True), same)
                if same.uri == uri:
                    summary.unchanged += 1
                else:
                    summary.reused += 1
            elif (read := self._read_before(fresh, same)) is not None:
                # A copy, under another name, of a file OCR has read.
                self.coll.put(self._stamped(fresh, uri, done=True), read)
                summary.reused += 1
            else:
                settled = False
            if settled:
                if progress:
                    progress(1, info.path)
                self._maybe_commit()
                return
        wanted[uri] = FileInfo(info.path, info.size, info.mtime)
        self._raw[uri] = raw
        self._lanes[uri] = lane
        summary.bytes += info.size
        yield Source.from_path(info.path, run_as=user)

    def _not_unchanged(self, files: Iterable[FileInfo], summary: Summary,
                       progress: Progress | None) -> Iterator[FileInfo]:
        """``files`` less the unchanged ones, counted here: each batch of LOOKUP_BATCH looked up by
        (size, mtime) in one query, rather than each file taken through the queue and looked up with
        its whole row (most of a pass over unchanged folders: 0.1 s of 10,000 notes). Not in
        enterprise mode, where an unchanged file's readers are looked at again (``refresh_access``)."""
        if self.access is not None:
            yield from files
            return
        for batch in _with_uris(files):
            stamps = self.coll.stamps([uri for _, uri in batch])
            for info, uri in batch:
                stamp = stamps.get(uri)
                if stamp is not None and _unchanged(info, *stamp):
                    summary.unchanged += 1
                    if progress:
                        progress(1, info.path)
                else:
                    yield info

    def _with_rows(self, files: Iterable[FileInfo]) -> Iterator[tuple[FileInfo, str, Row | None]]:
        """Each file with its URI and its catalog row as looked up with LOOKUP_BATCH others: a run
        over an unchanged folder is mostly these lookups."""
        for batch in _with_uris(files):
            rows = self.coll.get_many([uri for _, uri in batch])
            for info, uri in batch:
                yield info, uri, rows.get(uri)

    def _read_before(self, fresh: Row, same: Row) -> Document | None:
        """The document of ``same``, for ``fresh``, a file with the same bytes under another name,
        when OCR made its text: OCR never reads the same bytes twice. ``Collection.reusable`` turns
        such a copy down when its title may be its name (an image's always is); an image's or a
        PDF's converter puts the name nowhere else, so the copy takes the text with its own name
        as title. None: convert it."""
        if same.source != "files" or not same.path or not fresh.path:
            return None
        name, other = os.path.basename(fresh.path), os.path.basename(same.path)
        if extension(name) != extension(other) or compound_extension(name) != compound_extension(other):
            return None  # the suffix chooses the format
        doc = self.coll.document(same)
        if doc is None or doc.meta.get("ocr") not in ("yes", "partial"):
            return None
        if doc.title == other:
            doc.title = name
        doc.uri = fresh.uri
        return doc

    def _checksum(self, info: FileInfo, uri: str, user: RunAs | None) -> tuple[str, FileInfo]:
        """The raw checksum of the file at ``info.path``, with the size and mtime of the file that
        was read (the descriptor's, before reading), which the row records. The path may hold
        another file than when it was looked at (a swap through a temp name, between the look and
        now); a row that paired the look's size and mtime with the other file's bytes passed for up
        to date wherever the watcher's moves then carried it. A file changed while it is read gets
        a newer mtime than the one recorded, and is read again at its next look.

        On the writer's thread, so bounded: a FIFO, socket or device is never opened for reading
        (nor one swapped in since the look: open_regular), a file over the size limit is never
        read, and a stop ends the reading.

        Enterprise mode: opened with ``user``'s rights and without following a symlink; who may
        read the document (``self._access``) is taken from the descriptor opened, so from the
        file that was read."""
        if info.special is not None:
            raise NotRegular(f"{info.special}, not a regular file: never read")
        limit = self.limits.file_bytes
        # A song or film is converted by its headers, whatever its size: over the limit, its bytes
        # are sampled, not read (checksums.sampled_checksum_of).
        headers_only = self._registry.headers_only(self._registry.mime_for_extension(extension(info.path)))
        if info.size > limit and not headers_only:
            raise SizeLimit(f"{info.size} bytes is over the file size limit of {limit}")
        if self.before_read is not None:
            self.before_read(info.path)
        with as_user(user):
            f = open_regular(info.path, nofollow=user is not None)
        with f:
            st = os.fstat(f.fileno())
            if self.access is not None:
                self._access[uri] = self.access(info.path, f.fileno())
            if st.st_size > limit and not headers_only:
                raise SizeLimit(f"{st.st_size} bytes is over the file size limit of {limit}")
            raw = sampled_checksum_of(f, st.st_size) if st.st_size > limit else raw_checksum_of(f, limit, self.stop)
        return raw, FileInfo(info.path, st.st_size, st.st_mtime)

    def _store(self, info: FileInfo, outcomes: list[Outcome], summary: Summary) -> None:
        self._stored_bytes += info.size
        if self._stored_bytes >= TRIM_EVERY:
            self._stored_bytes = 0
            _trim_heap()
        uri = outcomes[0].uri
        raw = self._raw.pop(uri, None)
        for child in self.coll.descendants(uri):  # members are re-derived from scratch
            self.coll.delete(child)
        for i, o in enumerate(outcomes):
            parent = None if i == 0 else _parent_of(o.uri)
            if o.document is None:
                self._fail(info, o.uri, parent, o.reason, o.message, summary)
                continue
            row = Row(uri=o.uri, parent=parent, path=display_path(info.path), size=info.size if i == 0 else 0,
                      mtime=info.mtime, raw_sum=raw if i == 0 else None)
            self.coll.put(self._stamped(row, uri), o.document, o.extra.get("features"))
            if i == 0:
                summary.indexed += 1
                self.converted += 1
            else:
                summary.members += 1
        self._access.pop(uri, None)

    def _vanished(self, info: FileInfo, uri: str, summary: Summary) -> None:
        """The file went away (deleted or renamed) between the scan and its checksum, or while it
        waited for its conversion, which failed for that: not a failure of the file, and no row
        left behind. A failed row would outlive it: the watcher's Moved would carry it to the new
        name, where its size and mtime match, and the file would never be tried again."""
        logger.warning("%s: vanished during the run", display_path(info.path))
        self._raw.pop(uri, None)
        self._access.pop(uri, None)
        summary.failed["vanished"] += 1
        summary.failures.append((display_path(info.path), "vanished", "deleted or renamed during the run"))
        if self.coll.get(uri) is not None:
            self.coll.delete(uri)

    def _fail(self, info: FileInfo, uri: str, parent: str | None, reason: str, message: str, summary: Summary) -> None:
        path = display_path(info.path)
        logger.warning("%s: %s (%s)", path if parent is None else uri, message, reason)
        summary.failed[reason] += 1
        summary.failures.append((path if parent is None else uri, reason, message))
        row = Row(uri=uri, parent=parent, path=path, size=info.size, mtime=info.mtime,
                  status="failed", reason=reason, error=message, title=os.path.basename(path))
        if parent is None and reason in TRANSIENT_REASONS:
            # Attempts count failures of the same bytes in a row: the back-off grows with them.
            before = self.coll.get(uri)
            same = before is not None and before.status == "failed" and before.retry_at is not None \
                and before.size == info.size and abs(before.mtime - info.mtime) < 1e-6
            row.attempts = before.attempts + 1 if same and before is not None else 1
            row.retry_at = time.time() + self.backoff(row.attempts)
        if self.access is not None and parent is None and path_to_uri(info.path) not in self._access:
            self._access[path_to_uri(info.path)] = self.access(info.path, None)
        self.coll.put(self._stamped(row, path_to_uri(info.path)), None)

    def _stamped(self, row: Row, file_uri: str, done: bool = False) -> Row:
        """``row`` with the owner and readers of the file it comes from (a member: its container)."""
        if self.access is not None:
            stamp = self._access.pop(file_uri, None) if done else self._access.get(file_uri)
            if stamp is not None:
                row.owner, row.readers = stamp
        return row

    def _remove_missing(self, roots: list[str], present: set[str], summary: Summary) -> None:
        for root in roots:
            root = os.path.abspath(root)
            if os.path.isdir(root):
                gone = [uri for uri, *_ in self.coll.files_under(root) if uri not in present]
            else:
                uri = path_to_uri(root)
                gone = [uri] if uri not in present and self.coll.get(uri) is not None else []
            for uri in gone:
                self.coll.delete(uri)
                summary.removed += 1

    def _maybe_commit(self) -> None:
        if self.coll.dirty >= self.commit_every or time.monotonic() - self._last_commit > self.commit_seconds:
            self.coll.commit()
            self._last_commit = time.monotonic()


# Suffixes of the files that may need OCR, the most expensive work, from the format table: converted
# after every other file of a batch, PDFs (most have a text layer, and are cheap) before images.
_OCR_RANK = {"deskdex.converters.pdf:convert": 1, "deskdex.converters.media:image": 2}
_OCR_LAST = {ext: _OCR_RANK[f.handler] for f in FORMATS_BASE if f.handler in _OCR_RANK for ext in f.extensions}


# Files whose catalog rows are looked up by one query (_with_rows).
LOOKUP_BATCH = 500


def cost(info: FileInfo) -> int:
    """The order a file is converted in within a batch: 0 for most, 1 for a PDF, 2 for an image."""
    return _OCR_LAST.get(extension(info.path), 0)


def _parent_of(uri: str) -> str:
    return uri.rsplit("#", 1)[0]


# The writer gives the C heap's free memory back to the system after each TRIM_EVERY bytes of files
# stored. A large text passes through it in several copies (pickle, tagged text, UTF-8, tantivy's
# fields), and glibc keeps what they freed, so the writer held the largest text's worth from then on
# (slice1000's peak PSS: 539 and 533 MiB without, 523 and 511 with, alternating).
TRIM_EVERY = 8 << 20


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc: its allocator gives memory back its own way
        return None


def _trim_heap() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _with_uris(files: Iterable[FileInfo]) -> Iterator[list[tuple[FileInfo, str]]]:
    """``files`` with their URIs, LOOKUP_BATCH at a time: what one catalog query looks up."""
    todo = iter(files)
    while batch := [(info, path_to_uri(info.path)) for info in itertools.islice(todo, LOOKUP_BATCH)]:
        yield batch


def _unchanged(info: FileInfo, size: int, mtime: float, retry_at: float | None) -> bool:
    """Whether ``info`` is the file indexed with that size and mtime, and not a transient failure
    whose back-off is over (converted again though the file is unchanged)."""
    return (not info.recheck and size == info.size and abs(mtime - info.mtime) < 1e-6
            and (retry_at is None or retry_at > time.time()))


def index_once(cfg: Config, roots: list[str], workers: int, progress: bool,
               stop: threading.Event | None = None, shard: tuple[int, int] | None = None) -> Summary:
    """``deskdex index``: bring the index in line with ``roots`` once, at normal priority. ``stop``
    set (a signal): the conversions under way are abandoned, the rest committed, Interrupted raised.
    ``shard`` (I, N): only the files whose folder hashes to I of N (the others, if indexed here
    before, are dropped)."""
    with Collection.from_settings(cfg, writable=True) as coll:
        indexer = Indexer.from_settings(coll, cfg, workers=workers, idle=False, stop=stop)
        files = of_shard(indexer.scan(roots, cfg.settings.exclude), shard)
        with with_bar(len(files) if progress else 0, min_total=1) as shown:
            return indexer.sync(roots, files, progress=shown)


def of_shard(files: list[FileInfo], shard: tuple[int, int] | None) -> list[FileInfo]:
    """The files of shard (I, N): those whose folder hashes to I (all, without a shard). By
    folder, not by file: a folder's files (a project, an album) rank and cluster together."""
    if shard is None or shard[1] <= 1:
        return files
    from deskdex.webcrawl import shard_of

    return [f for f in files if shard_of(os.path.dirname(f.path), shard[1]) == shard[0]]


def shard_setting(cfg: Config) -> tuple[int, int] | None:
    """The setting shard as (I, N), or None; ConfigError for a value that is not I/N."""
    text = cfg.settings.shard
    if not text:
        return None
    from deskdex.webcrawl import parse_shard

    try:
        return parse_shard(text)
    except ValueError:
        raise ConfigError(f"setting shard: I/N with 0 <= I < N, not {text!r}") from None


def retry_once(cfg: Config, under: str | None, workers: int, progress: bool,
               stop: threading.Event | None = None) -> tuple[int, Summary]:
    """``deskdex retry [PATH]`` with no daemon running: convert again, now, every transient failure
    at or under ``under`` (None: all). Returns how many there were, and the summary."""
    with Collection.from_settings(cfg, writable=True) as coll:
        indexer = Indexer.from_settings(coll, cfg, workers=workers, idle=False, stop=stop)
        scope = None if under is None else [under]
        indexer.retry_if_changed()
        coll.retries.retry_now(scope, time.time())
        roots = sorted({path for _, path, _ in coll.retries.scheduled(scope)})
        coll.commit()
        files = indexer.scan(roots)  # each root a file: gone ones are dropped by sync
        with with_bar(len(files) if progress else 0, min_total=1) as shown:
            return len(roots), indexer.sync(roots, files, progress=shown)
