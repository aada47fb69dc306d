"""Recursive inotify watches of every watched folder on one descriptor, one reader thread and one
ordered stream of ``FsEvent`` (Linux; pipeline/watch.py turns the events into change records).

The watched folders form a tree of ``_Folder`` nodes, one per inotify watch, each knowing its
name and parent: a folder renamed is one node moved (its watches keep their descriptors, and every
event below it names the new path at once), whatever it holds. Events are handled in the order the
kernel queued them, on the reader thread:

- IN_CREATE of a folder, or one moved in (IN_MOVED_TO with no IN_MOVED_FROM in the tree): the
  folder and each folder below it get a watch, then their entries are listed and reported as
  created; what was made in them before their watch existed is in the listing, what comes after
  in events (a path may be both: the records are where to look).
- Renames are paired by cookie. An IN_MOVED_FROM whose IN_MOVED_TO is not read yet waits up to
  ``PAIR_WAIT``, and the events behind it with it: paired, it is one move; unpaired, a move out
  of the tree, reported as deleted, and the watches below it are removed (they would name paths
  that are no longer there).
- IN_Q_OVERFLOW: events were lost. The watches are brought in line with the disk (new folders
  watched, gone ones dropped, paths corrected) and a ``lost`` event asks for a rescan.
- ENOSPC from inotify_add_watch (the watch limit): a ``lost`` event names the folder; the rest of
  the tree is left to scans. IN_UNMOUNT: the folder shows what was below the mount now: watched
  again and rescanned. IN_IGNORED: the watch is forgotten.

The three holes that lost changes under watchdog's book-keeping (found by benchmarks/live_burst.py,
a test each in tests/test_watch.py) are closed by construction or by ``_missed``:
1. Stale paths: a folder moved out keeps no watch, so no old path lingers to be rebased.
2. A folder made while its parent is renamed, before the events are read: its watch is asked for
   at a path that is gone (ENOENT). Its parent is remembered (``_missed``); when a rename brings
   that parent to where it is now, the folders below it without a watch get one and what they
   hold is reported as created.
3. What a folder moved in holds is listed when its event is handled, in the order of the events,
   not later by a path a rename may have changed meanwhile.

Pseudo file systems below a watched folder (/proc, /sys...: pipeline/mounts.py) are not watched.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator

from deskdex.paths import folder_of

from . import inotify as k
from .mounts import pseudo_below

logger = logging.getLogger(__name__)

PAIR_WAIT = 0.5  # seconds an IN_MOVED_FROM waits for its IN_MOVED_TO (the kernel queues them one after the other)

MASK = (k.IN_CREATE | k.IN_DELETE | k.IN_MOVED_FROM | k.IN_MOVED_TO | k.IN_MODIFY | k.IN_CLOSE_WRITE
        | k.IN_DELETE_SELF | k.IN_MOVE_SELF | k.IN_ONLYDIR | k.IN_DONT_FOLLOW)


@dataclass(frozen=True, slots=True)
class FsEvent:
    """What happened at ``path``. ``kind``: created, changed (written), deleted, moved (to ``dest``),
    attrib (permissions or owner), lost (events lost below ``path``, every watched folder when
    empty: ``reason`` says why, overflow, watch_limit or unmounted)."""

    kind: str
    path: str
    is_dir: bool = False
    dest: str = ""
    reason: str = ""


Handler = Callable[[FsEvent], None]


class _Folder:
    __slots__ = ("wd", "name", "parent", "children")

    def __init__(self, wd: int, name: str, parent: _Folder | None) -> None:
        self.wd = wd
        self.name = name  # a top's: its whole path
        self.parent = parent
        self.children: dict[str, _Folder] = {}

    def below(self) -> Iterator[_Folder]:
        """This folder and every folder below it."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())


class TreeWatch:
    """Watches folders recursively; ``handler`` gets every ``FsEvent`` on the reader thread, in order.
    ``attrib``: report permission and owner changes too (enterprise mode)."""

    def __init__(self, handler: Handler, *, attrib: bool = False) -> None:
        self._handler = handler
        self._mask = MASK | (k.IN_ATTRIB if attrib else 0)
        self._fd = k.Inotify()  # OSError past the limit of inotify instances
        self._lock = threading.Lock()
        self._roots: set[str] = set()
        self._tops: dict[str, _Folder] = {}  # nodes with no parent, by path: the roots, unless nested
        self._nodes: dict[int, _Folder] = {}  # by watch descriptor
        self._missed: set[int] = set()  # folders below which a new folder was gone before its watch
        self._paired: set[int] = set()  # cookies of IN_MOVED_TO handled with their IN_MOVED_FROM
        self._thread = threading.Thread(target=self._run, name="deskdex-inotify", daemon=True)
        self._stopped = False

    # -- lifecycle and roots (any thread)

    def start(self) -> TreeWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reading and drop every watch (once; again is a no-op)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._fd.wake()
        if self._thread.is_alive():
            self._thread.join()
        self._fd.close()

    @property
    def watches(self) -> int:
        with self._lock:
            return len(self._nodes)

    def add_root(self, root: str) -> None:
        """Watch ``root`` and every folder below it. OSError when ``root`` itself cannot be watched;
        a folder below it that cannot (the watch limit) is reported as a ``lost`` event."""
        out: list[FsEvent] = []
        with self._lock:
            if root in self._roots:
                return
            self._roots.add(root)
            try:
                self._watch_tree(root, out, report=False, raise_top=True)
            except OSError:
                self._roots.discard(root)
                raise
        self._emit(out)

    def remove_root(self, root: str) -> None:
        """Stop watching ``root``, but not the folders another watched root holds."""
        with self._lock:
            self._roots.discard(root)
            node = self._find(root)
            if node is None or folder_of(root, self._roots) is not None:
                return
            for other in [r for r in self._roots if r.startswith(root.rstrip("/") + "/")]:
                inner = self._find(other)
                if inner is not None:  # a root inside: a top of its own from now on
                    self._detach(inner)
                    inner.name, inner.parent = other, None
                    self._tops[other] = inner
            self._detach(node)
            self._unwatch(node)

    # -- the tree

    def _path(self, node: _Folder) -> str | None:
        """Where ``node`` is now; None for a folder no longer in the tree."""
        parts = []
        while node.parent is not None:
            parts.append(node.name)
            node = node.parent
        if self._tops.get(node.name) is not node:
            return None
        return os.path.join(node.name, *reversed(parts))

    def _find(self, path: str) -> _Folder | None:
        top = folder_of(path, self._tops)
        if top is None:
            return None
        node: _Folder | None = self._tops[top]
        for part in path[len(top):].split("/"):
            if part and node is not None:
                node = node.children.get(part)
        return node

    def _detach(self, node: _Folder) -> None:
        if node.parent is not None:
            if node.parent.children.get(node.name) is node:
                del node.parent.children[node.name]
            node.parent = None
        elif self._tops.get(node.name) is node:
            del self._tops[node.name]

    def _attach(self, wd: int, path: str) -> bool:
        """Put watch ``wd`` at ``path`` in the tree; True when the watch is new or was elsewhere."""
        node = self._nodes.get(wd)
        new = node is None
        head, name = os.path.split(path)
        parent = self._find(head) if name else None
        if node is None:
            node = self._nodes[wd] = _Folder(wd, path, None)
        elif node.parent is parent and (node.name == name if parent else self._tops.get(path) is node):
            return False
        else:
            self._detach(node)
        if parent is None:
            node.name = path
            self._tops[path] = node
        else:
            node.name, node.parent = name, parent
            old = parent.children.get(name)
            if old is not None and old is not node:  # replaced (renamed over): its IN_IGNORED follows
                old.parent = None
            parent.children[name] = node
        return new

    def _unwatch(self, node: _Folder) -> None:
        """Remove the watches of ``node`` (detached) and every folder below it."""
        for n in list(node.below()):
            self._nodes.pop(n.wd, None)
            self._missed.discard(n.wd)
            try:
                self._fd.rm_watch(n.wd)
            except OSError as exc:
                logger.debug("inotify_rm_watch %d: %s", n.wd, exc)

    def _watch_tree(self, top: str, out: list[FsEvent], *, report: bool, raise_top: bool = False,
                    seen: set[int] | None = None) -> None:
        """Watch ``top`` and every folder below it; with ``report``, what the folders watched anew
        hold goes to ``out`` as created, and all that a folder found at a new place holds (moved
        here by a rename whose events are still queued: it may yet read as a move out, a delete of
        where it was). Folders that vanish meanwhile are left to their events."""
        pseudo = pseudo_below(top)
        stack = [(top, False)]
        while stack:
            folder, moved = stack.pop()
            try:
                wd = self._fd.add_watch(folder, self._mask)
            except OSError as exc:
                if folder == top and raise_top:
                    raise
                if exc.errno in (errno.ENOSPC, errno.ENOMEM):
                    logger.debug("cannot watch %s: %s", folder, exc)
                    out.append(FsEvent("lost", folder, True, reason="watch_limit"))
                    return  # the rest is left to the rescan this asks for
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):  # hole 2: renamed (or removed) before
                    parent = self._find(os.path.dirname(folder))
                    if parent is not None:
                        self._missed.add(parent.wd)
                continue
            placed = self._attach(wd, folder)
            tell = report and (placed or moved)
            if seen is not None:
                seen.add(wd)
            try:
                entries = list(_scandir(folder))
            except OSError:
                continue
            for e in entries:
                is_dir = e.is_dir(follow_symlinks=False)
                if tell:
                    out.append(FsEvent("created", e.path, is_dir))
                if is_dir and e.path not in pseudo:
                    stack.append((e.path, tell))

    # -- events (the reader thread)

    def _run(self) -> None:
        pending: deque[tuple[k.RawEvent, float]] = deque()
        while True:
            timeout = None
            if pending:  # an IN_MOVED_FROM waits for its pair
                timeout = max(0.0, pending[0][1] + PAIR_WAIT - time.monotonic())
            events = self._fd.read(timeout)
            if events is None:
                return
            now = time.monotonic()
            pending.extend((e, now) for e in events)
            out: list[FsEvent] = []
            with self._lock:
                try:
                    self._handle(pending, out)
                except Exception:  # a bug here must not end live watching: watch again and rescan
                    logger.exception("inotify event handling failed")
                    pending.clear()
                    try:
                        self._resync(out)
                    except Exception:
                        logger.exception("cannot watch the folders again")
                    out.append(FsEvent("lost", "", reason="overflow"))
            self._emit(out)

    def _handle(self, pending: deque[tuple[k.RawEvent, float]], out: list[FsEvent]) -> None:
        """Handle the events from the left, up to an IN_MOVED_FROM still waiting for its pair."""
        tos = {t.cookie: t for t, _ in pending if t.mask & k.IN_MOVED_TO}
        overflow = any(t.mask & k.IN_Q_OVERFLOW for t, _ in pending)  # what waits is lost anyway
        while pending:
            e, at = pending[0]
            if e.mask & k.IN_MOVED_FROM:
                to = tos.get(e.cookie)
                if to is None and time.monotonic() - at < PAIR_WAIT and not overflow:
                    return
                pending.popleft()
                if to is not None:
                    self._paired.add(e.cookie)
                self._moved(e, to, out)
                continue
            pending.popleft()
            if e.mask & k.IN_MOVED_TO and e.cookie in self._paired:
                self._paired.discard(e.cookie)
                continue
            self._event(e, out)

    def _event(self, e: k.RawEvent, out: list[FsEvent]) -> None:
        if e.mask & k.IN_Q_OVERFLOW:
            logger.debug("inotify queue overflow: watches brought in line with the disk")
            self._paired.clear()
            self._resync(out)
            out.append(FsEvent("lost", "", reason="overflow"))
            return
        node = self._nodes.get(e.wd)
        if node is None:  # a watch removed already (a folder moved out): its late events
            return
        if e.mask & k.IN_IGNORED:
            self._nodes.pop(e.wd, None)
            self._missed.discard(e.wd)
            self._detach(node)
            return
        folder = self._path(node)
        if folder is None:
            return
        path = os.path.join(folder, os.fsdecode(e.name)) if e.name else folder
        if e.mask & k.IN_UNMOUNT:
            self._unmounted(node, folder, out)
        elif e.mask & (k.IN_DELETE_SELF | k.IN_MOVE_SELF):
            if not e.name and node.parent is None and folder in self._roots:  # a watched folder itself
                out.append(FsEvent("deleted", folder, True))
                if e.mask & k.IN_MOVE_SELF:  # moved away: what it holds is no longer under its path
                    self._detach(node)
                    self._unwatch(node)
        elif e.mask & k.IN_CREATE:
            out.append(FsEvent("created", path, e.is_dir))
            if e.is_dir:
                self._watch_tree(path, out, report=True)
        elif e.mask & k.IN_MOVED_TO:  # from outside the tree: made here, as far as the tree goes
            out.append(FsEvent("created", path, e.is_dir))
            if e.is_dir:
                self._watch_tree(path, out, report=True)
        elif e.mask & k.IN_DELETE:
            out.append(FsEvent("deleted", path, e.is_dir))
            if e.is_dir and (child := node.children.get(os.fsdecode(e.name))) is not None:
                child.parent = None  # its IN_IGNORED follows; no event names it meanwhile
                del node.children[child.name]
        elif e.mask & (k.IN_MODIFY | k.IN_CLOSE_WRITE):
            out.append(FsEvent("changed", path, e.is_dir))
        elif e.mask & k.IN_ATTRIB:
            out.append(FsEvent("attrib", path, e.is_dir or not e.name))

    def _moved(self, src_e: k.RawEvent, dst_e: k.RawEvent | None, out: list[FsEvent]) -> None:
        src_parent = self._nodes.get(src_e.wd)
        src_folder = None if src_parent is None else self._path(src_parent)
        dst_parent = None if dst_e is None else self._nodes.get(dst_e.wd)
        dst_folder = None if dst_parent is None else self._path(dst_parent)
        if src_parent is None or src_folder is None:  # from a folder no longer watched
            if dst_e is not None:
                self._event(dst_e, out)  # a move in
            return
        name = os.fsdecode(src_e.name)
        src = os.path.join(src_folder, name)
        node = src_parent.children.pop(name, None) if src_e.is_dir else None
        if node is not None:
            node.parent = None
        if dst_e is None or dst_parent is None or dst_folder is None:  # out of the tree
            out.append(FsEvent("deleted", src, src_e.is_dir))
            if node is not None:
                self._unwatch(node)
            return
        dst = os.path.join(dst_folder, os.fsdecode(dst_e.name))
        out.append(FsEvent("moved", src, src_e.is_dir, dest=dst))
        if not src_e.is_dir:
            return
        if node is None:  # never watched (gone before its watch): watch it where it is, say what it holds
            self._watch_tree(dst, out, report=True)
        else:
            self._attach(node.wd, dst)
        for wd in list(self._missed):  # hole 2: a folder whose new subfolder was renamed away
            missed = self._nodes.get(wd)
            where = None if missed is None else self._path(missed)
            if where is None:
                self._missed.discard(wd)
            elif (where == dst or where.startswith(dst + "/")) and os.path.isdir(where):
                self._missed.discard(wd)
                self._watch_tree(where, out, report=True)

    def _unmounted(self, node: _Folder, folder: str, out: list[FsEvent]) -> None:
        """The file system holding ``folder`` was unmounted: its watches go (IN_IGNORED follows for
        each); the folder now shows what is below the mount point, watched again and rescanned."""
        self._nodes.pop(node.wd, None)
        self._detach(node)
        if folder in self._roots or self._find(os.path.dirname(folder)) is not None:
            if os.path.isdir(folder):
                self._watch_tree(folder, out, report=False)
            out.append(FsEvent("lost", folder, True, reason="unmounted"))

    def _resync(self, out: list[FsEvent]) -> None:
        """After lost events: every watched folder's tree walked again; watches for the folders made
        meanwhile, paths corrected, and the watches of folders no longer there removed."""
        seen: set[int] = set()
        limit = len(out)
        for root in sorted(self._roots):
            try:
                self._watch_tree(root, out, report=False, seen=seen, raise_top=True)
            except OSError as exc:
                logger.warning("cannot watch %s again after lost events: %s", root, exc.strerror or exc)
        if any(ev.reason == "watch_limit" for ev in out[limit:]):
            return  # the walk stopped short: the watches it did not reach are still good ones
        for wd, node in list(self._nodes.items()):
            if wd not in seen:
                self._detach(node)
                self._nodes.pop(wd, None)
                self._fd.rm_watch(wd)
        self._missed.clear()

    def _emit(self, out: list[FsEvent]) -> None:
        for ev in out:
            try:
                self._handler(ev)
            except Exception:  # the handler's bug must not end live watching
                logger.exception("watch handler failed on %s", ev)


def _scandir(folder: str) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` (a function of its own: tests race a listing with renames)."""
    with os.scandir(folder) as it:
        return list(it)
