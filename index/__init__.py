"""Documents in, searchable out: checksums, the catalog and text store (SQLite), the tantivy index.

Public surface: ``Collection`` (open, put, reuse, delete, commit; its ``stats`` for ``status``),
``Row``, ``search``, ``document`` (one document's text and metadata, for the document op), and the names of ``__all__`` below. Other packages use those alone, imported
from here (tests/test_layout.py), never a module of the package nor a Collection's ``catalog``.
The names past the first imports are taken from their modules on first use (core/lazy.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deskdex import lazy

from .collection import CATALOG, Collection
from .search import add_snippets, search
from .store import Catalog, Row

if TYPE_CHECKING:
    from . import fingerprints, reports
    from .access import EVERYONE, Access, AccessChecker, Principal
    from .answers import FixedStats, Part, stats_message, stats_of
    from .as_you_type import prefix_last_word
    from .checksums import bytes_checksum, normalise, raw_checksum_of, sampled_checksum_of, text_checksum
    from .documents import document
    from .query import narrowed, type_group
    from .features import Features
    from .readable import ReadableClusters, may_read
    from .remote import RemoteShard
    from .shards import data_dir_of, open_shards, search_shards, shard_search, shard_stats
    from .webpages import WebPages

__getattr__ = lazy.names(__name__, {
    "EVERYONE": ".access", "Access": ".access", "AccessChecker": ".access", "Principal": ".access",
    "FixedStats": ".answers", "Part": ".answers", "stats_message": ".answers", "stats_of": ".answers",
    "prefix_last_word": ".as_you_type",
    "bytes_checksum": ".checksums", "normalise": ".checksums", "raw_checksum_of": ".checksums",
    "sampled_checksum_of": ".checksums", "text_checksum": ".checksums",
    "document": ".documents",
    "Features": ".features",
    "ReadableClusters": ".readable", "may_read": ".readable",
    "RemoteShard": ".remote",
    "data_dir_of": ".shards", "open_shards": ".shards", "search_shards": ".shards", "shard_search": ".shards",
    "shard_stats": ".shards",
    "narrowed": ".query", "type_group": ".query",
    "WebPages": ".webpages",
})

# fingerprints and reports: modules of their own (a text's fingerprints; what the clients list).
# Catalog and CATALOG: for a reader of the crawler's tables beside a running daemon (pipeline/websink.py).
__all__ = [
    "CATALOG", "EVERYONE", "Access", "AccessChecker", "Catalog", "Collection", "Features", "FixedStats", "Part",
    "Principal", "ReadableClusters", "RemoteShard", "Row", "WebPages", "add_snippets", "bytes_checksum", "data_dir_of", "document",
    "fingerprints", "may_read", "normalise", "open_shards", "prefix_last_word", "raw_checksum_of", "reports",
    "sampled_checksum_of", "search", "search_shards", "shard_search", "shard_stats", "stats_message", "stats_of",
    "narrowed", "text_checksum", "type_group",
]
