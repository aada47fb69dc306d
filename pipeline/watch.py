"""Live watching: filesystem events in, debounced and coalesced change records out.

``Watcher`` hands its sink lists of ``Changed``/``Deleted``/``Moved``/``Rescan`` records
(pipeline/coalesce.py says what each means and in which order to apply them). Excluded paths
(built-in and configured patterns, ``.deskdexignore`` files) never show up. Lost events (inotify
queue overflow, watch limit reached) show up as ``Rescan``, never as silence.

On Linux the events come from our own inotify watcher (pipeline/treewatch.py, on the kernel's
interface: pipeline/inotify.py); elsewhere from watchdog's platform observer, through its public
API only (``Observer``, ``FileSystemEventHandler``, the event classes). Both give ``FsEvent``s.

The batching thread sleeps on a condition while nothing happens: no polling, and a timer only
while events are pending. The inotify reader blocks on its descriptor.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from deskdex.paths import folder_of

from . import inotify
from .coalesce import Changed, Coalescer, Deleted, Moved, Record, Rescan
from .ignore import IGNORE_FILE, Rules
from .scan import maildir_tmp
from .treewatch import FsEvent, TreeWatch

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver, ObservedWatch

logger = logging.getLogger(__name__)


Sink = Callable[[list[Record]], None]


class Watcher:
    """Watches folders and calls ``sink(records)`` from its own thread with each settled batch.

    ``debounce``: seconds without events before a batch is handed over; ``max_delay``: longest
    time events wait while a burst goes on. ``patterns``: extra gitignore-style exclusions
    (the built-in ones always apply, and ``.deskdexignore`` files are read). ``attrib``: report
    permission changes too (enterprise mode): a file's as ``Changed``, a folder's as ``Rescan``.
    ``portable``: watchdog's observer even where inotify exists (the other platforms' path, for tests)."""

    def __init__(self, sink: Sink, *, patterns: Iterable[str] = (), debounce: float = 0.3,
                 max_delay: float = 1.0, attrib: bool = False, portable: bool = False) -> None:
        self._sink = sink
        self._attrib = attrib
        self._patterns = tuple(patterns)
        self._debounce = debounce
        self._max_delay = max_delay
        self._rules: dict[str, Rules] = {}
        self._cond = threading.Condition()
        self._coalescer = Coalescer()
        self._first = self._last = 0.0
        self._stopping = False
        self._thread = threading.Thread(target=self._batches, name="deskdex-watch", daemon=True)
        self._tree: TreeWatch | None = None
        self._portable: _Portable | None = None
        self._broken: OSError | None = None  # no inotify instance could be had: scans only
        if portable or not inotify.available():
            self._portable = _Portable(self._on_event, attrib)
        else:
            try:
                self._tree = TreeWatch(self._on_event, attrib=attrib)
            except OSError as exc:  # EMFILE: the user's inotify instances are all taken
                logger.warning("cannot watch folders live (%s); they will be scanned instead", exc.strerror or exc)
                self._broken = exc

    # -- lifecycle

    def start(self) -> "Watcher":
        if self._tree is not None:
            self._tree.start()
        if self._portable is not None:
            self._portable.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; pending records are handed over first."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        if self._tree is not None:
            self._tree.stop()
        if self._portable is not None:
            self._portable.stop()

    def __enter__(self) -> "Watcher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pending(self) -> int:
        """Records gathered and not handed over yet (a burst still going on, or its debounce)."""
        with self._cond:
            return len(self._coalescer)

    # -- folders and exclusions

    @property
    def roots(self) -> list[str]:
        return sorted(self._rules)

    def add(self, root: str) -> bool:
        """Watch ``root`` recursively. False (and a ``Rescan`` record) when the system refuses
        (watch limit reached, folder missing): the caller must rely on scans for it."""
        root = os.path.abspath(root)
        if root in self._rules:
            return True
        self._rules[root] = Rules(root, self._patterns)
        try:
            if self._broken is not None:
                raise self._broken
            if self._tree is not None:
                self._tree.add_root(root)
            elif self._portable is not None:
                self._portable.add_root(root)
        except OSError as exc:
            reason = "watch_limit" if exc.errno in (errno.ENOSPC, errno.EMFILE, errno.ENOMEM) else "unwatchable"
            logger.warning("cannot watch %s: %s; it will be scanned instead", root, exc.strerror or exc)
            self._post(lambda c: c.rescan(root, reason))
            return False
        return True

    def remove(self, root: str) -> None:
        root = os.path.abspath(root)
        self._rules.pop(root, None)
        if self._tree is not None:
            self._tree.remove_root(root)
        elif self._portable is not None:
            self._portable.remove_root(root)

    def set_patterns(self, patterns: Iterable[str]) -> None:
        """New configured exclusions; the caller rescans to drop what they now exclude."""
        self._patterns = tuple(patterns)
        for root in list(self._rules):
            self._rules[root] = Rules(root, self._patterns)

    def excluded(self, path: str, is_dir: bool) -> bool:
        rules = self._rules_for(path)
        if rules is None or rules.excluded_path(path, is_dir):
            return True
        return maildir_tmp(path if is_dir else os.path.dirname(path))

    def rules(self, root: str) -> Rules | None:
        """The exclusions of a watched root, for the scanner (``scan.walk(root, rules)``)."""
        return self._rules.get(os.path.abspath(root))

    def _rules_for(self, path: str) -> Rules | None:
        """The rules of the deepest root ``path`` is at or under: looked up by each folder above
        it, whatever the number of roots (an event with 10,000 roots must not try each)."""
        root = folder_of(path, self._rules)
        return None if root is None else self._rules.get(root)  # add/remove may run on another thread

    # -- events in

    def _on_event(self, event: FsEvent) -> None:
        """From the watching thread (the inotify reader, or watchdog's observer), in order."""
        src, dst, is_dir = event.path, event.dest, event.is_dir
        if event.kind == "lost":
            self._trouble(event.reason, src or None)
            return
        if os.path.basename(src) == IGNORE_FILE or os.path.basename(dst) == IGNORE_FILE:
            self._ignore_file_changed(src, dst)
            return
        if event.kind == "attrib":
            if self._attrib and not self.excluded(src, is_dir):
                if is_dir:  # who may reach everything below may have changed
                    self._post(lambda c: c.rescan(src, "permissions"))
                else:
                    self._post(lambda c: c.changed(src))
        elif event.kind == "moved":
            self._moved(src, dst, is_dir)
        elif event.kind == "deleted":
            if not self.excluded(src, is_dir):
                self._post(lambda c: c.deleted(src, is_dir))
        elif event.kind == "created" and is_dir:
            if not self.excluded(src, True):
                self._post(lambda c: c.born_dir(src))
        elif not is_dir and not self.excluded(src, False):
            created = event.kind == "created"
            self._post(lambda c: c.changed(src, created))

    def _moved(self, src: str, dst: str, is_dir: bool) -> None:
        src_out, dst_out = self.excluded(src, is_dir), self.excluded(dst, is_dir)
        if src_out and dst_out:
            return
        if dst_out:  # renamed to a backup or temp name: gone as far as the index goes
            self._post(lambda c: c.deleted(src, is_dir))
        elif src_out:  # a temp name renamed to its final name: new content
            if is_dir:
                self._post(lambda c: c.rescan(dst, "moved_in"))
            else:  # not born: the final name may have been there (an editor's save)
                self._post(lambda c: c.changed(dst, replaced=True))
        else:
            self._post(lambda c: c.moved(src, dst, is_dir))

    def _ignore_file_changed(self, src: str, dst: str) -> None:
        for path in filter(None, (src, dst)):
            folder = os.path.dirname(path)
            rules = self._rules_for(folder)
            if rules is not None:
                rules.forget(folder)
                self._post(_rescan(folder, "ignore_file"))

    def _trouble(self, reason: str, path: str | None) -> None:
        """From the watching thread: events were lost, or a subfolder could not be watched."""
        if path is not None:
            rules = self._rules_for(path)
            roots = [rules.root] if rules is not None else self.roots
        else:
            roots = self.roots
        named = ", ".join(roots[:3]) + (f" and {len(roots) - 3} more folders" if len(roots) > 3 else "")
        logger.warning("watching is incomplete (%s): falling back to a scan of %s", reason, named)
        for root in roots:
            self._post(_rescan(root, reason))

    def _post(self, change: Callable[[Coalescer], None]) -> None:
        with self._cond:
            now = time.monotonic()
            if not self._coalescer:
                self._first = now
            self._last = now
            change(self._coalescer)
            self._cond.notify()

    # -- batches out

    def _batches(self) -> None:
        while True:
            with self._cond:
                # Sleep until something happens; then until it has been quiet for `debounce`.
                while not self._coalescer and not self._stopping:
                    self._cond.wait()
                while self._coalescer and not self._stopping:
                    now = time.monotonic()
                    due = min(self._last + self._debounce, self._first + self._max_delay)
                    if now >= due:
                        break
                    self._cond.wait(due - now)
                batch = self._coalescer.drain()
                stopping = self._stopping
            if batch:
                try:
                    self._sink(batch)
                except Exception:  # the sink's bug must not stop watching
                    logger.exception("change sink failed on %d records", len(batch))
            if stopping:
                return


__all__ = ["Changed", "Deleted", "Moved", "Record", "Rescan", "Watcher"]


def _rescan(path: str, reason: str) -> Callable[[Coalescer], None]:
    """The change that rescans ``path``, bound to this path (not to a loop variable)."""
    return lambda c: c.rescan(path, reason)


class _Portable:
    """watchdog's platform observer (FSEvents, kqueue, ReadDirectoryChangesW...), a root scheduled each,
    through watchdog's public API only; its events become ``FsEvent``s. Imported only where used:
    on Linux, deskdex never loads watchdog."""

    def __init__(self, handler: Callable[[FsEvent], None], attrib: bool) -> None:
        from watchdog import events as ev
        from watchdog.observers import Observer

        # Without a filter watchdog asks for open and close-without-write events too, and a large tree
        # overflows the queue with them (see shared/notes/libraries.md). Attribute events and lost
        # events exist in newer releases only.
        wanted = ["FileCreatedEvent", "FileModifiedEvent", "FileClosedEvent", "FileDeletedEvent", "FileMovedEvent",
                  "DirCreatedEvent", "DirDeletedEvent", "DirMovedEvent", "EventsLostEvent"]
        wanted += ["FileAttribEvent", "DirAttribEvent"] if attrib else []
        self._filter = [getattr(ev, name) for name in wanted if hasattr(ev, name)]
        self._observer: BaseObserver = Observer()
        self._watches: dict[str, ObservedWatch] = {}
        to_fs = _from_watchdog

        class Handler(ev.FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                fs = to_fs(event)
                if fs is not None:
                    handler(fs)

        self._handler = Handler()

    def start(self) -> None:
        self._observer.start()

    def stop(self) -> None:
        self._observer.stop()
        if self._observer.is_alive():
            self._observer.join()

    def add_root(self, root: str) -> None:
        self._watches[root] = self._observer.schedule(self._handler, root, recursive=True,
                                                      event_filter=self._filter)

    def remove_root(self, root: str) -> None:
        watch = self._watches.pop(root, None)
        if watch is not None:
            self._observer.unschedule(watch)


def _from_watchdog(event: Any) -> FsEvent | None:
    """A watchdog event as an ``FsEvent``; None for those that say nothing of content."""
    kind = event.event_type
    src = os.fsdecode(event.src_path)
    if kind == "events_lost":
        return FsEvent("lost", src, True, reason="overflow")
    if getattr(event, "is_synthetic", False) and kind == "moved":
        return None  # the folder's own move event covers everything below it
    if kind in ("closed_no_write", "opened") or (kind == "modified" and event.is_directory):
        return None  # a folder's own listing changed: its entries bring their own events
    if kind == "moved":
        return FsEvent("moved", src, event.is_directory, dest=os.fsdecode(event.dest_path))
    if kind in ("created", "deleted", "attrib"):
        return FsEvent(kind, src, event.is_directory)
    return FsEvent("changed", src, event.is_directory)  # modified, closed
