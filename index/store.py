"""The catalog and text store: one SQLite database (WAL) per index.

``docs`` has one row per document (file, archive member or web page); a file whose failure may
not happen again (errors.TRANSIENT_REASONS) has a ``retry_at`` and counts its ``attempts``.
``texts`` holds the tagged text, zstd-compressed, once per distinct text (two copies of a file
share one row).
``pending`` lists URIs whose tantivy entries must be brought in line with ``docs``: a URI is
written there in the same transaction as its row and removed only after tantivy commits, so
a crash between the two is repaired on the next open (see ``Collection.open``).

Every sqlite3 error met through a Catalog's connection arrives translated into deskdex.errors
(index/sqlconn.py): a full disk is DiskFull, a lock held by another program StoreLocked, and so on.

A Catalog holds the documents' rows, the ``pending`` journal and the meta table; beside them, the
parts with a job of their own: ``texts`` (index/texts.py, the text store) and ``retries``
(index/retrytable.py, transient failures tried again).
"""

from __future__ import annotations

import json
import operator
import os
import time
from dataclasses import dataclass, fields
from typing import Iterable, Iterator

from deskdex.errors import IndexMissing, StoreError
from deskdex.paths import path_to_uri

from .retrytable import RetryTable
from .sqlconn import begin, connect
from .texts import TextStore

# The writer's page cache, in KiB (SQLite's default is 2 MiB).
WRITER_CACHE_KIB = 16384

SCHEMA = """
CREATE TABLE IF NOT EXISTS docs(
  id INTEGER PRIMARY KEY,
  uri TEXT UNIQUE NOT NULL,
  parent TEXT,
  path TEXT,
  source TEXT NOT NULL DEFAULT 'files',
  size INTEGER NOT NULL DEFAULT 0,
  mtime REAL NOT NULL DEFAULT 0,
  raw_sum TEXT,
  text_sum TEXT,
  blob TEXT,
  mime TEXT,
  title TEXT,
  status TEXT NOT NULL DEFAULT 'ok',
  reason TEXT,
  error TEXT,
  simhash INTEGER,
  cluster INTEGER,
  owner INTEGER,
  readers TEXT,
  indexed_at REAL,
  attempts INTEGER NOT NULL DEFAULT 0,
  retry_at REAL,
  lang TEXT
);
CREATE INDEX IF NOT EXISTS docs_parent ON docs(parent);
CREATE INDEX IF NOT EXISTS docs_raw ON docs(raw_sum);
CREATE INDEX IF NOT EXISTS docs_path ON docs(path);
CREATE INDEX IF NOT EXISTS docs_blob ON docs(blob);
CREATE INDEX IF NOT EXISTS docs_cluster ON docs(cluster);
CREATE INDEX IF NOT EXISTS docs_retry ON docs(retry_at) WHERE retry_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS texts(key TEXT PRIMARY KEY, data BLOB NOT NULL, size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS pending(uri TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
"""


@dataclass(slots=True)
class Row:
    uri: str
    parent: str | None = None
    path: str | None = None
    source: str = "files"
    size: int = 0
    mtime: float = 0.0
    raw_sum: str | None = None
    text_sum: str | None = None
    blob: str | None = None
    mime: str | None = None
    title: str | None = None
    status: str = "ok"
    reason: str | None = None
    error: str | None = None
    simhash: int | None = None
    cluster: int | None = None
    owner: int | None = None
    readers: str | None = None
    indexed_at: float | None = None
    attempts: int = 0  # conversions that failed in a row on the same bytes
    retry_at: float | None = None  # a transient failure: when it is tried again (seconds since the epoch)
    lang: str | None = None  # ISO 639-1 code of the text's language (converters/language.py), None: not told


COLUMNS = tuple(f.name for f in fields(Row))
# Columns a catalog made by an earlier deskdex lacks: how to add them (Catalog._migrate), and the
# value a reader takes for them meanwhile.
ADDED = {"attempts": ("INTEGER NOT NULL DEFAULT 0", "0"), "retry_at": ("REAL", "NULL"), "lang": ("TEXT", "NULL")}

# Built once: every put() runs the same text, with a row's values in COLUMNS order.
_PUT = (f"INSERT INTO docs({','.join(COLUMNS)}) VALUES({','.join('?' * len(COLUMNS))}) ON CONFLICT(uri) DO UPDATE SET "
        + ",".join(f"{c}=excluded.{c}" for c in COLUMNS if c != "uri"))
_values = operator.attrgetter(*COLUMNS)
# The rows of a list of URIs given as one JSON array: one statement whatever their number.
_BY_URIS = " WHERE uri IN (SELECT value FROM json_each(?))"


# The top-level documents of a source under a URI prefix (Catalog.under): the prefix's range of URIs.
_UNDER = " FROM docs WHERE parent IS NULL AND source=? AND uri >= ? AND uri < ?"


def _under(prefix: str, source: str) -> tuple[str, str, str]:
    return source, prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


class Catalog:
    def __init__(self, path: str, writable: bool = True) -> None:
        self.path = path
        self.writable = writable
        if not writable and not os.path.exists(path):
            raise IndexMissing(f"no index at {os.path.dirname(path)}: run `deskdex index PATH` first")
        self.db = connect(path, read_only=not writable)
        if writable:
            try:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
                # Each document added touches a page of every simhash table (index/neardup.py),
                # at random, besides the catalog's own: with SQLite's default 2 MiB cache those
                # pages are read again and again, and spilled mid-transaction. Given back when the
                # daemon is idle (``release_memory``).
                self.db.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")
                self.journal_in_memory(True)
                self._migrate()
                self.db.executescript(SCHEMA)
            except BaseException:
                self.db.close()
                raise
        # A reader of a catalog no writer of this version has opened yet reads the defaults of
        # the columns it lacks.
        have = self._have = self._columns()
        self._select = "SELECT " + ",".join(
            c if c in have else f"{ADDED[c][1]} AS {c}" for c in COLUMNS) + " FROM docs"
        self._stamps = f"SELECT uri, size, mtime, {'retry_at' if 'retry_at' in have else 'NULL'} FROM docs"
        self.texts = TextStore(self.db)
        self.retries = RetryTable(self.db, self.get_meta, self.set_meta, have.__contains__)

    def _columns(self) -> set[str]:
        return {r[1] for r in self.db.execute("PRAGMA table_info(docs)")}

    def _migrate(self) -> None:
        """Add the columns a catalog of an earlier deskdex lacks. (Its transient failures, never
        tried again before, are made due by the first indexer: it finds no record of the deskdex
        and limits they were made with, see ``retry_all_if_changed``.)"""
        have = self._columns()
        missing = [c for c in ADDED if c not in have]
        if not have or not missing:
            return  # a new catalog (SCHEMA makes it), or one up to date
        self.db.execute("BEGIN IMMEDIATE")
        for c in missing:
            self.db.execute(f"ALTER TABLE docs ADD COLUMN {c} {ADDED[c][0]}")
        self.db.execute("COMMIT")

    def close(self) -> None:
        try:
            self.rollback()
            if self.writable:
                # Fold the write-ahead log into the database, so the disk holds one compact file;
                # without waiting: a lock held elsewhere must not hold up a daemon that stops.
                self.db.execute("PRAGMA busy_timeout=0")
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except StoreError:
            pass  # a reader or another program holds it, or the disk is full: the next writer checkpoints
        finally:
            self.db.close()

    def journal_in_memory(self, on: bool) -> None:
        """Whether the transactions begun from now on keep their savepoint journal in memory.

        Every duplicate-table update runs in a SAVEPOINT (index/sqlutil.py), which journals the
        first change to each page; past 64 KiB (one document's add is ~40 pages) SQLite spills
        that journal to a temporary file, a write per page. In memory it costs about as much as
        the pages it holds, freed at the savepoint's end, except in a transaction that rewrites
        a whole table inside one savepoint (the duplicate tables rebuilt for new thresholds):
        that one turns it off (``Collection._open``). Outside a transaction only: SQLite reads it
        when one begins."""
        self.db.execute(f"PRAGMA temp_store={'MEMORY' if on else 'DEFAULT'}")

    def release_memory(self) -> None:
        """Give back the page cache (an idle daemon's); it fills again with use."""
        self.db.execute("PRAGMA shrink_memory")

    # -- transactions ------------------------------------------------------------------------
    # SQLite's own word on whether a transaction is open: after some errors (a full disk) it has
    # rolled the transaction back itself.
    def begin(self) -> None:
        begin(self.db)

    def commit(self) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT")

    def rollback(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")

    # -- documents ---------------------------------------------------------------------------
    def get(self, uri: str) -> Row | None:
        r = self.db.execute(self._select + " WHERE uri=?", (uri,)).fetchone()
        return Row(*r) if r else None

    def get_many(self, uris: list[str]) -> dict[str, Row]:
        """The rows of those of ``uris`` that have one, by one query (a folder's files looked up
        together cost one statement, not one each)."""
        return {row.uri: row for row in (Row(*r) for r in self.db.execute(self._select + _BY_URIS, (json.dumps(uris),)))}

    def stamps(self, uris: list[str]) -> dict[str, tuple[int, float, float | None]]:
        """(size, mtime, retry_at) of those of ``uris`` that have a row, by one query: what tells
        an unchanged file, without building its whole row."""
        return {r[0]: r[1:] for r in self.db.execute(self._stamps + _BY_URIS, (json.dumps(uris),))}

    def put(self, row: Row) -> None:
        self.begin()
        row.indexed_at = time.time()
        self.db.execute(_PUT, _values(row))
        self.db.execute("INSERT OR IGNORE INTO pending(uri) VALUES(?)", (row.uri,))

    def doc_id(self, uri: str) -> int | None:
        r = self.db.execute("SELECT id FROM docs WHERE uri=?", (uri,)).fetchone()
        return r[0] if r else None

    def row_by_id(self, doc_id: int) -> Row | None:
        r = self.db.execute(self._select + " WHERE id=?", (doc_id,)).fetchone()
        return Row(*r) if r else None

    def set_cluster(self, doc_id: int, cluster: int | None) -> None:
        self.begin()
        self.db.execute("UPDATE docs SET cluster=? WHERE id=?", (cluster, doc_id))

    def set_lang(self, uri: str, lang: str | None) -> None:
        self.begin()
        self.db.execute("UPDATE docs SET lang=? WHERE uri=?", (lang, uri))

    def mark_pending(self, uri: str) -> None:
        self.begin()
        self.db.execute("INSERT OR IGNORE INTO pending(uri) VALUES(?)", (uri,))

    def delete(self, uri: str) -> list[str]:
        """Delete a document and everything inside it; returns the URIs removed."""
        self.begin()
        gone = [uri] + self.descendants(uri)
        for u in gone:
            self.db.execute("DELETE FROM docs WHERE uri=?", (u,))
            self.db.execute("INSERT OR IGNORE INTO pending(uri) VALUES(?)", (u,))
        return gone

    def descendants(self, uri: str) -> list[str]:
        out: list[str] = []
        frontier = [uri]
        while frontier:
            nxt = [r[0] for p in frontier for r in self.db.execute("SELECT uri FROM docs WHERE parent=?", (p,))]
            out.extend(nxt)
            frontier = nxt
        return out

    def find_ok_by_raw_sum(self, raw_sum: str) -> Row | None:
        r = self.db.execute(self._select + " WHERE raw_sum=? AND status='ok' AND parent IS NULL LIMIT 1",
                            (raw_sum,)).fetchone()
        return Row(*r) if r else None

    def files_under(self, folder: str) -> Iterator[tuple[str, str, int, float]]:
        """(uri, path, size, mtime) of top-level file documents under ``folder``."""
        # By URI, which holds the exact bytes of every name; the path column is for display only
        # (names that are not UTF-8 show as U+FFFD there, so two folders may share a path).
        yield from self.under(path_to_uri(folder.rstrip("/")) + "/", "files")

    def under(self, prefix: str, source: str) -> Iterator[tuple[str, str, int, float]]:
        """(uri, path, size, mtime) of the top-level documents of ``source`` whose URI starts with
        ``prefix`` (a folder's ``file:///a/b/``; a mail folder's ``imap://u@h/INBOX;UIDVALIDITY=7/;UID=``)."""
        yield from self.db.execute("SELECT uri, path, size, mtime" + _UNDER, _under(prefix, source))

    def count_under(self, prefix: str, source: str) -> int:
        """How many documents ``under`` would list."""
        count: int = self.db.execute("SELECT COUNT(*)" + _UNDER, _under(prefix, source)).fetchone()[0]
        return count

    def rows(self, where: str = "", args: Iterable[object] = ()) -> Iterator[Row]:
        for r in self.db.execute(self._select + (" WHERE " + where if where else ""), tuple(args)):
            yield Row(*r)

    # -- pending -----------------------------------------------------------------------------
    def pending(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT uri FROM pending")]

    def clear_pending(self, uris: Iterable[str]) -> None:
        self.begin()
        self.db.executemany("DELETE FROM pending WHERE uri=?", ((u,) for u in uris))

    # -- meta -------------------------------------------------------------------------------
    def set_meta(self, key: str, value: str | None) -> None:
        """Keep ``value`` under ``key`` (None: forget it), in the transaction of the rows written meanwhile."""
        self.begin()
        if value is None:
            self.db.execute("DELETE FROM meta WHERE key=?", (key,))
        else:
            self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?,?)", (key, value))

    def get_meta(self, key: str) -> str | None:
        r = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return r[0] if r else None

