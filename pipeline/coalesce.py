"""Change records, and the rules that fold a burst of filesystem events into few of them.

Applied in the order ``drain()`` returns them, the records bring a catalog that matched the
disk before the burst in line with the disk after it:

1. ``Moved(src, dst, is_dir)``, in the order they happened: a metadata update; whatever the
   catalog has at ``dst`` (or below it) is replaced.
2. ``Deleted(path, is_dir)``: ``path`` (and everything below it, for a folder) is gone.
3. ``Changed(path, new_file)``: the file may have new content: index it, or drop it if it is gone
   by then. ``new_file``: another file than before the burst is there: its bytes decide, not its
   size and mtime. A folder's: walk it.
4. ``Rescan(path, reason)``: events were lost or the exclusions changed: reconcile ``path``.

Paths recorded before a folder move are rewritten to where they ended up, so step 2 and 3 name
final paths. A path *born* in the burst (created, not there before) never shows up as a move:
a temp file renamed over its final name is ``Changed(final)`` and ``Deleted(temp)``; a folder
made and renamed is ``Deleted(made)`` and ``Changed(renamed)``, walked.

No path an event named is ever left out, even one that came and went within the burst: the
daemon applies a batch later than its events happened (while it converts the one before), and by
then an earlier batch, or a reconcile, may have seen that path on disk and indexed it. Records
are where to look; the daemon looks at the disk for what is there (daemon/loop.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Union


@dataclass(frozen=True, slots=True)
class Changed:
    path: str
    # Another file than before the burst is at path (made there, or renamed onto it): its size and
    # mtime cannot tell it from the one the catalog knows (two files written in the same clock
    # tick, of the same size, look alike), so its bytes decide.
    new_file: bool = False


@dataclass(frozen=True, slots=True)
class Deleted:
    path: str
    is_dir: bool = False


@dataclass(frozen=True, slots=True)
class Moved:
    src: str
    dst: str
    is_dir: bool = False


@dataclass(frozen=True, slots=True)
class Rescan:
    path: str
    reason: str  # "overflow", "watch_limit", "unwatchable", "ignore_file", "moved_in"


Record = Union[Changed, Deleted, Moved, Rescan]

_CHANGED = "changed"


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def _rebase(path: str, src: str, dst: str) -> str:
    return dst + path[len(src):]


class Coalescer:
    """Not thread-safe: the watcher calls it under its own lock."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._moves: list[Moved] = []
        self._pending: dict[str, str | Deleted] = {}  # path -> _CHANGED or its Deleted record
        self._born: set[str] = set()
        self._new: set[str] = set()  # paths holding another file than before (Changed.new_file)
        self._rescans: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self._moves or self._pending or self._rescans)

    def __len__(self) -> int:
        """How many records ``drain()`` would give now."""
        return len(self._moves) + len(self._pending) + len(self._rescans)

    def changed(self, path: str, created: bool = False, replaced: bool = False) -> None:
        """``created``: made at path; ``replaced``: a file renamed onto path from a name not watched."""
        if created and path not in self._pending:
            self._born.add(path)
        if created or replaced:
            self._new.add(path)
        self._pending[path] = _CHANGED

    def born_dir(self, path: str) -> None:
        if path not in self._pending:
            self._born.add(path)

    def deleted(self, path: str, is_dir: bool = False) -> None:
        # Kept even for a path born in this burst: an earlier batch may have indexed it meanwhile.
        if is_dir:
            self._drop_below(path)  # Deleted(folder) covers everything below it
        self._born.discard(path)
        self._new.discard(path)
        self._pending[path] = Deleted(path, is_dir)

    def moved(self, src: str, dst: str, is_dir: bool = False) -> None:
        # Whatever was at dst is replaced. Only a path born in this burst stays born: a rename
        # onto a name that existed before (an editor's save) replaces what the catalog has there.
        dst_born = dst in self._born
        self._pending.pop(dst, None)
        self._born.discard(dst)
        self._new.discard(dst)
        if is_dir:
            # Records below dst stay: they name paths that were there before the move (the daemon
            # looks at each, and a Moved or Deleted folder is looked at whole).
            self._born = {p for p in self._born if not _under(p, dst)}
            self._new = {p for p in self._new if not _under(p, dst)}
            self._pending = {(_rebase(p, src, dst) if _under(p, src) else p): v
                             for p, v in self._pending.items()}
            self._pending = {p: (Deleted(p, v.is_dir) if isinstance(v, Deleted) else v)
                             for p, v in self._pending.items()}
            self._born = {_rebase(p, src, dst) if _under(p, src) else p for p in self._born}
            self._new = {_rebase(p, src, dst) if _under(p, src) else p for p in self._new}
        state = self._pending.pop(src, None)
        new_file = src in self._new
        self._new.discard(src)
        if src in self._born:
            self._born.discard(src)
            if dst_born:
                self._born.add(dst)
            # No Moved for a path the catalog never saw, but src is still looked at: an earlier
            # batch may have indexed it meanwhile.
            self._pending[src] = Deleted(src, is_dir)
            # Looked at where it went, a folder too (walked): the records below a folder need not
            # name all it holds. A listing of its parent reported it, and the tree can be renamed
            # before that listing gets into it (a tree moved in and renamed within at once, on a
            # busy machine: its files went unreported); or what it holds came in an earlier batch,
            # was indexed under src, and the Deleted above removes it. Nothing else finds them.
            self._pending[dst] = _CHANGED
            if is_dir:  # files moved into it follow it (the files made in it are rebased above)
                self._moves = [replace(m, dst=_rebase(m.dst, src, dst)) if _under(m.dst, src) else m
                               for m in self._moves]
            else:
                self._new.add(dst)
            return
        self._moves.append(Moved(src, dst, is_dir))
        if state == _CHANGED:
            self._pending[dst] = _CHANGED
            if new_file:
                self._new.add(dst)

    def rescan(self, path: str, reason: str) -> None:
        self._rescans.setdefault(path, reason)

    def drain(self) -> list[Record]:
        """The records so far, in the order to apply them; empties the coalescer."""
        deleted = [v for v in self._pending.values() if isinstance(v, Deleted)]
        changed = [Changed(p, p in self._new) for p, v in self._pending.items() if v == _CHANGED]
        out: list[Record] = [*self._moves, *deleted, *changed,
                             *(Rescan(p, r) for p, r in self._rescans.items())]
        self._clear()
        return out

    def _drop_below(self, folder: str) -> None:
        self._pending = {p: v for p, v in self._pending.items() if not _under(p, folder)}
        self._born = {p for p in self._born if not _under(p, folder)}
        self._new = {p for p in self._new if not _under(p, folder)}
