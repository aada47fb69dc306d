"""Walking watched folders: symlinks never followed, exclusions applied, pseudo file systems
(/proc, /sys...) below a folder not entered (pipeline/mounts.py). Regular files are listed
for indexing; FIFOs, sockets and devices are listed too, marked ``special``, so that they are
recorded as skipped with a reason and never opened."""

from __future__ import annotations

import functools
import logging
import os
import stat
from dataclasses import dataclass
from typing import Iterable, Iterator

import pathspec

from deskdex.converters import special_kind
from deskdex.paths import display_path

from .mounts import pseudo_below

logger = logging.getLogger(__name__)

# Hidden files and folders, caches, dependency and build output, editor and download leftovers.
DEFAULT_EXCLUDES = (
    ".*", "node_modules/", "__pycache__/", "*.egg-info/", "venv/", "site-packages/",
    "build/", "dist/", "target/", "CMakeFiles/", "cache/", "Cache/", "caches/", "Caches/",
    "*.pyc", "*.pyo", "*.o", "*.obj", "*.so", "*.a", "*.class", "*.lock",
    "*~", "*.swp", "*.swo", "*.tmp", "*.part", "*.crdownload", "#*#",
    "*.msf",  # Thunderbird's Mork index beside each mail folder: the folder itself is indexed
)


def maildir_tmp(folder: str) -> bool:
    """True for a Maildir's ``tmp`` folder (beside ``cur`` and ``new``): messages being delivered,
    left out; a delivered message is renamed into ``new`` and indexed there."""
    if os.path.basename(folder.rstrip(os.sep)) != "tmp":
        return False
    parent = os.path.dirname(folder.rstrip(os.sep))
    return os.path.isdir(os.path.join(parent, "cur")) and os.path.isdir(os.path.join(parent, "new"))


# Not frozen: a frozen dataclass sets each field through object.__setattr__, 1.2 us a file against
# 0.17 (a walk makes one per file). Treated as immutable all the same: changed by replace() only.
@dataclass(slots=True, unsafe_hash=True)
class FileInfo:
    path: str  # as the OS gives it: names that are not UTF-8 hold surrogates (display_path shows them)
    size: int
    mtime: float
    special: str | None = None  # "a FIFO", "a socket"...: listed to be reported, never read
    # Its size and mtime prove nothing (another file was put at this path): the indexer reads its
    # bytes even when they match the catalog's entry.
    recheck: bool = False


def file_info(path: str, st: os.stat_result) -> FileInfo | None:
    """What the indexer is told of ``path`` given its lstat: None for a folder or a symlink."""
    if stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
        return None
    return FileInfo(path, st.st_size if stat.S_ISREG(st.st_mode) else 0, st.st_mtime, special_kind(st.st_mode))


class Spec:
    """Git-style patterns matched by pathspec's fastest backend: re2 (a dependency) matches all
    patterns at once, where the pure-Python one tries each in turn for every file, 11 times
    slower. re2 takes only UTF-8, so a name that is not (its bytes kept as surrogates) is matched
    by the pure-Python backend, built on first need."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = list(lines)
        self._fast = pathspec.GitIgnoreSpec.from_lines(self._lines)
        self._any_name: pathspec.GitIgnoreSpec | None = None

    def _fallback(self) -> pathspec.GitIgnoreSpec:
        if self._any_name is None:
            self._any_name = pathspec.GitIgnoreSpec.from_lines(self._lines, backend="simple")
        return self._any_name

    def check_file(self, path: str) -> bool | None:
        """True: excluded, False: included again (a ``!`` pattern), None: no pattern matches."""
        try:
            return self._fast.check_file(path).include
        except UnicodeEncodeError:
            return self._fallback().check_file(path).include

    def match_file(self, path: str) -> bool:
        return bool(self.check_file(path))


class Excluder:
    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.spec = Spec([*DEFAULT_EXCLUDES, *patterns])

    @staticmethod
    def shared(patterns: Iterable[str] = ()) -> Excluder:
        """The one Excluder of ``patterns`` for all who ask with the same ones (matching keeps
        no state). Its re2 set costs about 40 KB: a watcher of 10,000 folders held one each."""
        return _shared_excluder(tuple(patterns))

    def excluded(self, rel: str, is_dir: bool) -> bool:
        return self.spec.match_file(rel + "/" if is_dir else rel)


@functools.lru_cache(maxsize=8)  # the configured patterns, and a few earlier ones still in use
def _shared_excluder(patterns: tuple[str, ...]) -> Excluder:
    return Excluder(patterns)


def walk(root: str, excluder: Excluder, base: str | None = None) -> Iterator[FileInfo]:
    """Every regular file under ``root`` that no pattern excludes (patterns match paths below
    ``base``, by default root: a folder inside a watched folder is walked with the watched one's)."""
    root = os.path.abspath(root)
    # A root given by name is followed if it is a symlink, as `find -H` does; a folder inside a
    # watched one (``base`` given) is not: symlinks in watched folders are never followed.
    by_name = base is None
    base = os.path.abspath(base) if base is not None else root
    try:
        st = os.stat(root, follow_symlinks=by_name)
    except OSError as exc:
        logger.warning("cannot read %s: %s", display_path(root), exc.strerror)
        return
    if not stat.S_ISDIR(st.st_mode):
        info = file_info(root, st)  # None for a symlink that was not to be followed
        if info is not None:
            yield info
        return
    # Paths below base, cut rather than computed with relpath (which normalises both paths
    # each time: a fifth of a re-scan where nothing changed).
    prefix = base if base.endswith(os.sep) else base + os.sep
    # /proc, /sys and their like below root are not entered (root itself is: named by the user).
    pseudo = pseudo_below(root)
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            logger.warning("cannot list %s: %s", display_path(folder), exc.strerror)
            continue
        for e in sorted(entries, key=lambda e: e.name, reverse=True):
            rel = e.path[len(prefix):] if e.path.startswith(prefix) else os.path.relpath(e.path, base)
            try:
                if e.is_dir(follow_symlinks=False):
                    if (not excluder.excluded(rel, True) and not (e.name == "tmp" and maildir_tmp(e.path))
                            and e.path not in pseudo):
                        stack.append(e.path)
                elif not e.is_symlink() and not excluder.excluded(rel, False):
                    info = file_info(e.path, e.stat(follow_symlinks=False))
                    if info is not None:
                        yield info
            except OSError:
                continue  # vanished between listing and stat
