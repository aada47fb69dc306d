"""Transitive duplicate clusters (the patent: a cluster id per document), kept in SQLite.

A cluster is a connected component of the "is a duplicate of" graph: the near-duplicate edges
(``dup_edges``) plus exact copies, which share a group key (the text checksum) instead of
storing one edge per pair of copies. Every document has a cluster id, the smallest document id
in its component (a document alone is its own cluster), so ids are stable while the smallest
member stays.

Adding a document merges the components it touches. Removing one recomputes its former
component with union-find over the edges left among its members: a cluster that lost its
bridge splits. Each call returns ``{doc: (old, new)}`` for the documents whose id changed, so the
caller can update them elsewhere (the tantivy index).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Iterable

from .sqlutil import create

logger = logging.getLogger(__name__)

Changes = dict[int, tuple[int | None, int | None]]


class UnionFind:
    def __init__(self, items: Iterable[int] = ()) -> None:
        self.parent = {i: i for i in items}

    def find(self, x: int) -> int:
        root = self.parent.setdefault(x, x)
        while root != self.parent[root]:
            root = self.parent[root]
        while x != root:  # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # The smaller id becomes the root, so a root is its component's cluster id.
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[int]]:
        out: dict[int, list[int]] = {}
        for x in self.parent:
            out.setdefault(self.find(x), []).append(x)
        return list(out.values())


class Clusters:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.db = conn
        create(
            conn,
            """
            CREATE TABLE IF NOT EXISTS dup_cluster(doc INTEGER PRIMARY KEY, cluster INTEGER NOT NULL,
                                                   grp TEXT);
            CREATE INDEX IF NOT EXISTS dup_cluster_cluster ON dup_cluster(cluster);
            CREATE INDEX IF NOT EXISTS dup_cluster_grp ON dup_cluster(grp);
            CREATE TABLE IF NOT EXISTS dup_edges(a INTEGER, b INTEGER, PRIMARY KEY(a, b)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS dup_edges_b ON dup_edges(b);
            """
        )

    def cluster_of(self, doc: int) -> int | None:
        row = self.db.execute("SELECT cluster FROM dup_cluster WHERE doc=?", (doc,)).fetchone()
        return None if row is None else row[0]

    def members(self, cluster: int) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT doc FROM dup_cluster WHERE cluster=? ORDER BY doc",
                                              (cluster,))]

    def neighbours(self, doc: int) -> list[int]:
        q = "SELECT b FROM dup_edges WHERE a=? UNION SELECT a FROM dup_edges WHERE b=?"
        return sorted(r[0] for r in self.db.execute(q, (doc, doc)))

    def add(self, doc: int, neighbours: Iterable[int], group: str | None = None, fresh: bool = False) -> Changes:
        """Add ``doc`` with its near-duplicate ``neighbours`` and its exact-copy ``group``;
        ``fresh``: the caller knows ``doc`` is not here (nothing to look up and remove first)."""
        changes = self.remove(doc) if not fresh and self.cluster_of(doc) is not None else {}
        touched = set()
        for n in set(neighbours) - {doc}:
            c = self.cluster_of(n)
            if c is None:
                continue  # not (or no longer) here: no edge to a ghost
            self.db.execute("INSERT OR IGNORE INTO dup_edges VALUES(?,?)", (min(doc, n), max(doc, n)))
            touched.add(c)
        if group is not None:
            row = self.db.execute("SELECT cluster FROM dup_cluster WHERE grp=? LIMIT 1", (group,)).fetchone()
            if row is not None:
                touched.add(row[0])  # every copy is already in that one cluster
        members = [(m, c) for c in touched for m in self.members(c)]
        new = min([doc, *(m for m, _ in members)])
        self.db.execute("INSERT INTO dup_cluster VALUES(?,?,?)", (doc, new, group))
        _note(changes, doc, None, new)
        for c in touched:
            if c != new:
                self.db.execute("UPDATE dup_cluster SET cluster=? WHERE cluster=?", (new, c))
        for m, c in members:
            _note(changes, m, c, new)
        return _settled(changes)

    def remove(self, doc: int) -> Changes:
        """Remove ``doc``; its former cluster is recomputed and may split."""
        old = self.cluster_of(doc)
        if old is None:
            return {}
        self.db.execute("DELETE FROM dup_edges WHERE a=? OR b=?", (doc, doc))
        self.db.execute("DELETE FROM dup_cluster WHERE doc=?", (doc,))
        changes: Changes = {doc: (old, None)}
        rest = self.members(old)
        if not rest:
            return changes
        uf = UnionFind(rest)
        q = ("SELECT e.a, e.b FROM dup_edges e JOIN dup_cluster c ON c.doc = e.a "
             "WHERE c.cluster=?")
        for a, b in self.db.execute(q, (old,)):
            uf.union(a, b)
        first: dict[str, int] = {}
        for m, grp in self.db.execute("SELECT doc, grp FROM dup_cluster WHERE cluster=?", (old,)):
            if grp is not None:
                uf.union(first.setdefault(grp, m), m)
        for group in uf.groups():
            new = min(group)
            if new != old:
                self.db.executemany("UPDATE dup_cluster SET cluster=? WHERE doc=?", ((new, m) for m in group))
                for m in group:
                    _note(changes, m, old, new)
        return changes

    def clusters(self, min_size: int = 2) -> list[list[int]]:
        """Clusters of at least ``min_size`` documents, largest first (then by id)."""
        q = ("SELECT cluster FROM dup_cluster GROUP BY cluster HAVING count(*) >= ? "
             "ORDER BY count(*) DESC, cluster")
        return [self.members(c) for (c,) in self.db.execute(q, (min_size,)).fetchall()]


def _note(changes: Changes, doc: int, old: int | None, new: int | None) -> None:
    """Record a change, keeping the first old value when a document changes twice in one call."""
    changes[doc] = (changes[doc][0] if doc in changes else old, new)


def _settled(changes: Changes) -> Changes:
    return {d: (o, n) for d, (o, n) in changes.items() if o != n}

