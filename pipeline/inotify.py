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

These lean on watchdog's private methods (``_move_watches``, ``_add_callback``,
``_recursive_simulate``, ``_build_event_source_path``); tests/test_watch.py has a test for each hole.
"""

from __future__ import annotations

import os

from watchdog.observers.inotify import InotifyEmitter, InotifyWatchGroup
from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent, Mask, WatchDescriptor
from watchdog.observers.inotify_move_event_grouper import PathedInotifyEvent


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


class TidyEmitter(InotifyEmitter):
    def on_thread_start(self) -> None:  # InotifyEmitter.on_thread_start, with our watch group
        self._inotify = TidyWatchGroup(self._inotify_fd, os.fsencode(self.watch.path),
                                       is_recursive=self.watch.is_recursive,
                                       event_mask=self.get_event_mask_from_filter(),
                                       follow_symlink=self.watch.follow_symlink)
