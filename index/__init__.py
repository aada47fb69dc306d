"""Documents in, searchable out: checksums, the catalog and text store (SQLite), the tantivy index.

Public surface: ``Collection`` (open, put, reuse, delete, commit), ``Row``, ``search``.
"""

from __future__ import annotations

from .collection import Collection
from .search import search
from .store import Row

__all__ = ["Collection", "Row", "search"]
