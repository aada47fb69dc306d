"""Transitive clusters in SQLite: merging, splitting when a bridge goes, exact-copy groups."""

from __future__ import annotations

import sqlite3

from deskdex.index.clusters import Clusters, UnionFind


def make(tmp_path) -> Clusters:
    return Clusters(sqlite3.connect(tmp_path / "c.db"))


def test_union_find_roots_are_smallest():
    uf = UnionFind(range(6))
    uf.union(5, 3)
    uf.union(3, 4)
    uf.union(1, 2)
    assert sorted(map(sorted, uf.groups())) == [[0], [1, 2], [3, 4, 5]]
    assert uf.find(5) == 3


def test_transitive_merge_and_ids(tmp_path):
    c = make(tmp_path)
    assert c.add(5, []) == {5: (None, 5)}
    c.add(7, [])
    assert c.cluster_of(7) == 7
    ch = c.add(3, [5, 7])  # 3 bridges 5 and 7; the new id is the smallest member
    assert ch == {3: (None, 3), 5: (5, 3), 7: (7, 3)}
    assert c.clusters() == [[3, 5, 7]]


def test_bridge_removed_splits(tmp_path):
    c = make(tmp_path)
    for d in (1, 2, 3, 4):
        c.add(d, [])
    c.add(10, [1, 2])
    c.add(11, [3, 4])
    c.add(12, [10, 11])  # 12 is the only bridge between {1,2,10} and {3,4,11}
    assert c.clusters() == [[1, 2, 3, 4, 10, 11, 12]]
    ch = c.remove(12)
    assert c.clusters() == [[1, 2, 10], [3, 4, 11]]
    assert ch == {12: (1, None), 3: (1, 3), 4: (1, 3), 11: (1, 3)}
    assert c.neighbours(10) == [1, 2]


def test_removing_smallest_renames_cluster(tmp_path):
    c = make(tmp_path)
    c.add(1, [])
    c.add(2, [1])
    c.add(3, [2])
    ch = c.remove(1)
    assert ch == {1: (1, None), 2: (1, 2), 3: (1, 2)}
    assert c.clusters() == [[2, 3]]


def test_exact_copies_stay_together_without_edges(tmp_path):
    c = make(tmp_path)
    c.add(1, [], group="sumA")
    c.add(2, [], group="sumA")
    c.add(3, [], group="sumA")
    c.add(4, [3])
    c.add(5, [], group="sumB")
    assert c.clusters() == [[1, 2, 3, 4]]
    c.remove(1)  # the copies need no edge to 1 to stay together
    assert c.clusters() == [[2, 3, 4]]
    c.remove(3)  # 4 was tied to the copies only through 3
    assert c.clusters() == []
    assert c.cluster_of(4) == 4 and c.cluster_of(2) == 2


def test_readd_drops_stale_edges(tmp_path):
    c = make(tmp_path)
    c.add(1, [])
    c.add(2, [1])
    ch = c.add(2, [])  # document 2 changed: no longer a near-duplicate of 1
    assert ch == {2: (1, 2)}
    assert c.clusters() == [] and c.neighbours(1) == []
