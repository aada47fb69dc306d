"""Walking watched folders: regular files only, symlinks never followed, exclusions applied."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Iterable, Iterator

import pathspec

logger = logging.getLogger(__name__)

# Hidden files and folders, caches, dependency and build output, editor and download leftovers.
DEFAULT_EXCLUDES = (
    ".*", "node_modules/", "__pycache__/", "*.egg-info/", "venv/", "site-packages/",
    "build/", "dist/", "target/", "CMakeFiles/", "cache/", "Cache/", "caches/", "Caches/",
    "*.pyc", "*.pyo", "*.o", "*.obj", "*.so", "*.a", "*.class", "*.lock",
    "*~", "*.swp", "*.swo", "*.tmp", "*.part", "*.crdownload", "#*#",
)


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size: int
    mtime: float
    # Its size and mtime prove nothing (another file was put at this path): the indexer reads its
    # bytes even when they match the catalog's entry.
    recheck: bool = False


class Excluder:
    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.spec = pathspec.GitIgnoreSpec.from_lines([*DEFAULT_EXCLUDES, *patterns])

    def excluded(self, rel: str, is_dir: bool) -> bool:
        return self.spec.match_file(rel + "/" if is_dir else rel)


def walk(root: str, excluder: Excluder, base: str | None = None) -> Iterator[FileInfo]:
    """Every regular file under ``root`` that no pattern excludes (patterns match paths below
    ``base``, by default root: a folder inside a watched folder is walked with the watched one's)."""
    root = os.path.abspath(root)
    base = os.path.abspath(base) if base is not None else root
    try:
        st = os.stat(root, follow_symlinks=False)
    except OSError as exc:
        logger.warning("cannot read %s: %s", root, exc.strerror)
        return
    if not os.path.isdir(root):
        yield FileInfo(root, st.st_size, st.st_mtime)
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            logger.warning("cannot list %s: %s", folder, exc.strerror)
            continue
        for e in sorted(entries, key=lambda e: e.name, reverse=True):
            rel = os.path.relpath(e.path, base)
            try:
                if e.is_dir(follow_symlinks=False):
                    if not excluder.excluded(rel, True):
                        stack.append(e.path)
                elif e.is_file(follow_symlinks=False) and not excluder.excluded(rel, False):
                    s = e.stat(follow_symlinks=False)
                    yield FileInfo(e.path, s.st_size, s.st_mtime)
            except OSError:
                continue  # vanished between listing and stat
