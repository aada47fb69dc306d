"""A connection keeps the clusters (and their copies) worked out by one search for the next ones
(index/readable.py, ``_kept``: issue 17, a large cluster's copies cost tens of milliseconds per
search), and drops them as soon as the catalog changes: through another connection (the daemon's
indexer beside its read-only views) or through its own."""

from __future__ import annotations

import json
from pathlib import Path

from deskdex.converters import Block, Document
from deskdex.index import Collection, Row, search

from .test_dups_cli import text

BODY = "Field guide " + text(21)


def put(coll: Collection, path: str, mtime: int = 1_600_000_000, mime: str = "text/plain") -> None:
    uri = "file://" + path
    doc = Document(uri=uri, mime=mime, title="Field guide", blocks=[Block.of("p", BODY)])
    coll.put(Row(uri=uri, path=path, size=len(BODY), mtime=mtime, mime=mime,
                 readers=json.dumps({"uids": [1001], "everyone": False})), doc)
    coll.commit()


def counts(coll: Collection, reader: int | None = None) -> dict[str, tuple[int, int]]:
    return {h["path"]: (h["duplicates"], h["similar"]) for h in search(coll, "walnut", reader=reader)["hits"]}


def cluster_queries(coll: Collection, reader: int | None = None) -> list[str]:
    """The catalog statements one search runs that read the duplicate tables."""
    seen: list[str] = []
    coll.catalog.db.set_trace_callback(seen.append)
    try:
        counts(coll, reader)
    finally:
        coll.catalog.db.set_trace_callback(None)
    return [s for s in seen if "dup_" in s]


def test_a_second_search_reads_no_cluster_again(tmp_path: Path):
    data = str(tmp_path / "data")
    with Collection.open(data, writable=True) as coll:
        put(coll, "/home/alice/guide.txt")
        put(coll, "/home/alice/guide-copy.txt", 1_600_000_001)
        put(coll, "/home/alice/guide.html", 1_600_000_002, "text/html")
    with Collection.open(data) as coll:
        for reader in (None, 1001):
            assert cluster_queries(coll, reader), "the first search works the cluster out"
            assert cluster_queries(coll, reader) == [], "the next ones reuse it"
        assert counts(coll) == {"/home/alice/guide.txt": (1, 1), "/home/alice/guide.html": (0, 2)}
        assert counts(coll, 1001) == counts(coll)


def test_a_commit_by_another_connection_drops_what_was_kept(tmp_path: Path):
    """As in the daemon: a read-only view searched before and after the indexer adds a copy."""
    data = str(tmp_path / "data")
    with Collection.open(data, writable=True) as writer:
        put(writer, "/home/alice/guide.txt")
        put(writer, "/home/alice/guide.html", 1_600_000_002, "text/html")
        with Collection.open(data) as view:
            assert counts(view) == counts(view) == {"/home/alice/guide.txt": (0, 1), "/home/alice/guide.html": (0, 1)}
            put(writer, "/home/alice/guide-copy.txt", 1_600_000_001)
            assert counts(view) == {"/home/alice/guide.txt": (1, 1), "/home/alice/guide.html": (0, 2)}
            assert counts(view, 1001) == counts(view)


def test_a_connection_s_own_changes_drop_what_was_kept(tmp_path: Path):
    """Searching through the writable collection (tests, `deskdex index` then search in one process)."""
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        put(coll, "/home/alice/guide.txt")
        put(coll, "/home/alice/guide.html", 1_600_000_002, "text/html")
        assert counts(coll) == counts(coll, 1001) == {"/home/alice/guide.txt": (0, 1), "/home/alice/guide.html": (0, 1)}
        put(coll, "/home/alice/guide-copy.txt", 1_600_000_001)
        assert counts(coll) == counts(coll, 1001) == {"/home/alice/guide.txt": (1, 1), "/home/alice/guide.html": (0, 2)}


def test_fingerprints_are_read_as_the_index_writes_them():
    """readable.py reads fingerprint blobs without numpy; the same similarity as fingerprints.py's."""
    import random

    import numpy as np

    from deskdex.index import fingerprints as fpr
    from deskdex.index.readable import _fingerprints, _similarity

    rnd = random.Random(17)
    for _ in range(200):
        shared = rnd.sample(range(1 << 32), rnd.randint(0, 300))
        a = np.unique(np.array(shared + rnd.sample(range(1 << 32), rnd.randint(0, 30)), dtype=np.uint32))
        b = np.unique(np.array(shared + rnd.sample(range(1 << 32), rnd.randint(0, 30)), dtype=np.uint32))
        blob_a, blob_b = fpr.to_blob(a), fpr.to_blob(b)
        assert _fingerprints(blob_a) == set(a.tolist())
        assert _similarity(_fingerprints(blob_a), _fingerprints(blob_b)) == fpr.similarity(fpr.from_blob(blob_a),
                                                                                           fpr.from_blob(blob_b))
    assert _fingerprints(None) == _fingerprints(b"") == frozenset()


def test_a_search_without_a_daemon_loads_no_numpy(tmp_path: Path):
    """numpy is a quarter of `deskdex search`'s start without a daemon: a search that works out
    copies among near-duplicates of one kind does not load it."""
    import subprocess
    import sys

    data = str(tmp_path / "data")
    words = BODY.split()
    with Collection.open(data, writable=True) as coll:
        put(coll, "/home/alice/guide.txt")
        put(coll, "/home/alice/guide-copy.txt", 1_600_000_001)
        # A near-duplicate of the same kind: its fingerprints are compared.
        uri = "file:///home/alice/guide-edited.txt"
        edited = " ".join(words[:-3] + ["walnut", "harbour", "lantern"])
        coll.put(Row(uri=uri, path=uri[7:], size=len(edited), mtime=1_600_000_003, mime="text/plain",
                     readers=json.dumps({"uids": [1001], "everyone": False})),
                 Document(uri=uri, mime="text/plain", title="Field guide", blocks=[Block.of("p", edited)]))
        coll.commit()
        edges = coll.catalog.db.execute("SELECT count(*) FROM dup_edges").fetchone()[0]
    assert edges, "the edited copy is a near-duplicate"
    code = ("import sys; from deskdex.index import Collection, search\n"
            f"hits = search(Collection.open({data!r}), 'walnut')['hits']\n"
            "print(len(hits), 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[1] == "False" and int(out[0]) >= 1, out
