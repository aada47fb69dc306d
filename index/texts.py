"""The catalog's text store: the tagged text of each document, zstd-compressed, once per distinct
text (two copies of a file share one row), keyed by the checksum of its bytes."""

from __future__ import annotations

import sqlite3
from typing import IO

import zstandard

from .sqlconn import begin


class TextStore:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._zc = zstandard.ZstdCompressor(level=6)
        self._zd = zstandard.ZstdDecompressor()

    def put(self, key: str, tagged: bytes) -> bool:
        """Keep a text under its checksum; False when the store had it already (a copy's)."""
        begin(self.db)
        if self.db.execute("SELECT 1 FROM texts WHERE key=?", (key,)).fetchone() is not None:
            return False
        self.db.execute("INSERT INTO texts(key, data, size) VALUES(?,?,?)",
                        (key, self._zc.compress(tagged), len(tagged)))
        return True

    def get(self, key: str) -> bytes | None:
        r = self.db.execute("SELECT data FROM texts WHERE key=?", (key,)).fetchone()
        return self._zd.decompress(r[0]) if r else None

    def open(self, key: str) -> IO[bytes] | None:
        """The tagged text ``key`` as a stream, decompressed as it is read: a snippet reads no
        further than its matches (index/snippets.py). One decompressor per stream, so that
        searches on several threads share none."""
        r = self.db.execute("SELECT data FROM texts WHERE key=?", (key,)).fetchone()
        return zstandard.ZstdDecompressor().stream_reader(r[0]) if r else None

    def collect_garbage(self) -> int:
        """Drop texts no document refers to any more (indexes must not only grow)."""
        begin(self.db)
        # NOT EXISTS probes docs' blob index; NOT IN would first copy every blob into a temporary
        # table, which the writer keeps in memory (Catalog.journal_in_memory).
        cur = self.db.execute("DELETE FROM texts WHERE NOT EXISTS "
                              "(SELECT 1 FROM docs WHERE docs.blob = texts.key)")
        return cur.rowcount
