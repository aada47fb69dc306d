"""Exact and near-duplicate detection: the one class the pipeline calls.

For each document: the text checksum (exact copies, whatever the format), a simhash of its main
text (no boilerplate), and winnowed word 5-gram fingerprints. Two documents
are near-duplicates when their simhashes are within ``k`` bits *and* they share at least
``min_similarity`` of their fingerprints: simhash finds candidates fast, the fingerprints confirm
them, so pages that share a template but not their text are not merged. Clusters are transitive.

Every method runs in a SAVEPOINT: atomic on its own, and part of the caller's transaction when
there is one (wrap a batch of ``add`` calls in one transaction: much faster than autocommit).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Iterator

from .clusters import Changes, Clusters, UnionFind
from .sqlutil import DUP_SIMHASH, atomic

if TYPE_CHECKING:
    import numpy as np

    from .features import Features
    from .neardup import StoredSimhashes

# numpy and the modules built on it (features, fingerprints, neardup) are imported where they are
# used: opening the index for a run that finds nothing changed needs none of them, and numpy is a
# tenth of such a run (45 ms).

logger = logging.getLogger(__name__)

DEFAULT_K = 4  # chosen from benchmarks/dups_quality.py: see docs/duplicates.md
DEFAULT_MIN_SIMILARITY = 0.5  # share of winnowed 5-gram fingerprints in common
# At most this many simhash candidates, the nearest, are confirmed by fingerprints when a document
# is added: enough for any real cluster, and a bound when thousands of texts are nearly the same
# (templated notes, generated files), where confirming all would be quadratic.
MAX_CANDIDATES = 64


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Documents whose cluster id changed (``changed``: doc -> new id) and documents gone."""

    changed: dict[int, int] = field(default_factory=dict)
    removed: frozenset[int] = frozenset()

    @classmethod
    def of(cls, changes: Changes) -> "ChangeSet":
        return cls({d: n for d, (_, n) in changes.items() if n is not None},
                   frozenset(d for d, (_, n) in changes.items() if n is None))

    @property
    def docs(self) -> set[int]:
        """Every document to update elsewhere (re-index with its new cluster, or delete)."""
        return set(self.changed) | set(self.removed)


class DuplicateIndex:
    def __init__(self, conn: sqlite3.Connection, k: int = DEFAULT_K,
                 min_similarity: float = DEFAULT_MIN_SIMILARITY) -> None:
        self.db = conn
        self.k, self.min_similarity = k, min_similarity
        with atomic(self.db):
            conn.execute("CREATE TABLE IF NOT EXISTS dup_docs(doc INTEGER PRIMARY KEY, "
                         "text_sum TEXT, fps BLOB)")
            conn.execute("CREATE TABLE IF NOT EXISTS dup_meta(key TEXT PRIMARY KEY, value TEXT)")
            conn.execute(DUP_SIMHASH)
            # Catalogs before the scan kept permuted tables on disk (35 rows a document).
            conn.execute("DROP TABLE IF EXISTS dup_keys")
            conn.execute("DELETE FROM dup_meta WHERE key='tables'")
            self.clusters_ = Clusters(conn)
            params = f"{k}/{min_similarity}"
            row = conn.execute("SELECT value FROM dup_meta WHERE key='params'").fetchone()
            conn.execute("INSERT OR REPLACE INTO dup_meta VALUES('params', ?)", (params,))
        # The edges depend on the thresholds: new thresholds, new edges (the caller re-indexes
        # ``self.rebuilt.docs``).
        self.rebuilt = self.rebuild() if row is not None and row[0] != params else ChangeSet()

    @classmethod
    def read_only(cls, conn: sqlite3.Connection) -> DuplicateIndex | None:
        """A view for ``near`` over a read-only connection, with the thresholds the writer chose;
        nothing is created or changed. None when nothing has been indexed yet."""
        try:
            meta = dict(conn.execute("SELECT key, value FROM dup_meta"))
        except sqlite3.OperationalError:  # no duplicate tables yet
            return None
        if "params" not in meta:
            return None
        k, min_similarity = meta["params"].split("/")
        view = cls.__new__(cls)
        view.db = conn
        view.k, view.min_similarity = int(k), float(min_similarity)
        view.rebuilt = ChangeSet()
        return view

    # -- one document ----------------------------------------------------------------------
    def add(self, doc_id: int, text: str = "", boilerplate: str = "", text_sum: str | None = None,
            feats: Features | None = None) -> ChangeSet:
        """Add or replace a document: ``text`` its main content, ``boilerplate`` the rest.
        ``text_sum`` is the catalog's text checksum, computed here when not given; ``feats``,
        when the caller has them already (``features``), stand for all three."""
        from .fingerprints import to_blob

        group, fp, fps = self._features(text, boilerplate, text_sum) if feats is None else (feats.group, feats.fp,
                                                                                           feats.fps)
        with self._atomic():
            # Every method writes a document's dup_docs, simhash and cluster rows together: with
            # no dup_docs row it has none of the others, and a new document (nearly every one
            # while indexing) skips looking them up to remove them.
            fresh = self.db.execute("DELETE FROM dup_docs WHERE doc=?", (doc_id,)).rowcount == 0
            if not fresh:
                self.tables.remove(doc_id)
            near = [d for d, _ in self._confirm(fp, fps, exclude=doc_id)]
            self.db.execute("INSERT INTO dup_docs VALUES(?,?,?)", (doc_id, group, to_blob(fps)))
            if fp is not None:
                self.tables.add(doc_id, fp, fresh=True)
            return ChangeSet.of(self.clusters_.add(doc_id, near, group, fresh=fresh))

    def remove(self, doc_id: int) -> ChangeSet:
        with self._atomic():
            self.tables.remove(doc_id)
            self.db.execute("DELETE FROM dup_docs WHERE doc=?", (doc_id,))
            return ChangeSet.of(self.clusters_.remove(doc_id))

    def forget(self) -> None:
        """The caller's transaction was rolled back: what is kept in memory is read again."""
        if "tables" in self.__dict__:  # read into memory already (cached_property)
            self.tables.forget()

    def cluster_of(self, doc_id: int) -> int | None:
        """The cluster id (smallest doc id of the cluster; the doc's own id when alone)."""
        return self.clusters_.cluster_of(doc_id)

    def near(self, text: str, boilerplate: str = "", text_sum: str | None = None) -> list[tuple[int, float]]:
        """Search: (doc_id, similarity 0..1) of the stored near-duplicates and exact copies of a
        text that need not be indexed itself, most similar first."""
        group, fp, fps = self._features(text, boilerplate, text_sum)
        found = dict(self._confirm(fp, fps))
        if group is not None:
            for (d,) in self.db.execute("SELECT doc FROM dup_docs WHERE text_sum=?", (group,)):
                found[d] = 1.0
        return sorted(found.items(), key=lambda x: (-x[1], x[0]))

    def similar(self, doc_id: int) -> list[tuple[int, float]]:
        """The near-duplicates of a stored document (itself left out), most similar first."""
        row = self.db.execute("SELECT text_sum, fps FROM dup_docs WHERE doc=?", (doc_id,)).fetchone()
        if row is None:
            return []
        from .fingerprints import from_blob

        found = dict(self._confirm(self.tables.get(doc_id), from_blob(row[1]), exclude=doc_id))
        if row[0] is not None:
            q = "SELECT doc FROM dup_docs WHERE text_sum=? AND doc<>?"
            found.update((d, 1.0) for (d,) in self.db.execute(q, (row[0], doc_id)))
        return sorted(found.items(), key=lambda x: (-x[1], x[0]))

    def clusters(self) -> list[list[int]]:
        """Every cluster of two or more documents, largest first."""
        return self.clusters_.clusters()

    # -- internals -------------------------------------------------------------------------
    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """``atomic``, and the simhashes in memory read again when it rolls back."""
        try:
            with atomic(self.db):
                yield
        except BaseException:
            self.forget()
            raise

    @cached_property
    def tables(self) -> StoredSimhashes:
        """The stored simhashes, read into memory on first use."""
        from .neardup import StoredSimhashes

        return StoredSimhashes(self.db, self.k)  # __init__ made its table

    def _features(self, text: str, boilerplate: str,
                  text_sum: str | None) -> tuple[str | None, int | None, np.ndarray]:
        from .features import features

        f = features(text, boilerplate, text_sum)
        return f.group, f.fp, f.fps

    def _confirm(self, fp: int | None, fps: np.ndarray, exclude: int | None = None) -> list[tuple[int, float]]:
        """Simhash candidates within k whose fingerprint similarity reaches the threshold."""
        if fp is None:
            return []
        from .fingerprints import from_blob, similarity

        found = [d for d, _ in self.tables.search(fp, limit=MAX_CANDIDATES, exclude=exclude)]
        if not found:
            return []
        # One query for all the candidates' fingerprints, its text the same whatever their number.
        blobs = dict(self.db.execute("SELECT doc, fps FROM dup_docs WHERE doc IN (SELECT value FROM json_each(?))",
                                     (json.dumps(found),)))
        out = []
        for other in found:
            sim = similarity(fps, from_blob(blobs.get(other)))
            if sim >= self.min_similarity:
                out.append((other, sim))
        return out

    # -- whole collection ------------------------------------------------------------------
    def rebuild(self) -> ChangeSet:
        """Discovery from scratch (in-memory permuted tables over every stored simhash): all
        near-duplicate edges recomputed and every cluster reassigned."""
        import numpy as np

        from .fingerprints import from_blob, similarity
        from .neardup import MemoryTables

        with atomic(self.db):
            rows = self.db.execute("SELECT doc, fp FROM dup_simhash ORDER BY doc").fetchall()
            docs = np.array([r[0] for r in rows], dtype=np.int64)
            fps = np.array([r[1] for r in rows], dtype=np.int64).view(np.uint64)
            blobs = dict(self.db.execute("SELECT doc, fps FROM dup_docs"))
            edges = []
            for i, j in MemoryTables(fps, self.k).pairs().tolist():
                a, b = int(docs[i]), int(docs[j])
                if similarity(from_blob(blobs.get(a)), from_blob(blobs.get(b))) >= self.min_similarity:
                    edges.append((a, b))
            before = dict(self.db.execute("SELECT doc, cluster FROM dup_cluster"))
            uf = UnionFind(before)
            for a, b in edges:
                uf.union(a, b)
            first: dict[str, int] = {}
            for d, grp in self.db.execute("SELECT doc, grp FROM dup_cluster"):
                if grp is not None:
                    uf.union(first.setdefault(grp, d), d)
            self.db.execute("DELETE FROM dup_edges")
            self.db.executemany("INSERT OR IGNORE INTO dup_edges VALUES(?,?)", edges)
            changed = {d: uf.find(d) for d in before if uf.find(d) != before[d]}
            self.db.executemany("UPDATE dup_cluster SET cluster=? WHERE doc=?",
                                ((c, d) for d, c in changed.items()))
        logger.info("duplicate clusters rebuilt: %d edges, %d documents changed cluster",
                    len(edges), len(changed))
        return ChangeSet(changed)
