"""The long-running indexer: reconcile on start, then follow the watcher's change records.

Threads: the main thread applies changes (the only writer); the watcher thread hands over
settled batches; the socket server answers requests from its own threads (daemon/ops.py) with
read-only views of the index, one thread to a view at a time (``reading``). Nothing wakes up while nothing changes: the main thread
sleeps on a condition with no timeout unless there is something to finish (idle workers to
release, work held back by battery power, or a failed file to try again at a scheduled time).

A pass that converts takes in the watcher's new records as they come (``_intake``, woken by a
pipe the watcher writes to once per batch): a file saved meanwhile does not wait for slow files,
and no account's files wait for another's (pipeline/turns.py).

Failures that may pass another time (a timeout, a crash, a memory limit: see pipeline/indexer.py)
are tried again when their back-off is over: the main thread wakes up for the earliest one under
the watched folders, and at once for ``deskdex retry``.

Enterprise mode (``system=True``, ``deskdex daemon --system``): the watched folders are the homes
of the accounts (daemon/accounts.py), every document is stamped with who may read it
(index/access.py), and any local user may connect: searches are filtered by the caller's uid as
the kernel reports it, root sees everything, and only root may change anything. Permission
changes are followed live for files (inotify IN_ATTRIB) and folders (a rescan of the folder,
which converts nothing), and caught by every reconcile; account changes (/etc/passwd, /etc/group)
are watched and bring a rescan of every home.

When the index cannot be written (a full disk, a lock another program holds on the catalog, a
read-only file system: StoreUnwritable), the work at hand goes back to the queue, ``status`` says
``stalled`` and why, and the main thread waits (1 s, doubling up to a minute; a stop ends the wait),
rolls the collection back and tries again (Collection.recover). Searches go on meanwhile through
the read-only view. Work done again is cheap: what was committed is unchanged, and stored texts
are reused rather than converted again.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

from deskdex import settings
from deskdex.converters import Wakeup, fork_server_idle, release_fork_server
from deskdex.errors import ConfigError, DeskdexError, Interrupted, StoreError, StoreUnwritable
from deskdex.index import Collection
from deskdex.paths import display_path, folder_of
from deskdex.pipeline import (
    Changed, Deleted, Excluder, FileInfo, Indexer, Moved, Record, Rescan, Summary, follow_changes as follow, of_shard,
    shard_setting, with_bar,
)
from deskdex.settings import Config

from .accounts import AccountWatcher
from .crawls import CrawlScheduler
from .sources import SourceScheduler
from .retries import RetrySchedule
from .server import SEARCHES_AT_ONCE
from .stall import Stall
from .views import ViewPool
from .workqueue import IndexJob, WorkQueue

logger = logging.getLogger(__name__)

# Seconds after a folder appears (made, moved in) before it is walked once more. Its inotify watch is
# set up after the event that made it known, and watchdog lists what it holds by walking it: a
# file written into it in between (a copy, an unpacked archive) has no event of its own.
RELOOK_AFTER = 2.0


def rescan_roots(rescans: Iterable[str], roots: list[str]) -> list[str]:
    """The folders a reconcile of ``rescans`` covers: for each path, the watched folders it is in
    and those below it, else the path itself. Looked up by each folder above the path and a
    range of the sorted folders, not by a look at every folder for every path: lost events ask
    for a rescan of every folder, and 10,000 of them made 10^8 comparisons."""
    by_folder = {r.rstrip("/") or "/": r for r in roots}
    ordered = sorted(by_folder)
    out: set[str] = set()
    for path in rescans:
        key = path.rstrip("/") or "/"
        hits = []
        above = folder_of(key, by_folder)
        while above is not None:  # every watched folder it is in, as when they nest
            hits.append(by_folder[above])
            above = None if above == "/" else folder_of(above.rsplit("/", 1)[0] or "/", by_folder)
        prefix = key.rstrip("/") + "/"  # the folders below: one run of the sorted ones
        i = bisect.bisect_left(ordered, prefix)
        while i < len(ordered) and ordered[i].startswith(prefix):
            hits.append(by_folder[ordered[i]])
            i += 1
        out.update(hits or [path])
    return sorted(out)


class Daemon:
    def __init__(self, cfg: Config, system: bool = False) -> None:
        self.cfg = cfg
        self.system = system
        self.state = "starting"
        self.first_pass = True  # until the reconcile of the start is done: searches say the index is being built
        self._stall = Stall()
        self.current: str | None = None
        self.notes: list[str] = []
        self.settings_problems: list[str] = []  # what of the config file is not used (daemon/configwatch.py)
        self.offline: set[str] = set()
        self.paused = False
        self.on_battery = False
        self.started = time.time()
        self._busy_since = time.monotonic()
        self._files_left = 0  # files of the reconcile under way not yet done (part of the queue)
        # What the main thread has to do; its condition also wakes it for a stop, a pause, a search.
        self.queue = WorkQueue()
        self._cond = self.queue.cond
        # Set with each batch the watcher hands over: a pass converting slow files wakes and takes
        # the new records in (``_intake``) rather than leave them until it is done.
        self._wakeup = Wakeup()
        self._taken: list[Record] = []  # records the pass under way took in: kept again if it stalls
        self._stop = threading.Event()
        self._wakers: list[threading.Thread] = []  # joined in close()
        self._homes: set[str] = set()  # the folders watched (enterprise mode: the homes found so far)
        self._last_work = 0.0
        # A store that cannot be written at start (a full disk) stalls the daemon like one that
        # fails later: it starts, answers searches, and waits.
        self.coll = Collection.from_settings(cfg, writable=True, unwritable_ok=True)
        self._views = ViewPool(cfg.home.data_dir, SEARCHES_AT_ONCE + 1)  # the socket threads' searches
        self._write_lock = threading.RLock()  # the one writer: file changes and crawled pages take turns
        # The config file's read-modify-write: the socket's watch/exclude ops and the config watch's
        # reload take turns, so a reload that read the file just before an op saved it cannot put the
        # op's change back out of self.cfg (nor can two ops lose one another's change).
        self.settings_lock = threading.RLock()
        self.indexer = Indexer.from_settings(self.coll, cfg, workers=cfg.settings.workers, idle=True, stop=self._stop)
        self.shard = shard_setting(cfg)  # this home's share of a sharded collection (the setting shard)
        self.limits = self.indexer.limits
        self.retries = RetrySchedule(self.coll, self.indexer.backoff, self._stalled, self.note)
        self.watcher: Any = None
        self.accounts = AccountWatcher(cfg.settings.accounts, self.queue.ask_accounts_check) if system else None
        # Crawls: the configured sites' upkeep, and those clients hand over the socket (asked for
        # during the first reconcile, they wait for it).
        self.crawls = CrawlScheduler(cfg.home.config_file, cfg.home.data_dir, self.coll, self._write_lock,
                                     self.limits, cfg)
        # Mail accounts and network shares (the setting sources): a thread each, writing under the same lock.
        self.sources = SourceScheduler(cfg.home.config_file, self.coll, self._write_lock, self.limits,
                                       lambda: self.cfg.settings, lambda: self.paused or self.on_battery, system)

    @property
    def stall(self) -> StoreError | None:
        """Why the index cannot be written now; None while it can."""
        return self._stall.error

    # -- enterprise mode -------------------------------------------------------------------------
    def folders(self) -> list[str]:
        """The watched folders: the configured ones, or (system) the accounts' homes and those."""
        if self.accounts is None:
            return self.cfg.folders()
        return sorted(set(self.accounts.homes()) | set(self.cfg.configured_folders()))

    def _fresh_access(self) -> None:
        """A new access checker for each pass: folders' permissions are remembered only within one."""
        if self.accounts is not None:
            self.indexer.access = self.accounts.access_checker()
            self.indexer.run_as = self.accounts.reader_of()

    def _accounts_changed(self) -> None:
        """/etc/passwd or /etc/group changed: watch new homes, drop removed ones, and look again at
        who may read every document (group memberships may have changed)."""
        assert self.accounts is not None
        changed = self.accounts.reload()
        before, after = self._homes, set(self.folders())
        if not changed and before == after:
            return
        self._homes = after
        if self.watcher is not None:
            for home in after - before:
                self.watcher.add(home)
            for home in before - after:
                self.watcher.remove(home)
        self.queue.add(Deleted(home, True) for home in sorted(before - after))
        self.queue.rescan(after if changed else after - before)

    # -- lifecycle -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the daemon to stop: the file at hand is finished, the rest committed (signal-safe)."""
        self._stop.set()
        # Not under the condition's lock: this runs in a signal handler, maybe while the main
        # thread holds it; the main loop looks at the event at least when it wakes.
        waker = threading.Thread(target=self._wake, name="deskdex-wake", daemon=True)
        self._wakers.append(waker)
        waker.start()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        for waker in self._wakers:
            waker.join()
        if self.watcher is not None:
            self.watcher.stop()
        if self.accounts is not None:
            self.accounts.stop()
        self.indexer.release()
        try:
            self.coll.close()
        except StoreError as exc:
            logger.warning("the last changes are not committed (%s): the next start indexes them", exc)
        self._views.close()
        self._wakeup.close()

    def run(self, watch: bool = True, once: bool = False) -> None:
        """Reconcile every folder, then apply changes until ``stop()``."""
        from deskdex.pipeline import Watcher

        roots = self.folders()
        self._homes = set(roots)
        shard_server = None
        if self.cfg.settings.listen and not once:
            shard_server = self._serve_shard()
        if watch and not once:
            self.watcher = Watcher(self.enqueue, patterns=self.cfg.settings.exclude, attrib=self.system).start()
            if self.accounts is not None:
                self.accounts.start()
            for root in roots:
                if not self.watcher.add(root):
                    self.note(f"{root} cannot be watched live; it is rescanned on start")
        crawls = sources = None
        try:
            with self._write_lock:
                try:
                    self.reconcile(roots)
                except StoreUnwritable as exc:
                    if once:
                        raise
                    self._stalled(exc, [], set(roots))
                self.retries.schedule(self.folders())
            self.first_pass = False
            if once:
                return
            crawls = self.crawls.start()
            sources = self.sources.start()
            while True:
                with self._cond:
                    while not self._stop.is_set() and not self._has_work():
                        self.state = "paused" if self.paused or self.on_battery else "idle"
                        self._cond.wait(self._wait_timeout())
                        self._release_if_idle()
                    if self._stop.is_set():
                        break
                    check = self.queue.take_check_accounts()
                if check:
                    self._accounts_changed()
                if (self.coll.failed or self.stall is not None) and not self._store_back():
                    continue
                batch = self.queue.take()
                with self._write_lock:
                    started = time.time()
                    retries = self.retries.take_due(batch.retries_asked, self.folders(), started)
                    if retries is None:  # stalled: asked again once the index can be written
                        self.queue.put_back(asked=batch.retries_asked)
                        retries = []
                    self.apply([*batch.records, *retries, *batch.relooks], batch.rescans,
                               relooked={r.path for r in batch.relooks})
                    self.retries.schedule(self.folders(), retries, started)
                    for job in batch.jobs:
                        self._run_job(job)
        except Interrupted as exc:
            logger.info("%s", exc)
        finally:
            if crawls is not None:
                crawls.stop()
            if sources is not None:
                sources.stop()
            if shard_server is not None:
                shard_server.close()
            for job in self.queue.take_jobs():  # their callers must not wait for ever
                job.error = Interrupted("the daemon stopped first: run `deskdex index` again")
                job.done.set()
        self.state = "stopping"

    def _serve_shard(self) -> Any:
        """Other machines' merged searches of this index, on the setting listen (daemon/shardserver.py)."""
        from deskdex.daemon.shardserver import ShardServer

        if self.system:
            raise ConfigError("setting listen: an enterprise-mode index answers each account with what it may "
                              "read; a served shard answers with everything: remove the setting")
        s = self.cfg.settings
        server = ShardServer(self.cfg.home.data_dir, s.listen, s.token, s.tls_cert, s.tls_key).start()
        logger.info("serving this index's searches on %s", server.address)
        return server

    def _has_work(self) -> bool:
        # A failed collection is work too: it is tried again (with back-off) until it recovers.
        # What a user asks for by name (`deskdex index PATH`) is done even while paused.
        return self.queue.has_jobs() or not self.paused and not self._battery_hold() and (
            self.queue.has_work() or self.coll.failed or self.retries.due())

    def _battery_hold(self) -> bool:
        """True while work waits for mains power (checked only when there is work)."""
        if self.cfg.settings.index_on_battery or not (self.queue.has_changes() or self.retries.due()):
            self.on_battery = False
            return False
        from .power import on_battery

        was, self.on_battery = self.on_battery, on_battery()
        if self.on_battery and not was:
            self.note("on battery: indexing waits for mains power (setting index_on_battery)")
        return self.on_battery

    def _holding(self) -> bool:
        """Something kept only for work to come: converter processes or an open tantivy index
        (a failed collection's is let go of by its recovery, not by the release timer)."""
        return (self.indexer.holding_workers or not (self.coll.suspended or self.coll.failed)
                or not self._views.suspended)

    def _wait_timeout(self) -> float | None:
        if self.on_battery:
            return 60.0  # look at the power supply again in a minute, only while work waits
        waits = []
        if self._holding():
            waits.append(max(0.1, self._last_work + self.cfg.settings.release_after - time.monotonic()))
        elif fork_server_idle():
            waits.append(max(0.1, self._last_work + self.cfg.settings.warm_for - time.monotonic()))
        relook, retry = self.queue.next_relook(), self.retries.wait()
        if relook is not None and not self.paused:
            waits.append(max(0.05, relook - time.monotonic()))
        if retry is not None and not self.paused:
            waits.append(retry)
        return min(waits) if waits else None  # nothing to do, nothing held: sleep until something happens

    def _release_if_idle(self) -> None:
        """After ``release_after`` quiet seconds: converters end, tantivy is let go (its threads
        and caches); all come back on the next change or search. After ``warm_for`` the fork server
        the converters start from ends too. Then nothing runs at all."""
        quiet = time.monotonic() - self._last_work
        if not self._holding() and quiet >= self.cfg.settings.warm_for:
            release_fork_server()
        if not self._holding() or quiet < self.cfg.settings.release_after:
            return
        self.indexer.release()
        with self._write_lock:
            try:
                if not self.coll.failed:
                    self.coll.suspend()
            except StoreUnwritable as exc:
                self._stalled(exc)
            except StoreError as exc:
                self.note(f"could not commit: {exc}")
        self._views.suspend()

    @contextmanager
    def reading(self) -> Iterator[Collection]:
        """A read-only view of the index, for the socket's threads, theirs alone meanwhile; a use
        counts as work, so the release timer runs again."""
        with self._views.view() as view:
            yield view
        with self._cond:
            self._last_work = time.monotonic()
            self._cond.notify_all()

    def writing(self) -> threading.RLock:
        """Hold while using the writable collection from another thread than the main one."""
        return self._write_lock

    def queue_length(self) -> int:
        """What is known to be waiting: the watcher's records not handed over yet, the records
        and rescans queued, the folders to look at once more, and the files of the batch or
        reconcile under way not done yet."""
        gathering = self.watcher.pending if self.watcher is not None else 0  # its lock, not ours
        with self._cond:
            return gathering + len(self.queue) + self._files_left

    # -- input -------------------------------------------------------------------------------------
    def enqueue(self, records: list[Record]) -> None:
        """Called by the watcher with each settled batch."""
        for r in self.queue.add(records):
            self.note(f"live watching lost events ({r.reason}) under {r.path}: fell back to a scan")
        self._wakeup.set()

    def note(self, text: str) -> None:
        logger.warning("%s", text)
        self.notes = (self.notes + [text])[-10:]

    def index_paths(self, paths: list[str]) -> Summary:
        """Index ``paths`` once (from a socket thread): queued for the main loop, which is the one
        writer; returns its summary, or raises what stopped it."""
        job = IndexJob(paths)
        with self._cond:
            if self._stop.is_set():
                raise Interrupted("the daemon is stopping")
            self.queue.submit(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.summary is not None
        return job.summary

    def _run_job(self, job: IndexJob) -> None:
        try:
            job.summary = self.reconcile(job.paths)
        except Interrupted as exc:
            job.error = exc
            raise
        except DeskdexError as exc:
            job.error = exc
        finally:
            job.done.set()

    # -- what the socket's clients change ------------------------------------------------------------
    def pause(self, paused: bool) -> None:
        with self._cond:
            self.paused = paused
            if paused and self.state == "idle":
                self.state = "paused"
            elif not paused and self.state == "paused" and not self.on_battery:
                self.state = "idle"  # the main loop says "indexing" as soon as it takes up work
            self._cond.notify_all()

    def retry(self, path: str | None) -> None:
        """Try the transient failures at or under ``path`` (None: all) again now."""
        self.queue.ask_retry(path)

    def add_folder(self, path: str) -> None:
        """Watch one more folder (kept in the config file) and index it."""
        if not os.path.isdir(path):
            raise ConfigError(f"not a folder: {path}")
        with self.settings_lock:
            folders = self.changeable_folders()
            if path in folders:
                return
            self._set("folders", folders + [path])
            if self.watcher is not None:
                self.watcher.add(path)
        self.queue.rescan([path])

    def remove_folder(self, path: str) -> None:
        """Stop watching a folder (in the config file too) and drop its documents."""
        with self.settings_lock:
            self._set("folders", [f for f in self.cfg.configured_folders() if f != path])
            if self.watcher is not None:
                self.watcher.remove(path)
        self.queue.add([Deleted(path, True)])

    def changeable_folders(self) -> list[str]:
        """The folders clients add to and remove from: the configured ones, and (a user's daemon)
        the default one while none is configured, which stays watched when the first is added.
        A system daemon's homes come from the accounts, not from here."""
        return self.cfg.configured_folders() if self.system else self.cfg.folders()

    def set_excludes(self, patterns: list[str]) -> None:
        with self.settings_lock:
            self._set("exclude", patterns)
            if self.watcher is not None:
                self.watcher.set_patterns(patterns)
        self.queue.rescan(self.folders())  # newly excluded files leave, re-included ones come back

    def add_exclude(self, pattern: str) -> None:
        with self.settings_lock:
            current = list(self.cfg.settings.exclude)
            if pattern not in current:
                self.set_excludes(current + [pattern])

    def remove_exclude(self, pattern: str) -> bool:
        """False when ``pattern`` is not one of the configured ones."""
        with self.settings_lock:
            current = list(self.cfg.settings.exclude)
            if pattern not in current:
                return False
            self.set_excludes([p for p in current if p != pattern])
            return True

    def _set(self, key: str, values: list[str]) -> None:
        settings.save(self.cfg.home, {key: values})
        # Only this setting: the file's other values reach the daemon through its config watch
        # (daemon/configwatch.py), which keeps --broker and leaves out what enterprise mode ignores.
        self.cfg = self.cfg.given_over({**self.cfg.values, key: values})

    # -- an index that cannot be written -------------------------------------------------------------
    def _stalled(self, exc: StoreError, records: list[Record] | None = None, rescans: set[str] | None = None) -> None:
        """The index could not be written: keep the work for later (it is done again from the
        start), say why in ``status``, and wait longer than last time before the next try."""
        self.queue.put_back(records or [], rescans or ())
        self.state = "stalled"
        if self._stall.failed(exc):
            self.note(f"indexing stalled: {exc}")
        else:
            logger.info("still stalled (%s): next try in %g s", exc.condition, self._stall.retry_in)

    def _store_back(self) -> bool:
        """After the back-off, roll the failed collection back and try it again. True when it
        can be written (the work kept is done next); False when stopped or still failing."""
        if not self._stall.wait(self._stop):
            return False
        if self.coll.failed:  # a stall outside the store (the broker) left it as it was
            with self._write_lock:
                try:
                    self.coll.recover()
                except StoreError as exc:
                    self._stalled(exc)
                    return False
        ended = self._stall.over()
        if ended is not None:
            logger.info("no longer %s: catching up", ended.condition)
            self.state = "indexing"
        return True

    # -- applying changes ----------------------------------------------------------------------------
    def reconcile(self, roots: list[str]) -> Summary:
        """Bring the catalog in line with the disk under ``roots`` (changes made while we were down)."""
        self.state = "scanning"
        self._busy_since = time.monotonic()
        present = [r for r in roots if os.path.isdir(r) or os.path.isfile(r)]
        for r in set(roots) - set(present):
            if r not in self.offline:
                self.offline.add(r)
                self.note(f"{r} is missing (unmounted?): its documents are kept, marked offline")
        self.offline -= set(present)
        self._fresh_access()
        files = of_shard(self.indexer.scan(present, self.cfg.settings.exclude), self.shard)
        self.state = "indexing"
        self._files_left = len(files)
        try:
            with with_bar(len(files), self._progress, min_total=50, leave=False) as progress:
                summary = self.indexer.sync(present, files, progress=progress)
        finally:
            self._files_left = 0
        self.current = None
        self._last_work = time.monotonic()
        # A few folders named, not 10,000 homes on one line.
        named = ", ".join(present[:3]) + (f" and {len(present) - 3} more folders" if len(present) > 3 else "")
        logger.info("reconciled %s: indexed %d, unchanged %d, removed %d, failed %d", named,
                    summary.indexed, summary.unchanged, summary.removed, sum(summary.failed.values()))
        return summary

    def _progress(self, n: int, path: str) -> None:
        self.current = display_path(path)
        self._files_left = max(0, self._files_left - n)
        budget = self.cfg.settings.cpu_budget
        if 0 < budget < 100:
            # A duty cycle: after busy time t, rest t * (100 / budget - 1).
            busy = time.monotonic() - self._busy_since
            if busy > 0.5:
                self._stop.wait(busy * (100.0 / budget - 1.0))
                self._busy_since = time.monotonic()

    def apply(self, records: list[Record], rescans: set[str], relooked: set[str] | None = None) -> None:
        """Apply a batch of the watcher's records (pipeline/follow.py: moves first, then every
        path named is looked at on disk), then reconcile the folders to rescan. A folder walked
        is walked once more RELOOK_AFTER seconds later, unless this was that second look (its
        path in ``relooked``)."""
        self.state = "indexing"
        self._busy_since = time.monotonic()  # the duty cycle's busy time starts now, not at the last reconcile
        excluder = Excluder(self.cfg.settings.exclude)
        roots = self.folders()
        self._fresh_access()
        logger.debug("applying %d records, rescans %s: %s", len(records), sorted(rescans), records)
        self._taken = []
        try:
            changed = self._follow(records, roots, excluder, relooked)
            if changed:
                # Counted in the queue until each is done: a folder copied in shows as work to go.
                self._files_left = len(changed)
                try:
                    self.indexer.update(changed, progress=self._progress, wake=self._wakeup,
                                        intake=lambda: self._intake(roots, excluder))
                finally:
                    self._files_left = 0
            self.coll.commit()
            if rescans:  # one pass for all: lost events rescan every folder (10,000 homes)
                self.reconcile(rescan_roots(rescans, roots))
        except Interrupted:
            raise
        except StoreUnwritable as exc:
            self._stalled(exc, records + self._taken, rescans)
        except DeskdexError as exc:
            self.note(f"could not apply changes: {exc}")
        else:
            self._stall.written()
        finally:
            self.current = None
            self._last_work = time.monotonic()
            if self.stall is None:
                self.state = "paused" if self.paused else "idle"

    def _follow(self, records: list[Record], roots: list[str], excluder: Excluder,
                relooked: set[str] | None) -> list[FileInfo]:
        """The files ``records`` name, their moves and removals applied (pipeline/follow.py); a
        watched folder gone is kept, marked offline; the folders walked are looked at again
        RELOOK_AFTER seconds later, unless in ``relooked``."""
        changes: list[Moved | Deleted | Changed] = []
        for r in records:
            if isinstance(r, Deleted) and r.path in roots:
                self.offline.add(r.path)
                self.note(f"{r.path} disappeared: its documents are kept, marked offline")
            elif not isinstance(r, Rescan):
                changes.append(r)
        walked: list[str] = []
        changed = of_shard(follow(self.indexer, changes, roots, excluder, walked), self.shard)
        again = [f for f in walked if f not in roots and f not in (relooked or ())]
        if again:
            self.queue.relook_later(again, RELOOK_AFTER)
        return changed

    def _intake(self, roots: list[str], excluder: Excluder) -> tuple[list[FileInfo], list[str]]:
        """The watcher's records that came while a pass converts, for it to take in (pipeline/
        indexer.py): their files, and the paths they move or delete. None while other work waits (a
        rescan, a job, a retry, an account change), which the pass would otherwise hold up, or
        while paused or stopping."""
        with self._cond:
            if self._stop.is_set() or self.paused or self.on_battery:
                return [], []
            records = self.queue.take_records_alone()
        if not records:
            return [], []
        self._taken.extend(records)
        logger.debug("taking in %d records while converting: %s", len(records), records)
        files = self._follow(records, roots, excluder, None)
        self._files_left += len(files)
        # A file out for conversion that was moved or deleted since (or replaced by a rename onto
        # it) must not have its result stored; one written again is simply looked at again after.
        gone = [p for r in records if isinstance(r, (Moved, Deleted))
                for p in ((r.src, r.dst) if isinstance(r, Moved) else (r.path,))]
        return files, gone
