"""The cluster id each document carries, in the catalog and in tantivy, kept in step with the
duplicate tables (index/duplicates.py) as documents come and go: a document carries its cluster's
id only while that cluster holds two or more documents."""

from __future__ import annotations

from typing import TYPE_CHECKING, AbstractSet, Callable

from .store import Catalog, Row

if TYPE_CHECKING:
    from deskdex.converters import Document

    from .duplicates import DuplicateIndex


class ClusterUpkeep:
    def __init__(self, catalog: Catalog, dups: DuplicateIndex, document: Callable[[Row], Document | None],
                 index: Callable[[Row, Document | None], None]) -> None:
        """``document``: a row's stored document; ``index``: write a row's tantivy entry again."""
        self.catalog = catalog
        self.dups = dups
        self._document = document
        self._index = index

    def carried(self, cluster: int | None, members: dict[int, list[int]]) -> int | None:
        """The cluster id a document of ``cluster`` carries: ``cluster``, when it holds two or more
        documents. ``members``: the clusters' members read so far by one change, so that a
        change reads each cluster once (cluster ids do not move while it updates the rows)."""
        if cluster is None:
            return None
        if cluster not in members:
            members[cluster] = self.dups.clusters_.members(cluster)
        return cluster if len(members[cluster]) > 1 else None

    def recluster(self, docs: set[int], clusters_before: AbstractSet[int] = frozenset(),
                  skip: int | None = None, known: dict[int, int | None] | None = None,
                  members: dict[int, list[int]] | None = None) -> None:
        """Bring the cluster id of ``docs`` (and of every member of their clusters, before and
        after) up to date in the catalog and in tantivy. ``known``: clusters of some of ``docs``,
        and ``members``, as ``carried`` keeps them, read already by the caller."""
        members = {} if members is None else members
        cluster_of = dict(known or {})
        for d in docs:
            if d not in cluster_of:
                cluster_of[d] = self.dups.cluster_of(d)
        check = set(docs)
        for c in set(clusters_before) | {c for d in docs if (c := cluster_of[d]) is not None}:
            self.carried(c, members)
            for m in members[c]:  # a member's cluster is the one it was read as a member of
                cluster_of[m] = c
            check.update(members[c])
        if skip is not None:
            check.discard(skip)
        for d in check:
            row = self.catalog.row_by_id(d)
            if row is None:
                continue
            value = self.carried(cluster_of[d], members)
            if row.cluster != value:
                row.cluster = value
                self.catalog.set_cluster(d, value)
                self.catalog.mark_pending(row.uri)
                self._index(row, self._document(row) if row.status == "ok" else None)
