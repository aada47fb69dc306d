"""Following the disk live: the watcher's change records (pipeline/coalesce.py) applied to the index.

A record says where to look, not what is there. The daemon applies a batch after its events
happened, often much later (while it converted the batch before, or ran a reconcile), and the disk
has moved on meanwhile: a file queued for conversion was renamed, a folder the last batch walked has
new files, a temp file an earlier look indexed is gone. So ``follow`` trusts the records only for
what saves work, and the disk for the rest:

1. ``Moved`` records, in order: the catalog entries at ``src`` (and below it) take the name ``dst``,
   replacing whatever the catalog had there. Nothing is converted: a rename costs no conversion.
2. Then every path the batch names, both ends of each move included, is looked at on disk: a file
   is returned for ``Indexer.update`` (which skips it when its size and mtime match its entry,
   unless the record says another file was put there: two files written in the same clock tick
   with the same size look alike);
   a folder is walked, its files returned, and the entries below it that the disk no longer has
   are removed; anything else (gone, not a regular file, excluded, outside the watched folders)
   is removed, with everything below it.

Looking at a path whose record is stale is harmless: a path changed again since has its own
record in a later batch, looked at again then.
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from typing import Iterable

from deskdex.paths import folder_of, path_to_uri

from .coalesce import Changed, Deleted, Moved
from .indexer import Indexer
from .scan import Excluder, FileInfo, file_info, walk


def follow(indexer: Indexer, records: Iterable[Moved | Deleted | Changed], roots: list[str],
           excluder: Excluder, walked: list[str] | None = None) -> list[FileInfo]:
    """Apply the moves of ``records`` and bring every path they name in line with the disk;
    returns the files to update (the caller converts them, with its progress and queue count).
    The folders walked on the way are added to ``walked``."""
    # The paths to look at, in order, each with whether a record said it went away: such a path
    # outside every watched folder (a folder no longer watched) is removed; another is left alone
    # (the catalog may hold files `deskdex index` was given, and no record may take them away).
    look: dict[str, bool] = {}
    recheck: set[str] = set()  # another file was put there: its size and mtime prove nothing
    by_folder = {r.rstrip(os.sep) or os.sep: r for r in roots}  # as folder_of looks them up
    for r in records:
        if isinstance(r, Moved):
            if _root_of(r.dst, by_folder) is not None:
                # What the rename replaced goes, even when the catalog has nothing at src (not
                # indexed yet): the entry at dst is another file's, however alike they look.
                indexer.remove(r.dst)
                if _catalogued(indexer, r.src):
                    indexer.move(r.src, r.dst)
            look[r.src] = True
            look[r.dst] = look.get(r.dst, False)
        else:
            look[r.path] = look.get(r.path, False) or isinstance(r, Deleted)
            if isinstance(r, Changed) and r.new_file:
                recheck.add(r.path)
    files: list[FileInfo] = []
    done: set[str] = set()  # paths looked at whole (a folder walked, or removed with all below it)
    for path in sorted(look, key=lambda p: p.count(os.sep)):  # a folder before what is below it
        root = _root_of(path, by_folder)
        if root is None:
            if look[path]:
                indexer.remove(path)
                done.add(path)
        elif not _below_any(path, done):
            files.extend(_look(indexer, path, root, excluder, done, recheck, walked))
    return files


def _look(indexer: Indexer, path: str, root: str, excluder: Excluder, done: set[str],
          recheck: set[str], walked: list[str] | None) -> list[FileInfo]:
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    rel = os.path.relpath(path, root)
    info = file_info(path, st) if st is not None else None  # a file, or a FIFO, socket or device to report
    if info is not None:
        if path == root or not excluder.excluded(rel, False):
            _remove_below(indexer, path, keep=set())  # a folder's entries, if it was one
            return [replace(info, recheck=path in recheck)]
    elif st is not None and stat.S_ISDIR(st.st_mode):
        if path == root or not excluder.excluded(rel, True):
            done.add(path)
            if walked is not None:
                walked.append(path)
            found = [replace(f, recheck=True) if f.path in recheck else f for f in walk(path, excluder, base=root)]
            _remove_below(indexer, path, keep={path_to_uri(f.path) for f in found})
            uri = path_to_uri(path)
            if indexer.coll.get(uri) is not None:  # it was a file
                indexer.coll.delete(uri)
            return found
    done.add(path)
    indexer.remove(path)
    return []


def _remove_below(indexer: Indexer, folder: str, keep: set[str]) -> None:
    for uri, *_ in list(indexer.coll.files_under(folder)):
        if uri not in keep:
            indexer.coll.delete(uri)


def _catalogued(indexer: Indexer, path: str) -> bool:
    """Whether the catalog has anything at ``path`` or below it."""
    if indexer.coll.get(path_to_uri(path)) is not None:
        return True
    return any(True for _ in indexer.coll.files_under(path))


def _root_of(path: str, by_folder: dict[str, str]) -> str | None:
    """The watched folder ``path`` is in (the innermost, when they nest), looked up by each folder
    above it: a path costs its depth, not the number of watched folders (10,000 homes)."""
    found = folder_of(path, by_folder)
    return None if found is None else by_folder[found]


def _below_any(path: str, folders: set[str]) -> bool:
    parent = path
    while (up := os.path.dirname(parent)) != parent:
        parent = up
        if parent in folders:
            return True
    return False
