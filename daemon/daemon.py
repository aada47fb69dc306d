"""The long-running indexer: reconcile on start, then follow the watcher's change records.

Threads: the main thread applies changes (the only writer); the watcher thread hands over
settled batches; the socket server answers requests from its own threads with a separate
read-only view of the index. Nothing wakes up while nothing changes: the main thread sleeps on
a condition with no timeout unless there is something to finish (idle workers to release, or
work held back by battery power).

Enterprise mode (``system=True``, ``deskdex daemon --system``): the watched folders are the homes
of the accounts (daemon/accounts.py), every document is stamped with who may read it
(index/access.py), and any local user may connect: searches are filtered by the caller's uid as
the kernel reports it, root sees everything, and only root may change anything. Permission
changes are followed live for files (inotify IN_ATTRIB) and folders (a rescan of the folder,
which converts nothing), and caught by every reconcile; account changes (/etc/passwd, /etc/group)
are watched and bring a rescan of every home.
"""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from typing import Any, Callable

from converters.errors import DeskdexError, Interrupted
from index import Collection, search
from index.access import EVERYONE

from . import config as config_mod
from . import accounts as accounts_mod
from .coalesce import Changed, Deleted, Moved, Record, Rescan
from .config import Config
from .pipeline import Indexer, Summary
from .scan import Excluder, FileInfo

logger = logging.getLogger(__name__)

IDLE_RELEASE_SECONDS = 20.0  # default of the `release_after` setting
PUBLIC_OPS = ("status", "search")  # what a user other than root may ask an enterprise-mode daemon


class Daemon:
    def __init__(self, cfg: Config, system: bool = False) -> None:
        self.cfg = cfg
        self.system = system
        self.accounts: list[accounts_mod.Account] = []
        self._accounts_stamp: tuple[int, ...] = ()
        self._etc_observer: Any = None
        self.state = "starting"
        self.current: str | None = None
        self.notes: list[str] = []
        self.offline: set[str] = set()
        self.paused = False
        self.on_battery = False
        self._busy_since = time.monotonic()
        self._files_left = 0  # files of the reconcile under way not yet done (part of the queue)
        self._counts: tuple[str | None, dict[str, Any], dict[str, int]] | None = None
        self._records: list[Record] = []
        self._rescan: set[str] = set()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._started = time.time()
        self._check_accounts = False
        self._homes: set[str] = set()  # the folders watched (enterprise mode: the homes found so far)
        self._last_work = 0.0
        self.coll = cfg.open_collection(writable=True)
        self.reader = Collection.open(cfg.home.data_dir)
        self._read_lock = threading.Lock()
        self._write_lock = threading.RLock()  # the one writer: file changes and crawled pages take turns
        self.indexer = Indexer(self.coll, cfg.limits, workers=int(cfg["workers"]), idle=True,
                               commit_every=int(cfg["commit_every"]), commit_seconds=float(cfg["commit_seconds"]),
                               stop=self._stop)
        self.watcher: Any = None
        if system:
            self._load_accounts()

    # -- enterprise mode -------------------------------------------------------------------------
    def folders(self) -> list[str]:
        """The watched folders: the configured ones, or (system) the accounts' homes and those."""
        if not self.system:
            return self.cfg.folders()
        extra = [os.path.abspath(os.path.expanduser(f)) for f in self.cfg["folders"]]
        return sorted(set(accounts_mod.homes(self.accounts)) | set(extra))

    def _load_accounts(self) -> None:
        self._accounts_stamp = accounts_mod.stamp()
        self.accounts = accounts_mod.load(self.cfg["accounts"])
        logger.info("accounts: %s", ", ".join(f"{a.name} ({a.uid})" for a in self.accounts) or "none")

    def _fresh_access(self) -> None:
        """A new access checker for each pass: folders' permissions are remembered only within one."""
        if self.system:
            from index.access import AccessChecker

            self.indexer.access = AccessChecker(a.principal for a in self.accounts).owner_readers

    def _accounts_changed(self) -> None:
        """/etc/passwd or /etc/group changed: watch new homes, drop removed ones, and look again at
        who may read every document (group memberships may have changed)."""
        changed = accounts_mod.stamp() != self._accounts_stamp
        if changed:
            self._load_accounts()
            for delay in (1.0, 5.0):  # useradd writes /etc/passwd first, then makes the home
                timer = threading.Timer(delay, self._ask_accounts_check)
                timer.daemon = True
                timer.start()
        before, after = self._homes, set(self.folders())
        if not changed and before == after:
            return
        self._homes = after
        if self.watcher is not None:
            for home in after - before:
                self.watcher.add(home)
            for home in before - after:
                self.watcher.remove(home)
        with self._cond:
            self._records.extend(Deleted(home, True) for home in sorted(before - after))
            self._rescan.update(after if changed else after - before)
            self._cond.notify_all()

    def _ask_accounts_check(self) -> None:
        with self._cond:
            self._check_accounts = True
            self._cond.notify_all()

    def _watch_accounts(self) -> None:
        from watchdog.events import FileClosedEvent, FileCreatedEvent, FileModifiedEvent, FileMovedEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        daemon = self
        names = {os.path.basename(p) for p in accounts_mod.ACCOUNT_FILES}

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                paths = (os.fsdecode(event.src_path), os.fsdecode(event.dest_path or ""))
                if any(os.path.basename(p) in names for p in paths):
                    daemon._ask_accounts_check()

        self._etc_observer = Observer()
        self._etc_observer.schedule(Handler(), os.path.dirname(accounts_mod.ACCOUNT_FILES[0]), recursive=False,
                                    event_filter=[FileCreatedEvent, FileModifiedEvent, FileClosedEvent, FileMovedEvent])
        self._etc_observer.start()

    # -- lifecycle -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the daemon to stop: the file at hand is finished, the rest committed (signal-safe)."""
        self._stop.set()
        # Not under the condition's lock: this runs in a signal handler, maybe while the main
        # thread holds it; the main loop looks at the event at least when it wakes.
        threading.Thread(target=self._wake, daemon=True).start()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        if self._etc_observer is not None:
            self._etc_observer.stop()
            self._etc_observer.join()
        self.indexer.release()
        self.coll.close()
        self.reader.close()

    def run(self, watch: bool = True, once: bool = False) -> None:
        """Reconcile every folder, then apply changes until ``stop()``."""
        from .watch import Watcher

        roots = self.folders()
        self._homes = set(roots)
        if watch and not once:
            self.watcher = Watcher(self.enqueue, patterns=self.cfg["exclude"], attrib=self.system).start()
            if self.system:
                self._watch_accounts()
            for root in roots:
                if not self.watcher.add(root):
                    self.note(f"{root} cannot be watched live; it is rescanned on start")
        crawls = None
        try:
            with self._write_lock:
                self.reconcile(roots)
            if once:
                return
            from .crawls import CrawlScheduler

            crawls = CrawlScheduler(self).start()
            while True:
                with self._cond:
                    while not self._stop.is_set() and not self._has_work():
                        self.state = "paused" if self.paused or self.on_battery else "idle"
                        self._cond.wait(self._wait_timeout())
                        self._release_if_idle()
                    if self._stop.is_set():
                        break
                    check, self._check_accounts = self._check_accounts, False
                if check:
                    self._accounts_changed()
                with self._cond:
                    records, self._records = self._records, []
                    rescans, self._rescan = self._rescan, set()
                with self._write_lock:
                    self.apply(records, rescans)
        except Interrupted as exc:
            logger.info("%s", exc)
        finally:
            if crawls is not None:
                crawls.stop()
        self.state = "stopping"

    def _has_work(self) -> bool:
        return not self.paused and not self._battery_hold() and bool(
            self._records or self._rescan or self._check_accounts)

    def _battery_hold(self) -> bool:
        """True while work waits for mains power (checked only when there is work)."""
        if self.cfg["index_on_battery"] or not (self._records or self._rescan):
            self.on_battery = False
            return False
        from .power import on_battery

        was, self.on_battery = self.on_battery, on_battery()
        if self.on_battery and not was:
            self.note("on battery: indexing waits for mains power (setting index_on_battery)")
        return self.on_battery

    def _holding(self) -> bool:
        """Something kept only for work to come: converter processes or an open tantivy index."""
        return self.indexer._pool is not None or not self.coll.suspended or not self.reader.suspended

    def _wait_timeout(self) -> float | None:
        if self.on_battery:
            return 60.0  # look at the power supply again in a minute, only while work waits
        if self._holding():
            return max(0.1, self._last_work + float(self.cfg["release_after"]) - time.monotonic())
        return None  # nothing to do, nothing held: sleep until something happens

    def _release_if_idle(self) -> None:
        """After ``release_after`` quiet seconds: converters end, tantivy is let go (its threads
        and caches); all come back on the next change or search. Then nothing runs at all."""
        if not self._holding() or time.monotonic() - self._last_work < float(self.cfg["release_after"]):
            return
        self.indexer.release()
        with self._write_lock:
            self.coll.suspend()
        with self._read_lock:
            self.reader.suspend()

    def _touch(self) -> None:
        """A request opened something: count it as work, so the release timer runs again."""
        with self._cond:
            self._last_work = time.monotonic()
            self._cond.notify_all()

    def writing(self) -> threading.RLock:
        """Hold while using the writable collection from another thread than the main one."""
        return self._write_lock

    # -- input -------------------------------------------------------------------------------------
    def enqueue(self, records: list[Record]) -> None:
        """Called by the watcher with each settled batch."""
        with self._cond:
            for r in records:
                if isinstance(r, Rescan):
                    self._rescan.add(r.path)
                    if r.reason in ("overflow", "watch_limit", "unwatchable"):
                        self.note(f"live watching lost events ({r.reason}) under {r.path}: fell back to a scan")
                else:
                    self._records.append(r)
            self._cond.notify_all()

    def note(self, text: str) -> None:
        logger.warning("%s", text)
        self.notes = (self.notes + [text])[-10:]

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
        files = self.indexer.scan(present, self.cfg["exclude"])
        self.state = "indexing"
        bar = _bar(len(files))
        self._files_left = len(files)
        progress = self._progress if bar is None else (lambda n, path: (bar.update(n), self._progress(n, path)))
        try:
            summary = self.indexer.sync(present, files, progress=progress)
        finally:
            self._files_left = 0
            if bar is not None:
                bar.close()
        self.current = None
        self._last_work = time.monotonic()
        logger.info("reconciled %s: indexed %d, unchanged %d, removed %d, failed %d", ", ".join(present),
                    summary.indexed, summary.unchanged, summary.removed, sum(summary.failed.values()))
        return summary

    def _progress(self, n: int, path: str) -> None:
        self.current = path
        self._files_left = max(0, self._files_left - n)
        budget = float(self.cfg["cpu_budget"])
        if 0 < budget < 100:
            # A duty cycle: after busy time t, rest t * (100 / budget - 1).
            busy = time.monotonic() - self._busy_since
            if busy > 0.5:
                self._stop.wait(busy * (100.0 / budget - 1.0))
                self._busy_since = time.monotonic()

    def apply(self, records: list[Record], rescans: set[str]) -> None:
        self.state = "indexing"
        excluder = Excluder(self.cfg["exclude"])
        roots = self.folders()
        self._fresh_access()
        try:
            changed: list[FileInfo] = []
            for r in records:
                if isinstance(r, Moved):
                    if self._inside(r.dst, roots):
                        self.indexer.move(r.src, r.dst)
                    else:
                        self.indexer.remove(r.src)
                elif isinstance(r, Deleted):
                    if r.path in roots:
                        self.offline.add(r.path)
                        self.note(f"{r.path} disappeared: its documents are kept, marked offline")
                    else:
                        self.indexer.remove(r.path)
                elif isinstance(r, Changed):
                    info = _stat(r.path)
                    if info is None:
                        self.indexer.remove(r.path)
                    elif not _excluded(r.path, roots, excluder):
                        changed.append(info)
            if changed:
                self.indexer.update(changed, progress=self._progress)
            self.coll.commit()
            for path in rescans:
                self.reconcile([p for p in roots if p == path or path.startswith(p.rstrip("/") + "/")
                                or p.startswith(path.rstrip("/") + "/")] or [path])
        except Interrupted:
            raise
        except DeskdexError as exc:
            self.note(f"could not apply changes: {exc}")
        finally:
            self.current = None
            self._last_work = time.monotonic()
            self.state = "paused" if self.paused else "idle"

    @staticmethod
    def _inside(path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    # -- requests (from the socket server's threads) --------------------------------------------------
    def request_handlers(self) -> dict[str, Callable[[Any], Any]]:
        """The socket server's table: each op gets the request's arguments and the caller (``peer``)."""
        from .server import RequestError

        def adapt(fn: Callable[..., dict[str, Any]]) -> Callable[[Any], Any]:
            def handle(req: Any) -> Any:
                if self.system and req.peer.uid != 0 and (req.op not in PUBLIC_OPS or req.peer.uid is None):
                    raise RequestError("forbidden", f"{req.op}: only root may do this on the system daemon")
                try:
                    return fn(peer=req.peer, **req.args)
                except DeskdexError as exc:
                    raise RequestError(exc.code, str(exc)) from exc
                except TypeError as exc:
                    raise RequestError("bad_args", f"{req.op}: {exc}") from exc
            return handle

        return {op: adapt(fn) for op, fn in self.handlers().items()}

    def handlers(self) -> dict[str, Callable[..., dict[str, Any]]]:
        return {"status": self.op_status, "search": self.op_search, "cli": self.op_cli,
                "pause": self.op_pause, "resume": self.op_resume, "watch_list": self.op_watch_list, "watch_add": self.op_watch_add,
                "watch_remove": self.op_watch_remove, "exclude_list": self.op_exclude_list,
                "exclude_add": self.op_exclude_add, "exclude_remove": self.op_exclude_remove,
                "dups": self.op_dups, "duplicates": self.op_duplicates}

    def op_status(self, failures: bool = False, peer: Any = None, **_: Any) -> dict[str, Any]:
        from .cli import failure_list

        if self.system and (peer is None or peer.uid != 0):  # counts only: no paths of others' files
            failures = False
        with self._read_lock:
            last = self.reader.catalog.get_meta("last_commit")
            if self._counts is None or self._counts[0] != last:
                # Counting a big catalog takes a while: once per commit, not once per question
                # (the tray asks every few seconds).
                self._counts = (last, self.reader.catalog.counts(), self.reader.sizes())
            counts, sizes = dict(self._counts[1]), self._counts[2]
            if failures:
                counts["failures"] = failure_list(self.reader)
        with self._cond:
            queue = len(self._records) + len(self._rescan) + self._files_left
        out = {"state": self.state, "queue": queue, "current": self.current, **counts, **sizes,
               "cpu_seconds": round(self._cpu_seconds(), 2),
               "last_commit": float(last) if last else None, "folders": self.folders(),
               "offline": sorted(self.offline), "notes": self.notes, "pid": os.getpid(),
               "converted": self.indexer.converted, "paused": self.paused,
               "uptime": round(time.time() - self._started, 1), "system": self.system}
        if self.system and (peer is None or peer.uid != 0):
            for key in ("current", "folders", "offline", "notes", "pid"):
                out[key] = [] if isinstance(out[key], list) else None
        return out

    def _cpu_seconds(self) -> float:
        """CPU used since start: this process, converters already ended, and those running."""
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
        pool = self.indexer._pool
        for w in (pool._workers if pool is not None else []):
            try:
                with open(f"/proc/{w.process.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                pass  # not Linux, or the worker just ended
        return total

    def op_search(self, query: str = "", limit: int = 10, offset: int = 0, sort: str = "relevance",
                  all: bool = False, snippets: bool = True, peer: Any = None, **_: Any) -> dict[str, Any]:
        return self._search(query, int(limit), int(offset), sort, bool(all), bool(snippets), peer).to_json()

    def op_cli(self, argv: list[str] | None = None, color: bool = False, peer: Any = None,
               **_: Any) -> dict[str, Any]:
        """``deskdex search ...`` run here for daemon/launch.py: its command line parsed and its
        output rendered as daemon.cli would (the same parser, the same rendering)."""
        from .cli import parse_search
        from .render import render_results
        from .server import RequestError

        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise RequestError("bad_args", "cli: argv must be a list of strings")
        args = parse_search(argv)
        found = self._search(" ".join(args.query), args.limit, args.offset, args.sort, args.all,
                             not args.paths, peer)
        return {"out": render_results(found, as_json=args.json, paths=args.paths, color=bool(color)), "exit": 0}

    def _search(self, query: str, limit: int, offset: int, sort: str, every: bool, snippets: bool,
                peer: Any) -> Any:
        # Who asks is the kernel's word (SO_PEERCRED), never an argument of the request.
        reader = None
        if self.system and (peer is None or peer.uid != 0):
            reader = peer.uid if peer is not None and peer.uid is not None else EVERYONE
        with self._read_lock:
            found = search(self.reader, query, limit=limit, offset=offset, sort=sort, collapse=not every,
                           reader=reader, snippets=snippets)
        self._touch()
        return found

    def op_dups(self, path: str | None = None, **_: Any) -> dict[str, Any]:
        from .duplicates import clusters, near_duplicates

        with self._read_lock:
            if path is None:
                return clusters(self.reader)
        # The duplicate tables live with the writer; the main thread may be using it.
        with self._cond:
            return near_duplicates(self.coll, path)

    def op_duplicates(self, uri: str = "", **_: Any) -> dict[str, Any]:
        """The other documents of a search hit's cluster (the tray expands a hit with them)."""
        with self._read_lock:
            row = self.reader.get(uri)
            others = self.reader.duplicates_of(row) if row is not None else []
        return {"paths": [r.uri if "#" in r.uri else r.path for r in others]}

    def op_pause(self, **_: Any) -> dict[str, Any]:
        with self._cond:
            self.paused = True
            self.state = "paused" if self.state in ("idle", "paused") else self.state
            self._cond.notify_all()
        return {"state": "paused"}

    def op_resume(self, **_: Any) -> dict[str, Any]:
        with self._cond:
            self.paused = False
            self._cond.notify_all()
        return {"state": self.state}

    def op_watch_list(self, **_: Any) -> dict[str, Any]:
        out = []
        with self._read_lock:
            for f in self.folders():
                rows = list(self.reader.catalog.db.execute(
                    "SELECT status, count(*) FROM docs WHERE path >= ? AND path < ? GROUP BY status",
                    (f.rstrip("/") + "/", f.rstrip("/") + "0")))
                n = dict(rows)
                out.append({"path": f, "documents": n.get("ok", 0), "failed": n.get("failed", 0),
                            "offline": f in self.offline})
        return {"folders": out}

    def _set(self, key: str, values: list[str]) -> None:
        config_mod.save(self.cfg.home, {key: values})
        self.cfg = config_mod.load(self.cfg.home)

    def op_watch_add(self, path: str = "", **_: Any) -> dict[str, Any]:
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isdir(path):
            raise config_mod.ConfigError(f"not a folder: {path}")
        # The default folder stays watched when the first is added (a system daemon has none).
        folders = [os.path.abspath(os.path.expanduser(f)) for f in self.cfg["folders"]] if self.system \
            else self.cfg.folders()
        if path not in folders:
            self._set("folders", folders + [path])
            if self.watcher is not None:
                self.watcher.add(path)
            with self._cond:
                self._rescan.add(path)
                self._cond.notify_all()
        return self.op_watch_list()

    def op_watch_remove(self, path: str = "", **_: Any) -> dict[str, Any]:
        path = os.path.abspath(os.path.expanduser(path))
        folders = [f for f in self.cfg["folders"] if os.path.abspath(os.path.expanduser(f)) != path]
        self._set("folders", folders)
        if self.watcher is not None:
            self.watcher.remove(path)
        with self._cond:
            self._records.append(Deleted(path, True))
            self._cond.notify_all()
        return self.op_watch_list()

    def op_exclude_list(self, **_: Any) -> dict[str, Any]:
        return {"exclude": list(self.cfg["exclude"])}

    def op_exclude_add(self, pattern: str = "", **_: Any) -> dict[str, Any]:
        return self._exclude([*self.cfg["exclude"], pattern] if pattern not in self.cfg["exclude"] else
                             list(self.cfg["exclude"]))

    def op_exclude_remove(self, pattern: str = "", **_: Any) -> dict[str, Any]:
        return self._exclude([p for p in self.cfg["exclude"] if p != pattern])

    def _exclude(self, patterns: list[str]) -> dict[str, Any]:
        self._set("exclude", patterns)
        if self.watcher is not None:
            self.watcher.set_patterns(patterns)
        with self._cond:
            self._rescan.update(self.folders())  # newly excluded files leave, re-included ones come back
            self._cond.notify_all()
        return self.op_exclude_list()


def _bar(total: int) -> Any:
    """A progress bar on a terminal (``make run``), nothing under a service manager."""
    import sys

    if not sys.stderr.isatty() or total < 50:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="file", file=sys.stderr, dynamic_ncols=True, smoothing=0.05, leave=False)


def _stat(path: str) -> FileInfo | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    import stat as stat_mod

    if not stat_mod.S_ISREG(st.st_mode):
        return None
    return FileInfo(path, st.st_size, st.st_mtime)


def _excluded(path: str, roots: list[str], excluder: Excluder) -> bool:
    for r in roots:
        if path.startswith(r.rstrip("/") + "/"):
            return excluder.excluded(os.path.relpath(path, r), False)
    return True  # outside every watched folder
