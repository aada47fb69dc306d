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

``MemoryTables`` holds numpy arrays sorted per table, for discovery over a whole collection (1M
fingerprints in a few seconds). Searching one fingerprint as documents arrive is a scan instead
(``StoredSimhashes``): at a desktop's scale it is faster than any table, and it keeps nothing on
disk but the fingerprints.
"""

from __future__ import annotations

import sqlite3
from itertools import combinations
from typing import Iterable

import numpy as np

from .simhash import BITS, to_signed, to_unsigned


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


class StoredSimhashes:
    """The writer's simhashes (``dup_simhash``, doc -> fingerprint) with a copy in memory, 16 bytes
    a document, searched by one vectorised scan of the whole array.

    For a desktop's collection a scan beats any table kept on disk: 70 us at 100,000 documents
    and 0.9 ms at 1,000,000, where the permuted tables this replaces (35 SQLite probes a search
    for k = 4, and 35 rows a document, 650 bytes of catalog) took 0.3 ms at 10,000 once texts
    share their common words (their simhashes are not uniform: the buckets fill) and were a third
    of the writer's time on many small files. It is exact, as the tables were: every stored
    fingerprint within k, nearest first.

    The table is made by its owner (``DUP_SIMHASH``, DuplicateIndex). The memory copy is read
    from it on first use and follows every add and remove; a transaction rolled back behind its
    back (the caller's, after a failed write) must be followed by ``forget()``, so that it is read
    again."""

    def __init__(self, conn: sqlite3.Connection, k: int) -> None:
        self.db = conn
        self.k = k
        self.forget()

    def forget(self) -> None:
        """Drop the memory copy: read again from the database when next needed."""
        self._docs, self._fps, self._n, self._loaded = np.empty(0, np.int64), np.empty(0, np.uint64), 0, False

    def _load(self) -> None:
        rows = self.db.execute("SELECT doc, fp FROM dup_simhash").fetchall()
        n = len(rows)
        self._docs = np.empty(max(n, 64), dtype=np.int64)
        self._fps = np.empty(max(n, 64), dtype=np.uint64)
        if n:
            self._docs[:n] = [r[0] for r in rows]
            self._fps[:n] = np.array([r[1] for r in rows], dtype=np.int64).view(np.uint64)
        self._n, self._loaded = n, True

    def __len__(self) -> int:
        if not self._loaded:
            self._load()
        return self._n

    def add(self, doc: int, fp: int, fresh: bool = False) -> None:
        """Add or replace ``doc``; ``fresh``: the caller knows it has no row yet, so there is
        nothing to look for first."""
        if not fresh:
            self.remove(doc)
        self.db.execute("INSERT INTO dup_simhash VALUES(?,?)", (doc, to_signed(fp)))
        if not self._loaded:
            self._load()  # the row just written comes with it
            return
        if self._n == len(self._fps):  # grow by half: appends cost O(1) amortised
            grow = max(64, self._n // 2)
            self._docs = np.concatenate([self._docs, np.empty(grow, np.int64)])
            self._fps = np.concatenate([self._fps, np.empty(grow, np.uint64)])
        self._docs[self._n], self._fps[self._n] = doc, fp
        self._n += 1

    def remove(self, doc: int) -> None:
        if self.db.execute("DELETE FROM dup_simhash WHERE doc=?", (doc,)).rowcount == 0 or not self._loaded:
            return
        # doc is the table's primary key: one entry, whose place the last one takes (the order
        # means nothing)
        i = int(np.flatnonzero(self._docs[:self._n] == doc)[0])
        self._n -= 1
        self._docs[i], self._fps[i] = self._docs[self._n], self._fps[self._n]

    def get(self, doc: int) -> int | None:
        row = self.db.execute("SELECT fp FROM dup_simhash WHERE doc=?", (doc,)).fetchone()
        return None if row is None else to_unsigned(row[0])

    def search(self, fp: int, limit: int | None = None, exclude: int | None = None) -> list[tuple[int, int]]:
        """(doc, distance) of every stored fingerprint within k of ``fp``, nearest first (then by
        doc), ``exclude`` left out; the first ``limit`` of them when given."""
        if not self._loaded:
            self._load()
        dist = np.bitwise_count(self._fps[:self._n] ^ np.uint64(fp))
        hits = np.flatnonzero(dist <= self.k)
        found = sorted(zip(dist[hits].tolist(), self._docs[hits].tolist()))
        out = [(d, int(h)) for h, d in found if d != exclude]
        return out[:limit] if limit is not None else out


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

