"""watchdog's inotify watch group with three holes closed (Linux only: imported by
pipeline/watch.py where inotify exists). Each hole left the changes under a folder unreported,
so never indexed, for as long as the daemon ran; each was found by benchmarks/live_burst.py.

1. Stale paths. A folder moved out of the tree stays watched and stays listed under its old path.
   Brought back elsewhere, its watch gets the new path, but the old entry stays too, and a later
   rename of the old parent rebased it: the folder's events then named a path that does not exist.
2. Folders made while their parent is renamed, before the events are read. The watch for the new
   folder is asked for at the path the event names, gone by then, and watchdog drops the error.
   The parent's rename comes later in the queue; when it does, the folders below the new name that
   have no watch get one, and what they hold is reported as created.
3. A folder moved in: watchdog lists what it holds when it hands the event over, by the path the
   event had when it was read; a parent renamed in between (a move out of the tree holds the
   events behind it for 0.5 s) hid everything in it. It is listed when the event is read instead,
   in the order of the events.

Below a watched folder, pseudo file systems (/proc, /sys...: pipeline/mounts.py) are not watched.
Every watched folder shares one emitter, one queue and one thread (``SharedEmitter``), where
watchdog gives each its own.

These lean on watchdog's private methods (``_move_watches``, ``_add_callback``,
``_recursive_simulate``, ``_build_event_source_path``); tests/test_watch.py has a test for each hole.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from watchdog.events import DirDeletedEvent
from watchdog.observers import inotify as watchdog_inotify
from watchdog.observers.inotify import InotifyEmitter, InotifyWatchGroup
from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent, InotifyFD, Mask, WatchDescriptor
from watchdog.observers.inotify_move_event_grouper import (
    GroupedInotifyEvent,
    InotifyMoveEventGrouper,
    PathedInotifyEvent,
)

from .mounts import pseudo_below

if TYPE_CHECKING:
    from watchdog.observers.api import EventQueue, ObservedWatch

logger = logging.getLogger(__name__)


class TidyWatchGroup(InotifyWatchGroup):
    def __post_init__(self) -> None:
        self._missed: set[WatchDescriptor] = set()  # watched folders below which one could not be
        super().__post_init__()

    def _move_watches(self, move_src_path: bytes, move_dst_path: bytes) -> bool:
        # Hole 1: entries whose watch has another path now are stale; dropped before rebasing.
        by_watch = self._active_callbacks_by_watch
        for path, wd in list(self._active_callbacks_by_path.items()):
            if by_watch.get(wd) != path:
                del self._active_callbacks_by_path[path]
        return super()._move_watches(move_src_path, move_dst_path)

    def _add_all_callbacks(self, path: bytes) -> None:
        # watchdog's, without entering /proc, /sys and their like below ``path`` (pipeline/mounts.py).
        # The walk is watchdog's module's os.walk, as in watchdog (tests/test_watch.py replaces it
        # there to race it).
        self._add_callback(path)
        if not (self.is_recursive and os.path.isdir(path)):
            return
        pseudo = {os.fsencode(p) for p in pseudo_below(os.fsdecode(path))}
        for root, dirnames, _ in vars(watchdog_inotify)["os"].walk(path):
            if pseudo:
                dirnames[:] = [d for d in dirnames if os.path.join(root, d) not in pseudo]
            for dirname in dirnames:
                full_path = os.path.join(root, dirname)
                if not os.path.islink(full_path):
                    self._add_callback(full_path)

    def _add_callback(self, path: bytes) -> None:
        super()._add_callback(path)
        if path not in self._active_callbacks_by_path and path != self.path:  # hole 2
            parent = self._active_callbacks_by_path.get(os.path.dirname(path))
            if parent is not None:
                self._missed.add(parent)

    def on_event(self, event: InotifyEvent) -> None:
        moved_in = event.is_moved_to and event.is_directory and self._source_for_move(event.cookie) is None
        super().on_event(event)
        if not (event.is_moved_to and event.is_directory):
            return
        with self._lock:
            moved = self._build_event_source_path(event)
            if moved is None or not self.is_active:
                return
            if moved_in:  # hole 3
                for sub in self._recursive_simulate(moved):
                    if (sub_path := self._build_event_source_path(sub)) is not None:
                        self._move_event_grouper.put_event(PathedInotifyEvent(sub, sub_path))
            for wd in list(self._missed):  # hole 2
                path = self._active_callbacks_by_watch.get(wd)
                if path is None:  # its watch is gone: nothing left to watch
                    self._missed.discard(wd)
                elif (path == moved or path.startswith(moved + b"/")) and self._watch_what_was_missed(path):
                    self._missed.discard(wd)

    def _watch_what_was_missed(self, folder: bytes) -> bool:
        """Watch the folders below ``folder`` that have no watch, and report what they hold as
        created. False when ``folder`` is not there: renamed again, by a rename still in the queue."""
        if not os.path.isdir(folder):
            return False
        before = set(self._active_callbacks_by_path)
        self._add_all_callbacks(folder)
        for new in sorted(set(self._active_callbacks_by_path) - before):
            wd = self._active_callbacks_by_path[new]
            try:
                entries = list(os.scandir(new))
            except OSError:
                continue
            for e in entries:
                mask = Mask(InotifyConstants.IN_CREATE
                            | (InotifyConstants.IN_ISDIR if e.is_dir(follow_symlinks=False) else 0))
                self._move_event_grouper.put_event(
                    PathedInotifyEvent(InotifyEvent(wd, mask, 0, e.name), os.path.join(new, e.name)))
        return True


class SharedWatchGroup(TidyWatchGroup):
    """One watched root's inotify watches, its events put on a queue that every root shares (read
    by one thread, ``SharedEmitter``'s) rather than on a queue and a thread of its own."""

    def __init__(self, inotify_fd: InotifyFD, path: bytes, event_mask: Mask, grouper: InotifyMoveEventGrouper) -> None:
        self._shared_grouper = grouper
        super().__init__(inotify_fd, path, event_mask=event_mask, is_recursive=True, follow_symlink=False)

    def __post_init__(self) -> None:
        # Before the watches are added (super().__post_init__ adds them): their first events go
        # to the shared queue. The dataclass made a queue of its own, dropped here.
        self._move_event_grouper = self._shared_grouper
        super().__post_init__()

    def on_queue_overflow(self) -> None:
        # watchdog's, without its warning: every root is told, and 10,000 roots made 10,000 lines
        # of it (the watcher says it once, naming the rescan: pipeline/watch.py).
        with self._lock:
            if not self.is_active:
                return
            self._move_event_grouper.discard_pending_events()
            self._remove_callbacks(list(self._active_callbacks_by_watch))
            try:
                self._add_all_callbacks(self.path)
            except OSError as exc:
                logger.warning("cannot watch %s again after lost events: %s", os.fsdecode(self.path), exc)

    def deactivate(self) -> None:
        """Remove this root's watches; the shared queue stays open for the other roots."""
        with self._lock:
            self._is_active = False
            self._remove_callbacks(list(self._active_callbacks_by_watch))


class SharedEmitter(InotifyEmitter):
    """Every watched root on one inotify descriptor, one queue and one thread. watchdog gives each
    scheduled root an emitter thread and a queue of its own: 10,000 homes made 10,000 threads and
    tens of kilobytes a folder. Each root keeps a watch group of its own (its watches and their
    paths, as watchdog tracks them), so what one root sees does not depend on the others; a move
    from one root to another is paired as a move, as within one root.

    Scheduled once through the observer (its watch path is a placeholder, never watched);
    ``add_root``/``remove_root`` then add and remove roots."""

    def __init__(self, event_queue: EventQueue, watch: ObservedWatch, **kwargs: Any) -> None:
        super().__init__(event_queue, watch, **kwargs)
        self._grouper = InotifyMoveEventGrouper()
        self._groups: dict[bytes, SharedWatchGroup] = {}
        self._roots_lock = threading.Lock()

    def add_root(self, path: str) -> None:
        """Watch ``path`` and everything below it; OSError when the root itself cannot be watched."""
        key = os.fsencode(path)
        with self._roots_lock:
            if key not in self._groups:
                self._groups[key] = SharedWatchGroup(self._inotify_fd, key, self.get_event_mask_from_filter(),
                                                     self._grouper)

    def remove_root(self, path: str) -> None:
        with self._roots_lock:
            group = self._groups.pop(os.fsencode(path), None)
        if group is not None:
            group.deactivate()

    def on_thread_start(self) -> None:
        pass  # roots come with add_root, not with the watch this emitter was scheduled for

    def on_thread_stop(self) -> None:
        with self._roots_lock:
            groups, self._groups = list(self._groups.values()), {}
        for group in groups:
            group.deactivate()
        self._grouper.close()  # wakes queue_events up

    def queue_events(self, timeout: float, *, full_events: bool = False) -> None:
        event = self._grouper.read_event()
        if event is not None:
            with self._lock:
                self.build_and_queue_event(event)

    def build_and_queue_event(self, event: GroupedInotifyEvent, *, full_events: bool = False) -> None:
        # A watched root deleted: watchdog compares with its emitter's one path (and then stops
        # that emitter); here it is any root, and the others go on.
        if isinstance(event, PathedInotifyEvent) and event.ev.is_delete_self and event.path in self._groups:
            self.queue_event(DirDeletedEvent(os.fsdecode(event.path)))
            return
        super().build_and_queue_event(event, full_events=full_events)
