"""From files and crawled pages to the index: scanning, watching, ignore rules, change coalescing and the
indexer that brings the index in line with the folders.

A regular package, not an implicit namespace one: setuptools' default editable install cannot import a
namespace subpackage mapped with package-dir from outside its parent's folder (pypa/setuptools#4943),
so ``pip install -e .`` would fail on ``import deskdex.pipeline`` (tests/test_installed.py checks it).

Other packages use the names of ``__all__`` alone, imported from here (tests/test_layout.py), each
taken from its module on first use (core/lazy.py): the daemon's config watch needs inotify alone.
"""

from __future__ import annotations

from deskdex import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import inotify
    from .coalesce import Changed, Deleted, Moved, Record, Rescan
    from .follow import follow as follow_changes
    from .indexer import Indexer, Summary, index_once, of_shard, retry_once, shard_setting
    from .inotify import FolderWatch
    from .progress import with_bar
    from .scan import Excluder, FileInfo
    from .similar import convert_one, near_duplicates
    from .sourcesync import SourceSync, SyncReport
    from .watch import Watcher
    from .websink import IndexSink, known_pages, read_known_pages

__getattr__ = lazy.names(__name__, {
    "Changed": ".coalesce", "Deleted": ".coalesce", "Moved": ".coalesce", "Record": ".coalesce", "Rescan": ".coalesce",
    "follow_changes": ".follow:follow",
    "Indexer": ".indexer", "Summary": ".indexer", "index_once": ".indexer", "of_shard": ".indexer",
    "retry_once": ".indexer", "shard_setting": ".indexer",
    "FolderWatch": ".inotify",
    "with_bar": ".progress",
    "Excluder": ".scan", "FileInfo": ".scan",
    "convert_one": ".similar", "near_duplicates": ".similar",
    "SourceSync": ".sourcesync", "SyncReport": ".sourcesync",
    "Watcher": ".watch",
    "IndexSink": ".websink", "known_pages": ".websink", "read_known_pages": ".websink",
})

# inotify: a module of its own (the kernel's interface, also for the daemon's watch of its config file).
__all__ = [
    "Changed", "Deleted", "Excluder", "FileInfo", "FolderWatch", "IndexSink", "Indexer", "Moved", "Record", "Rescan",
    "SourceSync", "Summary", "SyncReport", "Watcher", "convert_one", "follow_changes", "index_once", "inotify",
    "known_pages", "near_duplicates", "of_shard", "read_known_pages", "retry_once", "shard_setting", "with_bar",
]
