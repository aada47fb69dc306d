"""The permuted tables, and the scan of the stored simhashes, return exactly what a brute-force\nscan returns."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from deskdex.index.neardup import MemoryTables, StoredSimhashes, table_masks
from deskdex.index.sqlutil import DUP_SIMHASH

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


@pytest.mark.slow
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


def brute_search(fps: dict[int, int], q: int, k: int, limit: int | None = None,
                 exclude: int | None = None) -> list[tuple[int, int]]:
    near = sorted(((d, (f ^ q).bit_count()) for d, f in fps.items() if d != exclude), key=lambda x: (x[1], x[0]))
    near = [(d, dist) for d, dist in near if dist <= k]
    return near[:limit] if limit is not None else near


def crowded(k: int, seed: int) -> dict[int, int]:
    """Random fingerprints plus crowds of near-copies (more than a search's limit), under doc ids
    that are not in insertion order."""
    rng = np.random.default_rng(seed)
    fps = {i: int(f) for i, f in enumerate(rng.integers(0, 2**64, size=3000, dtype=np.uint64).tolist())}
    doc = len(fps)
    for base in list(fps.values())[:12]:
        for _ in range(int(rng.integers(3, 30))):
            f = base
            for b in rng.choice(64, int(rng.integers(0, k + 3)), replace=False).tolist():
                f ^= 1 << b
            fps[doc] = f
            doc += 1
    ids = list(fps)
    rng.shuffle(ids)
    return {d: fps[d] for d in ids}


@pytest.mark.parametrize("k", [0, 3, 4])
def test_stored_simhashes_search_equals_brute_force(tmp_path, k):
    fps = crowded(k, seed=k)
    conn = sqlite3.connect(tmp_path / "c.db")
    conn.execute(DUP_SIMHASH)
    t = StoredSimhashes(conn, k)
    with conn:
        for d, f in fps.items():
            t.add(d, f, fresh=d % 2 == 0)
    rng = np.random.default_rng(k + 50)
    queries = list(fps.values())[:40] + [int(f) for f in rng.integers(0, 2**64, size=20, dtype=np.uint64).tolist()]
    for q in queries:
        assert t.search(q) == brute_search(fps, q, k)
        assert t.search(q, limit=5) == brute_search(fps, q, k, limit=5)
    mine = next(iter(fps))
    assert t.search(fps[mine], exclude=mine) == brute_search(fps, fps[mine], k, exclude=mine)
    # Removed and replaced documents: the memory copy follows the table.
    for d in list(fps)[:300]:
        if d % 3 == 0:
            t.remove(d)
            del fps[d]
        elif d % 3 == 1:
            fps[d] ^= 1 << int(rng.integers(64))
            t.add(d, fps[d])
    t.remove(10**9)  # not there: nothing happens
    assert len(t) == len(fps)
    for q in queries:
        assert t.search(q) == brute_search(fps, q, k)
    # What another process reads from the database, and what is read again after forget().
    view = StoredSimhashes(conn, k)
    t.forget()
    for q in queries[:10]:
        assert view.search(q) == t.search(q) == brute_search(fps, q, k)
    assert t.get(mine) == fps.get(mine)


def test_stored_simhashes_grow_from_empty_one_by_one(tmp_path):
    """Adds past every growth of the arrays, searched after each."""
    conn = sqlite3.connect(":memory:")
    conn.execute(DUP_SIMHASH)
    t = StoredSimhashes(conn, 2)
    fps: dict[int, int] = {}
    rng = np.random.default_rng(1)
    base = int(rng.integers(0, 2**63))
    for d in range(300):
        fps[d] = base ^ (1 << int(rng.integers(64))) if d % 2 else int(rng.integers(0, 2**63)) * 2
        t.add(d, fps[d], fresh=True)
        assert t.search(base) == brute_search(fps, base, 2)
