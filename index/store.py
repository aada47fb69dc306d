"""The catalog and text store: one SQLite database (WAL) per index.

``docs`` has one row per document (file, archive member or web page); a file whose failure may
not happen again (errors.TRANSIENT_REASONS) has a ``retry_at`` and counts its ``attempts``.
``texts`` holds the tagged text, zstd-compressed, once per distinct text (two copies of a file
share one row).
``pending`` lists URIs whose tantivy entries must be brought in line with ``docs``: a URI is
written there in the same transaction as its row and removed only after tantivy commits, so
a crash between the two is repaired on the next open (see ``Collection.open``).

Every sqlite3 error met through a Catalog's connection arrives translated into deskdex.errors
(``Connection`` below, index/storeerrors.py): a full disk is DiskFull, a lock held by another
program StoreLocked, and so on.
"""

from __future__ import annotations

import functools
import json
import operator
import os
import sqlite3
import time
from dataclasses import dataclass, fields
from typing import IO, Any, Callable, Concatenate, Iterable, Iterator, ParamSpec, TypeVar

import zstandard

from deskdex.converters.source import path_to_uri
from deskdex.errors import IndexMissing, StoreError
from deskdex.paths import folder_of

from .storeerrors import from_sqlite, translated

# How long a write waits for a lock another program holds on the catalog before giving up with
# StoreLocked. Short: the daemon's main thread waits here and must still stop on SIGTERM within
# seconds; it waits out a longer hold itself, with back-off (daemon/loop.py).
WRITER_WAIT = 2.0
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

P = ParamSpec("P")
R = TypeVar("R")


def _translating(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A method of sqlite3's Connection or Cursor whose errors come out as deskdex's. A try
    rather than ``translated()``: it runs for every row read."""

    @functools.wraps(method)
    def call(self: Connection | Cursor, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            error = from_sqlite(exc, self.store_path)
            if error is None:
                raise
            raise error from exc

    return call


class Connection(sqlite3.Connection):
    """The catalog's connection: what it executes, and the cursors that returns, raise
    StoreErrors. (sqlite3's own ``execute`` makes a plain cursor: ours make a ``Cursor``.)"""

    store_path = ""

    @_translating
    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor(Cursor).execute(sql, parameters)
        return cursor

    @_translating
    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor(Cursor).executemany(sql, parameters)
        return cursor

    @_translating
    def executescript(self, script: str, /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor(Cursor).executescript(script)
        return cursor


class Cursor(sqlite3.Cursor):
    @property
    def store_path(self) -> str:
        return self.connection.store_path  # type: ignore[attr-defined, no-any-return]

    execute = _translating(sqlite3.Cursor.execute)
    executemany = _translating(sqlite3.Cursor.executemany)
    executescript = _translating(sqlite3.Cursor.executescript)
    fetchone = _translating(sqlite3.Cursor.fetchone)
    fetchmany = _translating(sqlite3.Cursor.fetchmany)
    fetchall = _translating(sqlite3.Cursor.fetchall)
    __next__ = _translating(sqlite3.Cursor.__next__)


def connect(path: str, read_only: bool = False) -> Connection:
    """A connection to the catalog at ``path``; opening it may fail with a StoreError too."""
    with translated(path):
        if read_only:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False, timeout=30,
                                 factory=Connection)
        else:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=WRITER_WAIT,
                                 factory=Connection)
    db.store_path = path
    return db


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
        self._zc = zstandard.ZstdCompressor(level=6)
        self._zd = zstandard.ZstdDecompressor()

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
        if not self.db.in_transaction:
            self.db.execute("BEGIN IMMEDIATE")

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

    def has_readers(self, uris: list[str] | None = None) -> bool:
        """Whether any document (of ``uris``; None: of all) carries the accounts that may read it,
        which only an enterprise-mode daemon stamps."""
        if uris is None:
            return self.db.execute("SELECT 1 FROM docs WHERE readers IS NOT NULL LIMIT 1").fetchone() is not None
        return self.db.execute("SELECT 1 FROM docs WHERE uri IN (SELECT value FROM json_each(?)) "
                               "AND readers IS NOT NULL LIMIT 1", (json.dumps(uris),)).fetchone() is not None

    def get_many(self, uris: list[str]) -> dict[str, Row]:
        """The rows of those of ``uris`` that have one, by one query (a folder's files looked up
        together cost one statement, not one each)."""
        q = self._select + " WHERE uri IN (SELECT value FROM json_each(?))"
        return {row.uri: row for row in (Row(*r) for r in self.db.execute(q, (json.dumps(uris),)))}

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

    # -- transient failures, tried again -----------------------------------------------------
    def retry_all_if_changed(self, made_by: str, reasons: Iterable[str]) -> int:
        """When the files' failures were made by another deskdex or other limits than ``made_by``
        says (or nothing says), make every failure of one of ``reasons`` due now, its back-off
        started anew; remember ``made_by``. Returns how many were made due."""
        if self.get_meta("converted_by") == made_by:
            return 0
        reasons = sorted(reasons)
        self.begin()
        cur = self.db.execute(
            "UPDATE docs SET retry_at=0, attempts=0 WHERE status='failed' AND parent IS NULL AND source='files' "
            f"AND reason IN ({','.join('?' * len(reasons))})", reasons)
        self.set_meta("converted_by", made_by)
        return cur.rowcount

    def scheduled_retries(self, under: Iterable[str] | None = None) -> list[tuple[str, str, float]]:
        """(uri, path, retry_at) of every failure to be tried again, of the files at or under the
        paths ``under`` (None: everywhere)."""
        rows = self.db.execute("SELECT uri, path, retry_at FROM docs WHERE retry_at IS NOT NULL").fetchall()
        if under is None:
            return rows
        # Filtered here, not by a condition per folder: SQLite refuses one with thousands of
        # terms, and an enterprise server watches a home per account. The rows come from the
        # retry_at index (failures to try again are few).
        folders = _folder_set(under)
        return [r for r in rows if folder_of(r[1], folders) is not None]

    def retry_now(self, under: Iterable[str] | None = None, now: float = 0.0) -> int:
        """Make the failures to be tried again at or under ``under`` (None: all) due at ``now``."""
        self.begin()
        if under is None:
            return self.db.execute("UPDATE docs SET retry_at=? WHERE retry_at IS NOT NULL", (now,)).rowcount
        uris = [uri for uri, _, _ in self.scheduled_retries(under)]
        self.db.executemany("UPDATE docs SET retry_at=? WHERE uri=?", ((now, uri) for uri in uris))
        return len(uris)

    def set_retry(self, uri: str, retry_at: float) -> None:
        self.begin()
        self.db.execute("UPDATE docs SET retry_at=? WHERE uri=? AND retry_at IS NOT NULL", (retry_at, uri))

    def files_under(self, folder: str) -> Iterator[tuple[str, str, int, float]]:
        """(uri, path, size, mtime) of top-level file documents under ``folder``."""
        # By URI, which holds the exact bytes of every name; the path column is for display only
        # (names that are not UTF-8 show as U+FFFD there, so two folders may share a path).
        prefix = path_to_uri(folder.rstrip("/")) + "/"
        q = ("SELECT uri, path, size, mtime FROM docs WHERE parent IS NULL AND source='files' "
             "AND uri >= ? AND uri < ?")
        yield from self.db.execute(q, (prefix, prefix[:-1] + "0"))

    def rows(self, where: str = "", args: Iterable[object] = ()) -> Iterator[Row]:
        for r in self.db.execute(self._select + (" WHERE " + where if where else ""), tuple(args)):
            yield Row(*r)

    # -- texts -------------------------------------------------------------------------------
    def put_text(self, key: str, tagged: bytes) -> None:
        self.begin()
        if self.db.execute("SELECT 1 FROM texts WHERE key=?", (key,)).fetchone() is None:
            self.db.execute("INSERT INTO texts(key, data, size) VALUES(?,?,?)",
                            (key, self._zc.compress(tagged), len(tagged)))

    def get_text(self, key: str) -> bytes | None:
        r = self.db.execute("SELECT data FROM texts WHERE key=?", (key,)).fetchone()
        return self._zd.decompress(r[0]) if r else None

    def open_text(self, key: str) -> IO[bytes] | None:
        """The tagged text ``key`` as a stream, decompressed as it is read: a snippet reads no
        further than its matches (index/snippets.py). One decompressor per stream, so that
        searches on several threads share none."""
        r = self.db.execute("SELECT data FROM texts WHERE key=?", (key,)).fetchone()
        return zstandard.ZstdDecompressor().stream_reader(r[0]) if r else None

    def collect_garbage(self) -> int:
        """Drop texts no document refers to any more (indexes must not only grow)."""
        self.begin()
        # NOT EXISTS probes docs' blob index; NOT IN would first copy every blob into a temporary
        # table, which the writer keeps in memory (``journal_in_memory``).
        cur = self.db.execute("DELETE FROM texts WHERE NOT EXISTS "
                              "(SELECT 1 FROM docs WHERE docs.blob = texts.key)")
        return cur.rowcount

    # -- pending -----------------------------------------------------------------------------
    def pending(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT uri FROM pending")]

    def clear_pending(self, uris: Iterable[str]) -> None:
        self.begin()
        self.db.executemany("DELETE FROM pending WHERE uri=?", ((u,) for u in uris))

    # -- statistics --------------------------------------------------------------------------
    def counts(self) -> dict[str, object]:
        total = self.db.execute("SELECT count(*) FROM docs WHERE status='ok'").fetchone()[0]
        # A file a limit cut short (reason "partial", index/collection.py) is indexed and counted
        # with the failures too: what it left out failed.
        failed = dict(self.db.execute(
            "SELECT reason, count(*) FROM docs WHERE status='failed' OR reason='partial' GROUP BY reason").fetchall())
        texts, raw = self.db.execute("SELECT count(*), coalesce(sum(size),0) FROM texts").fetchone()
        return {"documents": total, "failed": sum(failed.values()), "failed_by_reason": failed,
                "texts": texts, "text_bytes": raw}

    def counts_for(self, uid: int) -> dict[str, object]:
        """``counts`` of the documents ``uid`` may read alone (enterprise mode: the rows' ``readers``,
        as the index's ``reader IN (uid, -1)`` filter reads them), without the store's totals."""
        readable = ("readers IS NOT NULL AND (json_extract(readers, '$.everyone') = 1 OR EXISTS "
                    "(SELECT 1 FROM json_each(readers, '$.uids') WHERE value = ?))")
        total = self.db.execute(f"SELECT count(*) FROM docs WHERE status='ok' AND {readable}", (uid,)).fetchone()[0]
        failed = dict(self.db.execute(
            f"SELECT reason, count(*) FROM docs WHERE (status='failed' OR reason='partial') AND {readable} "
            "GROUP BY reason", (uid,)).fetchall())
        return {"documents": total, "failed": sum(failed.values()), "failed_by_reason": failed}

    def retries(self) -> dict[str, object]:
        """How many failures are to be tried again, and when the first is due (quick: an index
        holds them, so a status asked every few seconds may ask each time)."""
        if "retry_at" not in self._have:  # read before a writer of this version added it
            return {"retries": 0, "next_retry": None}
        n, first = self.db.execute("SELECT count(*), min(retry_at) FROM docs WHERE retry_at IS NOT NULL").fetchone()
        return {"retries": n, "next_retry": first}

    def set_meta(self, key: str, value: str) -> None:
        self.begin()
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?,?)", (key, value))

    def get_meta(self, key: str) -> str | None:
        r = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return r[0] if r else None


def _folder_set(paths: Iterable[str]) -> set[str]:
    """``paths`` as ``folder_of`` looks them up: without a trailing "/"."""
    return {p.rstrip("/") or "/" for p in paths}
