"""Speed of near-duplicate discovery and search, side by side with datasketch's MinHashLSH.

Fingerprints: N random 64-bit simhashes, 1% of them planted copies of others with 0..k+1 bits
flipped. Our permuted tables are exact (recall 1.0 on pairs within k, checked here against the
planted pairs). MinHashLSH gets the same task: each fingerprint as the set of its 64
(position, bit) features, whose Jaccard for Hamming distance d is (64 - d) / (64 + d); its
threshold is lowered until its recall on the planted pairs within k matches ours.

Usage: .venv/bin/python benchmarks/dups_speed.py [--n 1000000] [--k 3] [--sqlite-n 100000 (stored simhashes)]
       [--minhash-n 100000]     (datasketch: pip install -e '.[bench]')
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deskdex.index.neardup import MemoryTables, StoredSimhashes, table_masks  # noqa: E402
from deskdex.index.sqlutil import DUP_SIMHASH  # noqa: E402


def planted(n: int, k: int, seed: int = 1) -> tuple[np.ndarray, set[tuple[int, int]]]:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    m = n // 100
    src = rng.choice(n, m, replace=False)
    dst = rng.choice(np.setdiff1d(np.arange(n), src), m, replace=False)
    flips = np.arange(m) % (k + 2)
    for s, t, f in zip(src.tolist(), dst.tolist(), flips.tolist()):
        v = int(fps[s])
        for b in rng.choice(64, f, replace=False).tolist():
            v ^= 1 << b
        fps[t] = v
    within = {(min(s, t), max(s, t)) for s, t, f in zip(src.tolist(), dst.tolist(), flips.tolist()) if f <= k}
    return fps, within


def ours(n: int, k: int, queries: int) -> None:
    fps, within = planted(n, k)
    t = time.perf_counter()
    pairs = MemoryTables(fps, k).pairs()
    disc = time.perf_counter() - t
    got = set(map(tuple, pairs.tolist()))
    print(f"permuted tables, in memory: k={k}, {len(table_masks(k))} tables, N={n:,}: discovery {disc:.2f} s, "
          f"{len(got):,} pairs, recall on planted pairs within k {len(within & got) / len(within):.4f}")
    mt = MemoryTables(fps, k)
    t = time.perf_counter()
    mt.search(int(fps[0]))
    build = time.perf_counter() - t
    qs = fps[np.random.default_rng(2).choice(n, queries)]
    t = time.perf_counter()
    for q in qs.tolist():
        mt.search(q)
    print(f"  search one fingerprint (tables already sorted, {build:.2f} s to sort): "
          f"{(time.perf_counter() - t) / queries * 1e3:.3f} ms")


def stored(n: int, k: int, queries: int) -> None:
    """What the writer does per document: add to the stored simhashes (dup_simhash and its copy in
    memory) and search them."""
    fps, _ = planted(n, k)
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(os.path.join(d, "c.db"))
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(DUP_SIMHASH)
        stored = StoredSimhashes(conn, k)
        t = time.perf_counter()
        with conn:
            for i, f in enumerate(fps.tolist()):
                stored.add(i, f, fresh=True)
        add = time.perf_counter() - t
        size = os.path.getsize(os.path.join(d, "c.db")) + os.path.getsize(os.path.join(d, "c.db-wal"))
        qs = fps[np.random.default_rng(3).choice(n, queries)]
        t = time.perf_counter()
        for q in qs.tolist():
            stored.search(q)
        search = (time.perf_counter() - t) / queries
        t = time.perf_counter()
        StoredSimhashes(conn, k).search(0)
        load = time.perf_counter() - t
        print(f"stored simhashes (SQLite, scanned in memory): N={n:,}: add {add / n * 1e6:.0f} us per document, "
              f"{size / n:.0f} bytes per document, search {search * 1e3:.3f} ms, read into memory {load:.2f} s")
        conn.close()


def minhash(n: int, k: int, queries: int) -> None:
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError:
        print("datasketch not installed: pip install -e '.[bench]'")
        return
    fps, within = planted(n, k)
    num_perm = 64
    t = time.perf_counter()
    feats = [[b"%d:%d" % (i, (f >> i) & 1) for i in range(64)] for f in fps.tolist()]
    mhs = MinHash.bulk(feats, num_perm=num_perm)
    sketch = time.perf_counter() - t
    for threshold in (0.85, 0.8, 0.7):
        lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        t = time.perf_counter()
        with lsh.insertion_session() as s:
            for i, m in enumerate(mhs):
                s.insert(i, m, check_duplication=False)
        found = set()
        cand = 0
        for i, m in enumerate(mhs):
            for j in lsh.query(m):
                if j > i:
                    cand += 1
                    if int(np.bitwise_count(fps[i] ^ fps[j])) <= k:  # verify, as we do
                        found.add((i, j))
        disc = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(queries):
            lsh.query(mhs[i])
        search = (time.perf_counter() - t) / queries
        print(f"datasketch MinHashLSH num_perm={num_perm} threshold={threshold}: N={n:,}: sketches {sketch:.1f} s, "
              f"index + discovery {disc:.1f} s, {cand:,} candidates, recall {len(found & within) / len(within):.4f}, "
              f"search {search * 1e3:.3f} ms (sketch not counted)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--sqlite-n", type=int, default=100_000)
    ap.add_argument("--minhash-n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=2000)
    a = ap.parse_args()
    print(f"{os.cpu_count()} CPUs")
    ours(a.n, a.k, a.queries)
    if a.minhash_n != a.n:
        ours(a.minhash_n, a.k, a.queries)
    stored(a.sqlite_n, a.k, a.queries)
    minhash(a.minhash_n, a.k, a.queries)


if __name__ == "__main__":
    main()
