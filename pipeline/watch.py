"""Live watching: watchdog events in, debounced and coalesced change records out.

``Watcher`` hands its sink lists of ``Changed``/``Deleted``/``Moved``/``Rescan`` records
(pipeline/coalesce.py says what each means and in which order to apply them). Excluded paths
(built-in and configured patterns, ``.deskdexignore`` files) never show up. Lost events (inotify
queue overflow, watch limit reached) show up as ``Rescan``, never as silence.

The batching thread sleeps on a condition while nothing happens: no polling, and a timer only
while events are pending. watchdog's own threads block on the inotify descriptor.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver, ObservedWatch

from deskdex.paths import folder_of

from .coalesce import Changed, Coalescer, Deleted, Moved, Record, Rescan
from .ignore import IGNORE_FILE, Rules
from .scan import maildir_tmp

if TYPE_CHECKING:  # Linux only at run time (_make_observer imports them when it can)
    from watchdog.observers.inotify_c import CallbackId, InotifyEvent, Mask, WatchCallback, WatchDescriptor

    from .inotify import SharedEmitter

logger = logging.getLogger(__name__)

# Without this filter watchdog asks inotify for open/close-without-write events too, and a large
# tree overflows the queue with them (see shared/notes/libraries.md).
EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent, FileModifiedEvent, FileClosedEvent, FileDeletedEvent, FileMovedEvent,
    DirCreatedEvent, DirDeletedEvent, DirMovedEvent, DirModifiedEvent,
]


Sink = Callable[[list[Record]], None]


class Watcher:
    """Watches folders and calls ``sink(records)`` from its own thread with each settled batch.

    ``debounce``: seconds without events before a batch is handed over; ``max_delay``: longest
    time events wait while a burst goes on. ``patterns``: extra gitignore-style exclusions
    (the built-in ones always apply, and ``.deskdexignore`` files are read). ``attrib``: report
    permission changes too (enterprise mode): a file's as ``Changed``, a folder's as ``Rescan``
    (inotify sends them anyway with watchdog's mask for modifications; only their handling differs)."""

    def __init__(self, sink: Sink, *, patterns: Iterable[str] = (), debounce: float = 0.3,
                 max_delay: float = 1.0, attrib: bool = False) -> None:
        self._sink = sink
        self._filter = EVENT_FILTER + ([FileAttribEvent, DirAttribEvent] if attrib else [])
        self._patterns = tuple(patterns)
        self._debounce = debounce
        self._max_delay = max_delay
        self._rules: dict[str, Rules] = {}
        self._watches: dict[str, ObservedWatch] = {}
        self._cond = threading.Condition()
        self._coalescer = Coalescer()
        self._first = self._last = 0.0
        self._stopping = False
        self._handler = _Handler(self)
        # One emitter for every root where inotify exists (pipeline/inotify.py); else watchdog's
        # platform observer, a root scheduled each.
        self._observer, self._shared = _make_observer(self._trouble, self._handler, self._filter)
        self._thread = threading.Thread(target=self._batches, name="deskdex-watch", daemon=True)

    # -- lifecycle

    def start(self) -> "Watcher":
        self._observer.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; pending records are handed over first."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        self._observer.stop()
        if self._observer.is_alive():
            self._observer.join()

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
            if self._shared is not None:
                self._shared.add_root(root)
            else:
                self._watches[root] = self._observer.schedule(self._handler, root, recursive=True,
                                                              event_filter=self._filter)
        except OSError as exc:
            reason = "watch_limit" if exc.errno in (errno.ENOSPC, errno.EMFILE) else "unwatchable"
            logger.warning("cannot watch %s: %s; it will be scanned instead", root, exc.strerror or exc)
            self._post(lambda c: c.rescan(root, reason))
            return False
        return True

    def remove(self, root: str) -> None:
        root = os.path.abspath(root)
        self._rules.pop(root, None)
        if self._shared is not None:
            self._shared.remove_root(root)
        watch = self._watches.pop(root, None)
        if watch is not None:
            self._observer.unschedule(watch)

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

    def _on_event(self, event: FileSystemEvent) -> None:
        src = os.fsdecode(event.src_path)
        dst = os.fsdecode(event.dest_path) if event.dest_path else ""
        if os.path.basename(src) == IGNORE_FILE or os.path.basename(dst) == IGNORE_FILE:
            self._ignore_file_changed(src, dst)
            return
        if event.event_type == "attrib" and FileAttribEvent in self._filter:
            if not self.excluded(src, event.is_directory):
                if event.is_directory:  # who may reach everything below may have changed
                    self._post(lambda c: c.rescan(src, "permissions"))
                else:
                    self._post(lambda c: c.changed(src))
            return
        if event.event_type in ("closed_no_write", "opened", "attrib"):
            return
        if event.event_type == "modified" and event.is_directory:
            return  # a folder's own listing changed: its entries bring their own events
        if event.event_type == "moved":
            if event.is_synthetic:
                return  # the folder's own move event covers everything below it
            self._moved(src, dst, event.is_directory)
        elif event.event_type == "deleted":
            if not self.excluded(src, event.is_directory):
                self._post(lambda c: c.deleted(src, event.is_directory))
        elif event.event_type == "created" and event.is_directory:
            if not self.excluded(src, True):
                self._post(lambda c: c.born_dir(src))
        elif not event.is_directory and not self.excluded(src, False):
            created = event.event_type == "created"
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
        """From watchdog's inotify thread: events were lost, or a subfolder could not be watched."""
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


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._watcher._on_event(event)


__all__ = ["Changed", "Deleted", "Moved", "Record", "Rescan", "Watcher", "EVENT_FILTER"]


def _rescan(path: str, reason: str) -> Callable[[Coalescer], None]:
    """The change that rescans ``path``, bound to this path (not to a loop variable)."""
    return lambda c: c.rescan(path, reason)


def _make_observer(trouble: Callable[[str, str | None], None], handler: FileSystemEventHandler,
                   event_filter: list[type[FileSystemEvent]]) -> tuple[BaseObserver, SharedEmitter | None]:
    """inotify with lost events reported and every root on one emitter, on Linux; watchdog's
    platform default elsewhere, with no shared emitter."""
    try:
        from watchdog.observers.inotify import InotifyObserver
        from watchdog.observers.inotify_c import InotifyFD

        from .inotify import SharedEmitter
    except (ImportError, OSError):  # not Linux
        from watchdog.observers import Observer

        logger.info("watching without overflow detection on this platform")
        return Observer(), None

    class TroubleFD(InotifyFD):
        """watchdog's inotify reader, telling us when it loses events. watchdog itself only logs
        a queue overflow and silently skips subfolders it cannot watch (ENOSPC)."""

        def handle_event(self, event: InotifyEvent) -> None:
            if event.is_queue_overflow:
                trouble("overflow", None)
            super().handle_event(event)

        def add_callback(self, path: bytes, mask: Mask, callback: WatchCallback, id_: CallbackId) -> WatchDescriptor:
            try:
                return super().add_callback(path, mask, callback, id_)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EMFILE):
                    trouble("watch_limit", os.fsdecode(path))
                raise

        def _add_callback(self, path: bytes, mask: Mask, callback: WatchCallback, id_: CallbackId) -> WatchDescriptor:
            # watchdog's, without its RuntimeWarning when the callback is there already: a folder
            # moved out of the tree keeps its inotify watch, and coming back it is added again
            # (expected, and a warning raised as an error would end this thread).
            watch = self._get_or_create_watch(path, mask)
            watch.callbacks[id_] = callback
            return watch.wd

    class TroubleObserver(InotifyObserver):
        def __init__(self) -> None:  # InotifyObserver.__init__ with our reader and emitter
            self._inotify_fd = TroubleFD()
            self._inotify_fd.start()
            BaseObserver.__init__(self, SharedEmitter, inotify_fd=self._inotify_fd)

    observer = TroubleObserver()
    # The one emitter, scheduled with a placeholder path it never watches (SharedEmitter.add_root
    # watches the roots); its events are dispatched to ``handler`` by the observer's thread.
    observer.schedule(handler, os.sep, recursive=True, event_filter=event_filter)
    (emitter,) = observer.emitters
    assert isinstance(emitter, SharedEmitter)
    return observer, emitter
