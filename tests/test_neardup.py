"""The permuted tables return exactly what a brute-force scan returns."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from deskdex.index.neardup import MemoryTables, SqliteTables, table_masks

K = 3


def planted(n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random fingerprints, a tenth of them copies of others with 0..k+1 bits flipped."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    m = n // 10
    src = rng.choice(n, m, replace=False)
    dst = rng.choice(np.setdiff1d(np.arange(n), src), m, replace=False)
    for i, (s, t) in enumerate(zip(src.tolist(), dst.tolist())):
        f = int(fps[s])
        for b in rng.choice(64, i % (k + 2), replace=False).tolist():
            f ^= 1 << b
        fps[t] = f
    return fps, dst


def brute_row(fps: np.ndarray, q: int, k: int) -> np.ndarray:
    return np.flatnonzero(np.bitwise_count(fps ^ np.uint64(q)) <= k)


def brute_pairs(fps: np.ndarray, k: int) -> set[tuple[int, int]]:
    d = np.bitwise_count(fps[:, None] ^ fps[None, :])
    i, j = np.nonzero(np.triu(d <= k, 1))
    return set(zip(i.tolist(), j.tolist()))


def test_masks_cover_every_choice_of_k_blocks():
    masks = table_masks(3)
    assert len(masks) == 20  # C(6, 3): the paper's 20 tables for k = 3
    for m in masks:
        assert 30 <= bin(m).count("1") <= 34
    with pytest.raises(ValueError):
        table_masks(5, blocks=5)


@pytest.mark.parametrize("k", [0, 1, 3, 4])
def test_discovery_equals_brute_force_small(k):
    fps, _ = planted(6000, k, seed=k)
    fps[:40] = fps[40]  # a group of exact copies
    got = set(map(tuple, MemoryTables(fps, k).pairs().tolist()))
    assert got == brute_pairs(fps, k)


def test_discovery_and_search_equal_brute_force_100k():
    """100,000 fingerprints. A full all-pairs scan takes ~40 s here, so brute force runs per
    row: for every planted row (both ends of each planted pair) and 2,000 random rows, a scan of
    all 100,000. Every pair the tables report is checked too; a pair of two unplanted random rows
    within k has probability ~1e-4 over the whole set and would also be reported by ``pairs``."""
    fps, dst = planted(100_000, K, seed=11)
    mt = MemoryTables(fps, K)
    pairs = mt.pairs()
    assert np.all(np.bitwise_count(fps[pairs[:, 0]] ^ fps[pairs[:, 1]]) <= K)
    got = set(map(tuple, pairs.tolist()))
    rows = np.concatenate([dst, np.random.default_rng(3).choice(len(fps), 2000, replace=False)])
    expected_from_rows = set()
    for r in rows.tolist():
        near = brute_row(fps, int(fps[r]), K)
        assert np.array_equal(mt.search(int(fps[r])), near)
        expected_from_rows |= {(min(r, j), max(r, j)) for j in near.tolist() if j != r}
    assert expected_from_rows <= got
    # Planted pairs at distance k + 1 must not be reported; those at <= k must.
    assert len(expected_from_rows) >= 0.75 * len(dst) * (K + 1) / (K + 2)


def test_sqlite_tables_search_and_pairs_equal_brute_force(tmp_path):
    fps, dst = planted(20_000, K, seed=5)
    conn = sqlite3.connect(tmp_path / "c.db")
    t = SqliteTables(conn, K)
    with conn:
        for i, f in enumerate(fps.tolist()):
            t.add(i, f)
    for r in dst[:500].tolist():
        got = [d for d, _ in t.search(int(fps[r]))]
        assert sorted(got) == brute_row(fps, int(fps[r]), K).tolist()
    assert t.pairs() == set(map(tuple, MemoryTables(fps, K).pairs().tolist()))
    # Incremental: removing a row takes it out of every table.
    t.remove(int(dst[0]))
    assert int(dst[0]) not in [d for d, _ in t.search(int(fps[dst[0]]))]
    assert t.get(int(dst[0])) is None


def test_sqlite_tables_rebuild_when_k_changes(tmp_path):
    fps, dst = planted(2000, 4, seed=9)
    conn = sqlite3.connect(tmp_path / "c.db")
    t = SqliteTables(conn, 2)
    for i, f in enumerate(fps.tolist()):
        t.add(i, f)
    t4 = SqliteTables(conn, 4)
    assert t4.pairs() == brute_pairs(fps, 4)


def brute_search(fps: dict[int, int], q: int, k: int, per_table: int | None) -> list[tuple[int, int]]:
    """What ``SqliteTables.search`` promises, by a scan: per table the first ``per_table`` docs
    (by id) sharing the query's key, those within k, nearest first."""
    found = set()
    for m in table_masks(k):
        same = sorted(d for d, f in fps.items() if f & m == q & m)
        found.update(same[:per_table] if per_table else same)
    near = [(d, (fps[d] ^ q).bit_count()) for d in found]
    return sorted(((d, dist) for d, dist in near if dist <= k), key=lambda x: (x[1], x[0]))


@pytest.mark.parametrize("k, per_table, run", [(3, None, 100), (4, None, 100), (4, 5, 100), (4, 5, 7), (3, 1, 6)])
def test_sqlite_search_equals_brute_force_with_and_without_cap(tmp_path, monkeypatch, k, per_table, run):
    """Random fingerprints plus crowds of near-copies (more than ``per_table`` share a key, so the
    cap cuts), searched in one statement per run of ``run`` tables."""
    monkeypatch.setattr("deskdex.index.neardup.TABLES_PER_STATEMENT", run)
    rng = np.random.default_rng(k * 100 + (per_table or 0) + run)
    fps = {i: int(f) for i, f in enumerate(rng.integers(0, 2**64, size=1500, dtype=np.uint64).tolist())}
    doc = len(fps)
    for base in list(fps.values())[:12]:
        for _ in range(int(rng.integers(3, 30))):
            f = base
            for b in rng.choice(64, int(rng.integers(0, k + 3)), replace=False).tolist():
                f ^= 1 << b
            fps[doc] = f
            doc += 1
    ids = list(fps)
    rng.shuffle(ids)  # doc ids are not in insertion order: the cap keeps the lowest ids all the same
    conn = sqlite3.connect(tmp_path / "c.db")
    t = SqliteTables(conn, k)
    assert len(t._runs) == -(-len(t.masks) // run)
    with conn:
        for d in ids:
            t.add(d, fps[d], fresh=d % 2 == 0)
    queries = list(fps.values())[:40] + [int(f) for f in rng.integers(0, 2**64, size=20, dtype=np.uint64).tolist()]
    for q in queries:
        assert t.search(q, per_table=per_table) == brute_search(fps, q, k, per_table)
    # A read-only view searches the same way.
    view = SqliteTables.read_only(conn, k, k + 3)
    assert view.search(queries[0], per_table=per_table) == brute_search(fps, queries[0], k, per_table)
