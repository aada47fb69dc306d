"""Duplicate clusters as one reader of an enterprise-mode daemon sees them: among the documents
that reader may read, and nothing else.

A cluster (index/clusters.py) is a connected component of the duplicate graph over every
document. Shown to a user as it is, it would tell of documents the user may not read: a cluster
id on a hit, ``dup:yes``, a duplicate count, or two of the user's documents collapsed into one
hit because a private document of someone else bridges them. So a reader's clusters are the
components of the graph cut down to the documents it may read (their own near-duplicate edges
and exact-copy groups), each named by its smallest document id: what the reader sees depends on
its readable documents alone. Left open: the near-duplicate edges were found among at most
``MAX_CANDIDATES`` simhash candidates (index/duplicates.py), so hundreds of near-identical
documents of others could crowd out an edge between two of the reader's documents.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable

from .access import EVERYONE, reader_terms
from .clusters import UnionFind


def may_read(readers: str | None, uid: int) -> bool:
    """What the index's ``reader IN (uid, -1)`` filter says of a catalog row's ``readers``."""
    terms = reader_terms(readers)
    return uid in terms or EVERYONE in terms


class ReadableClusters:
    """The clusters of one reader, worked out cluster by cluster as asked (one search's worth)."""

    def __init__(self, db: sqlite3.Connection, uid: int) -> None:
        self.db = db
        self.uid = uid
        self._of: dict[int, dict[int, list[int]]] = {}  # global cluster -> readable doc -> its component

    def component(self, uri: str, cluster: int) -> list[int]:
        """The ids of the readable documents in the readable cluster of the document ``uri``
        (itself included, sorted), given ``cluster``, its cluster id over every document (0:
        none); a single id or none when it stands alone."""
        if not cluster:
            return []
        row = self.db.execute("SELECT id FROM docs WHERE uri=?", (uri,)).fetchone()
        if row is None:
            return []
        if cluster not in self._of:
            self._of[cluster] = self._split(cluster)
        return self._of[cluster].get(row[0], [row[0]])

    def cluster_id(self, uri: str, cluster: int) -> int:
        """The id to show: the smallest document id of the readable cluster, 0 when alone."""
        members = self.component(uri, cluster)
        return members[0] if len(members) > 1 else 0

    def _split(self, cluster: int) -> dict[int, list[int]]:
        rows = self.db.execute("SELECT c.doc, c.grp, d.readers FROM dup_cluster c JOIN docs d ON d.id = c.doc "
                               "WHERE c.cluster=?", (cluster,)).fetchall()
        readable = {doc: grp for doc, grp, readers in rows if may_read(readers, self.uid)}
        if len(readable) < 2:
            return {}
        edges = self.db.execute("SELECT e.a, e.b FROM dup_edges e JOIN dup_cluster c ON c.doc = e.a "
                                "WHERE c.cluster=?", (cluster,)).fetchall()
        return _components(readable, edges)

    def with_duplicates(self) -> list[str]:
        """The URIs of every readable document with a readable duplicate (``dup:yes``). Reads
        every clustered document: the price of ``dup:`` for a reader."""
        rows = self.db.execute("SELECT d.id, d.uri, c.cluster, c.grp, d.readers FROM docs d "
                               "JOIN dup_cluster c ON c.doc = d.id WHERE d.cluster IS NOT NULL").fetchall()
        by_cluster: dict[int, dict[int, str | None]] = {}
        uris: dict[int, str] = {}
        for doc, uri, cluster, grp, readers in rows:
            if may_read(readers, self.uid):
                by_cluster.setdefault(cluster, {})[doc] = grp
                uris[doc] = uri
        out: list[str] = []
        for cluster, readable in by_cluster.items():
            if len(readable) < 2:
                continue
            if cluster not in self._of:
                edges = self.db.execute("SELECT e.a, e.b FROM dup_edges e JOIN dup_cluster c ON c.doc = e.a "
                                        "WHERE c.cluster=?", (cluster,)).fetchall()
                self._of[cluster] = _components(readable, edges)
            out.extend(uris[d] for d, members in self._of[cluster].items() if len(members) > 1)
        return sorted(out)


def _components(readable: dict[int, str | None], edges: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    """Each readable document's component over the edges and exact-copy groups among them."""
    uf = UnionFind(readable)
    for a, b in edges:
        if a in readable and b in readable:
            uf.union(a, b)
    first: dict[str, int] = {}
    for doc, grp in readable.items():
        if grp is not None:
            uf.union(first.setdefault(grp, doc), doc)
    out: dict[int, list[int]] = {}
    for group in uf.groups():
        members = sorted(group)
        for d in members:
            out[d] = members
    return out
