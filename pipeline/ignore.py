"""Exclusions for one watched folder: the built-in and configured patterns (scan.Excluder) plus
``.deskdexignore`` files found in the folder and below, gitignore-style.

A pattern in ``F/.deskdexignore`` applies to paths below ``F``, relative to ``F`` (as git does
with nested .gitignore files); deeper files are read after shallower ones, so the last matching
pattern decides, and ``!pattern`` in a deeper file can re-include what a shallower one excluded.

``Rules`` has the same ``excluded(rel, is_dir)`` method as ``scan.Excluder``, so it can be
passed to ``scan.walk`` as is.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Iterable

from deskdex.converters import open_regular
from deskdex.errors import UnreadableFile
from deskdex.paths import display_path
from deskdex.settings import pattern_problem

from .scan import Excluder, Spec

logger = logging.getLogger(__name__)

IGNORE_FILE = ".deskdexignore"


class Rules:
    """Exclusions under ``root``. Ignore files are read on first use and cached; call
    ``forget(folder)`` when a watcher sees one change."""

    def __init__(self, root: str, patterns: Iterable[str] = ()) -> None:
        self.root = os.path.abspath(root)
        self.base = Excluder.shared(patterns)  # one for every root: the same patterns
        self._specs: dict[str, Spec | None] = {}
        self._lock = threading.Lock()  # the watcher's thread and a scan may ask at once

    def excluded(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` (a path relative to root, "/"-separated or os.sep) is left out."""
        rel = rel.replace(os.sep, "/")
        if rel in ("", "."):
            return False
        verdict = self.base.spec.check_file(rel + "/" if is_dir else rel)
        parts = rel.split("/")
        # Ignore files in the root and in every folder above the path, shallowest first.
        for depth in range(len(parts)):
            folder = os.path.join(self.root, *parts[:depth])
            spec = self._spec(folder)
            if spec is None:
                continue
            sub = "/".join(parts[depth:])
            include = spec.check_file(sub + "/" if is_dir else sub)
            if include is not None:
                verdict = include
        return bool(verdict)

    def excluded_path(self, path: str, is_dir: bool) -> bool:
        """Like ``excluded`` for an absolute path; paths outside root are excluded."""
        rel = os.path.relpath(path, self.root)
        if rel == ".." or rel.startswith(".." + os.sep):
            return True
        return self.excluded(rel, is_dir)

    def forget(self, folder: str | None = None) -> None:
        """Drop the cached ignore file of ``folder`` (all of them with None), to be read again."""
        with self._lock:
            if folder is None:
                self._specs.clear()
            else:
                self._specs.pop(os.path.abspath(folder), None)

    def _spec(self, folder: str) -> Spec | None:
        with self._lock:
            if folder in self._specs:
                return self._specs[folder]
        spec = load(folder)
        with self._lock:
            self._specs[folder] = spec
        return spec


# Patterns people write fit in far less; a huge or endless file must not stall the scan.
MAX_IGNORE_BYTES = 1 << 20


def load(folder: str) -> Spec | None:
    """The patterns of ``folder/.deskdexignore``, or None when there is none (or it is unreadable)."""
    path = os.path.join(folder, IGNORE_FILE)
    if not os.path.lexists(path):
        return None
    try:
        # As root (enterprise mode) a user's symlink here could name any file: not followed.
        with open_regular(path, nofollow=os.geteuid() == 0) as f:
            lines = f.read(MAX_IGNORE_BYTES).decode("utf-8", "replace").splitlines()
    except UnreadableFile as exc:
        logger.warning("cannot read %s: %s", display_path(path), exc)
        return None
    kept = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        # A line that does not compile (``!``, ``[z-a]``) would fail every scan and every event below
        # this folder: it is left out, the file's other lines kept, as the daemon does with the setting.
        why = pattern_problem(line)
        if why is not None:
            logger.warning("%s, line %d: %s: left out", display_path(path), number, why)
            continue
        kept.append(line)
    return Spec(kept) if kept else None
