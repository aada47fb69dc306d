"""Permuted tables (Manku, Jain and Das Sarma, WWW 2007): every fingerprint pair within
Hamming distance k, found without comparing all pairs.

The 64 bits are split into ``blocks`` blocks (b > k). Two fingerprints that differ in at most k
bits differ in at most k blocks, so at least b - k blocks are equal in both. One table per choice
of b - k blocks (C(b, k) tables) keys each fingerprint on those blocks; a pair within k therefore
shares its key in at least one table, and a candidate is kept only if its real distance is <= k.
So search and discovery return exactly what a brute-force scan returns.

The paper permutes the bits so the key blocks come first and a sorted table can be range-searched
on a prefix. Keying on ``fp & mask`` (the key blocks in place) groups exactly the same
fingerprints; sorted on that value the in-memory tables are searched by equality the same way.

``SqliteTables`` keeps the tables in the catalog database (``dup_simhash``, ``dup_keys``),
updated one document at a time. ``MemoryTables`` holds numpy arrays sorted per table, for
discovery over a whole collection (1M fingerprints in a few seconds).
"""

from __future__ import annotations

import logging
import sqlite3
from itertools import combinations
from typing import Iterable, Iterator

import numpy as np

from .simhash import BITS, distance, to_signed, to_unsigned
from .sqlutil import create

logger = logging.getLogger(__name__)

TABLES_PER_STATEMENT = 100
_SIGN = 1 << (BITS - 1)


def default_blocks(k: int) -> int:
    """b = k + 3: keys of three blocks (~32 bits for k = 3, as in the paper's 20-table setup),
    so a table bucket holds about N / 2^32 random fingerprints."""
    return k + 3


def table_masks(k: int, blocks: int | None = None) -> list[int]:
    """One 64-bit mask per table: the bits of the b - k blocks that table keys on."""
    b = blocks or default_blocks(k)
    if not 0 <= k < b <= BITS:
        raise ValueError(f"need 0 <= k < blocks <= {BITS}, got k={k}, blocks={b}")
    edges = [round(i * BITS / b) for i in range(b + 1)]
    block_masks = [((1 << (hi - lo)) - 1) << lo for lo, hi in zip(edges, edges[1:])]
    return [sum(block_masks[i] for i in keep) for keep in combinations(range(b), b - k)]


class SqliteTables:
    """The tables in SQLite: one row per (table, key, doc), searched by the primary key."""

    def __init__(self, conn: sqlite3.Connection, k: int, blocks: int | None = None) -> None:
        self.db = conn
        self.k = k
        self.masks = table_masks(k, blocks)
        create(
            conn,
            """
            CREATE TABLE IF NOT EXISTS dup_simhash(doc INTEGER PRIMARY KEY, fp INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS dup_keys(t INTEGER, key INTEGER, doc INTEGER,
                                                PRIMARY KEY(t, key, doc)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS dup_meta(key TEXT PRIMARY KEY, value TEXT);
            """
        )
        layout = f"{k}/{len(self.masks)}/{blocks or default_blocks(k)}"
        row = conn.execute("SELECT value FROM dup_meta WHERE key='tables'").fetchone()
        if row is not None and row[0] != layout:
            # A different k means different tables: rebuild them from the stored fingerprints.
            logger.info("simhash tables change from %s to %s: rebuilding", row[0], layout)
            fps = conn.execute("SELECT doc, fp FROM dup_simhash").fetchall()
            conn.execute("DELETE FROM dup_keys")
            conn.executemany("INSERT INTO dup_keys VALUES(?,?,?)",
                             (r for doc, fp in fps for r in self._rows(doc, to_unsigned(fp))))
        conn.execute("INSERT OR REPLACE INTO dup_meta VALUES('tables', ?)", (layout,))
        self._statements()

    @classmethod
    def read_only(cls, conn: sqlite3.Connection, k: int, blocks: int) -> SqliteTables:
        """The tables for searching over a read-only connection: nothing is created or changed."""
        view = cls.__new__(cls)
        view.db, view.k, view.masks = conn, k, table_masks(k, blocks)
        view._statements()
        return view

    def _statements(self) -> None:
        """One statement for a run of tables where there were one per table: the writer adds and
        searches once per document, and each statement costs a round trip through Python and
        sqlite3 besides SQLite's own work. Constant texts (the table numbers written in, the
        values bound), so sqlite3 prepares each once. ?1 is the document (add) or the per-table
        LIMIT (search, -1 for none), ?2.. the keys of the run's tables in order. A run is at most
        TABLES_PER_STATEMENT tables, under SQLite's limits on a statement's compound terms (500)
        and parameters (999 before 3.32) whatever k is."""
        self._runs: list[tuple[range, str, str]] = []
        for start in range(0, len(self.masks), TABLES_PER_STATEMENT):
            run = range(start, min(start + TABLES_PER_STATEMENT, len(self.masks)))
            insert = "INSERT INTO dup_keys VALUES" + ",".join(f"({t},?{i + 2},?1)" for i, t in enumerate(run))
            # Each table keeps its own LIMIT (a subquery: a LIMIT after UNION ALL would cap them
            # all together) and reads its rows in doc order, the primary key's.
            search = " UNION ALL ".join(
                "SELECT * FROM (SELECT k.doc, s.fp FROM dup_keys k JOIN dup_simhash s ON s.doc = k.doc "
                f"WHERE k.t={t} AND k.key=?{i + 2} ORDER BY k.doc LIMIT ?1)" for i, t in enumerate(run))
            self._runs.append((run, insert, search))

    def _keys(self, fp: int, run: range) -> list[int]:
        # to_signed without a call per table: (x ^ 2^63) - 2^63 is x as a signed 64-bit integer.
        return [((fp & m) ^ _SIGN) - _SIGN for m in self.masks[run.start:run.stop]]

    def _rows(self, doc: int, fp: int) -> Iterator[tuple[int, int, int]]:
        for t, m in enumerate(self.masks):
            yield t, to_signed(fp & m), doc

    def add(self, doc: int, fp: int, fresh: bool = False) -> None:
        """Add or replace ``doc``; ``fresh``: the caller knows it has no rows here, so there is
        nothing to look up and remove first."""
        if not fresh:
            self.remove(doc)
        self.db.execute("INSERT INTO dup_simhash VALUES(?,?)", (doc, to_signed(fp)))
        for run, insert, _ in self._runs:
            self.db.execute(insert, (doc, *self._keys(fp, run)))

    def remove(self, doc: int) -> None:
        row = self.db.execute("SELECT fp FROM dup_simhash WHERE doc=?", (doc,)).fetchone()
        if row is None:
            return
        fp = to_unsigned(row[0])
        self.db.executemany("DELETE FROM dup_keys WHERE t=? AND key=? AND doc=?", self._rows(doc, fp))
        self.db.execute("DELETE FROM dup_simhash WHERE doc=?", (doc,))

    def get(self, doc: int) -> int | None:
        row = self.db.execute("SELECT fp FROM dup_simhash WHERE doc=?", (doc,)).fetchone()
        return None if row is None else to_unsigned(row[0])

    def search(self, fp: int, per_table: int | None = None) -> list[tuple[int, int]]:
        """(doc, distance) of every stored fingerprint within k of ``fp``, nearest first.

        ``per_table`` caps the rows read from one table: exact without it; with it, bounded when
        thousands of documents share a key (a collection of near-identical texts), where reading
        them all on every add would make indexing quadratic."""
        found: dict[int, int] = {}
        limit = int(per_table) if per_table else -1
        for run, _, search in self._runs:
            for doc, other in self.db.execute(search, (limit, *self._keys(fp, run))):
                if doc not in found:
                    d = distance(fp, to_unsigned(other))
                    if d <= self.k:
                        found[doc] = d
        return sorted(found.items(), key=lambda x: (x[1], x[0]))

    def pairs(self) -> set[tuple[int, int]]:
        """Discovery: every (a, b), a < b, within k, from the stored tables."""
        q = ("SELECT a.doc, b.doc FROM dup_keys a JOIN dup_keys b "
             "ON a.t = b.t AND a.key = b.key AND a.doc < b.doc")
        cand = set(self.db.execute(q))
        fps = dict(self.db.execute("SELECT doc, fp FROM dup_simhash"))
        return {(a, b) for a, b in cand if distance(to_unsigned(fps[a]), to_unsigned(fps[b])) <= self.k}


class MemoryTables:
    """The tables as numpy arrays: per table, the masked keys sorted, with the row order."""

    def __init__(self, fps: Iterable[int] | np.ndarray, k: int, blocks: int | None = None) -> None:
        self.fps = np.asarray(fps if isinstance(fps, np.ndarray) else list(fps), dtype=np.uint64)
        self.k = k
        self.masks = [np.uint64(m) for m in table_masks(k, blocks)]
        self._sorted: list[tuple[np.ndarray, np.ndarray]] | None = None

    def _tables(self) -> list[tuple[np.ndarray, np.ndarray]]:
        if self._sorted is None:
            tables = []
            for m in self.masks:
                keys = self.fps & m
                order = np.argsort(keys, kind="stable").astype(np.int64)
                tables.append((keys[order], order))
            self._sorted = tables
        return self._sorted

    def search(self, fp: int) -> np.ndarray:
        """Row numbers of every fingerprint within k of ``fp``, ascending."""
        q = np.uint64(fp)
        hits = []
        for m, (keys, order) in zip(self.masks, self._tables()):
            key = q & m
            lo = np.searchsorted(keys, key, "left")
            hi = np.searchsorted(keys, key, "right")
            if hi > lo:
                hits.append(order[lo:hi])
        if not hits:
            return np.empty(0, dtype=np.int64)
        cand = np.unique(np.concatenate(hits))
        # numpy's stubs type uint64 ^ and what it indexes as Any: the rows are an array all the same
        near: np.ndarray = cand[np.bitwise_count(self.fps[cand] ^ q) <= self.k]
        return near

    def pairs(self) -> np.ndarray:
        """Discovery: an (n, 2) array of row pairs (i < j) within k, each once, sorted.

        Equal fingerprints are folded first so that a big group of exact copies costs one
        bucket entry, then expanded back into all their pairs at the end."""
        uniq, inverse = np.unique(self.fps, return_inverse=True)
        found = [_pairs_in_table(uniq, m, self.k) for m in self.masks]
        upairs = np.unique(np.concatenate(found), axis=0) if found else np.empty((0, 2), np.int64)
        return _expand(upairs, inverse.ravel(), len(uniq))


def _pairs_in_table(fps: np.ndarray, mask: np.uint64, k: int) -> np.ndarray:
    """Pairs of distinct fingerprints sharing a key in this table and within k of each other."""
    keys = fps & mask
    order = np.argsort(keys)
    sk = keys[order]
    out = []
    # In the sorted keys a bucket is a run; row i and i + d share a bucket iff their keys are equal.
    idx = np.flatnonzero(sk[1:] == sk[:-1])
    d = 1
    while idx.size:
        a, b = order[idx], order[idx + d]
        close = np.bitwise_count(fps[a] ^ fps[b]) <= k
        out.append(np.stack([np.minimum(a, b)[close], np.maximum(a, b)[close]], axis=1))
        d += 1
        idx = idx[idx + d < len(sk)]
        idx = idx[sk[idx + d] == sk[idx]]
    return np.concatenate(out) if out else np.empty((0, 2), np.int64)


def _expand(upairs: np.ndarray, inverse: np.ndarray, n_unique: int) -> np.ndarray:
    """Pairs of unique fingerprints back to pairs of rows, plus the pairs of equal rows."""
    rows_of = np.argsort(inverse, kind="stable")
    starts = np.searchsorted(inverse[rows_of], np.arange(n_unique + 1))
    sizes = starts[1:] - starts[:-1]
    first = rows_of[starts[:-1]]
    single = (sizes[upairs[:, 0]] == 1) & (sizes[upairs[:, 1]] == 1)
    out = [first[upairs[single]]]  # the common case, vectorised: one row per fingerprint

    def group(u: int | np.integer) -> np.ndarray:
        return rows_of[starts[u]:starts[u + 1]]

    for u in np.flatnonzero(sizes > 1):  # exact copies: all pairs within the group
        g = group(u)
        i, j = np.triu_indices(len(g), 1)
        out.append(np.stack([g[i], g[j]], axis=1))
    for a, b in upairs[~single]:
        out.append(np.stack(np.meshgrid(group(a), group(b), indexing="ij"), axis=-1).reshape(-1, 2))
    allp = np.concatenate(out).astype(np.int64)
    allp = np.stack([allp.min(axis=1), allp.max(axis=1)], axis=1)
    return np.unique(allp, axis=0)

