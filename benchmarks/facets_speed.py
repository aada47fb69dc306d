"""What facets cost a search (issue 30): index.search on a collection of a few thousand documents
(several types, folders, languages and years), with ``facets`` off and on, for root and for a
reader of an enterprise-mode daemon, median of many runs each, queries matching from a few dozen
to every document.

    python benchmarks/facets_speed.py [--docs 3000] [--runs 15] [--data DIR]

--data: keep the collection there (built once, reused by later runs: the same documents for a run
of another deskdex tree, put first on PYTHONPATH, to time the search without facets before and
after a change). Prints a table and writes benchmarks/results/facets_speed.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from deskdex.converters import Block, Document
from deskdex.index import Collection, Row, search

HERE = Path(__file__).resolve().parent
KINDS = [("txt", "text/plain"), ("md", "text/markdown"), ("pdf", "application/pdf"), ("html", "text/html"),
         ("csv", "text/csv"), ("py", "text/x-source"), ("xyz", "application/octet-stream")]
WORDS = ("harbour ledger ship captain cargo tide anchor pier crane diver marmalade heron kestrel "
         "budget report minutes spring autumn winter gull").split()  # each in 8 of 20 documents
QUERIES = ["okapi", "harbour", "ledger OR anchor", "harbour -cargo"]
READER = 1001


def build(data: str, n: int) -> None:
    with Collection.open(data, writable=True) as coll:
        for i in range(n):
            ext, mime = KINDS[i % len(KINDS)]
            folder = f"/home/user/docs/{['work', 'home', 'archive'][i % 3]}/{i % 17}"
            path = f"{folder}/doc{i}.{ext}"
            words = (" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(8)) + " ") * 8
            if i % 50 in (0, 1):  # a rare word, root's and the reader's: 4 % of the documents
                words += " okapi"
            mtime = dt.datetime(2015 + i % 10, 1 + i % 12, 10).timestamp()
            readers = json.dumps({"uids": [READER] if i % 2 else [1002], "everyone": False})
            coll.put(Row(uri="file://" + path, path=path, size=len(words), mtime=mtime, mime=mime, title=f"doc {i}",
                         readers=readers, lang=["en", "de", "fr"][i % 3]),
                     Document(uri="file://" + path, mime=mime, title=f"doc {i}", blocks=[Block.of("p", words)]))
        coll.commit()


def time_one(coll: Collection, query: str, runs: int, **kw: object) -> float:
    search(coll, query, **kw)  # type: ignore[arg-type]  # warm
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        search(coll, query, **kw)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--data")
    a = ap.parse_args()
    data = a.data or tempfile.mkdtemp(prefix="deskdex-facets-")
    if not (os.path.isdir(data) and os.listdir(data)):  # a kept collection is reused as it is
        build(data, a.docs)
    has_facets = "facets" in search.__code__.co_varnames
    rows = []
    with Collection.open(data) as coll:
        for q in QUERIES:
            for who, reader in (("root", None), ("reader", READER)):
                total = search(coll, q, reader=reader, limit=1)["total"]
                plain = time_one(coll, q, a.runs, reader=reader)
                faceted = time_one(coll, q, a.runs, reader=reader, facets=True) if has_facets else None
                rows.append({"query": q, "who": who, "matches": total, "ms": round(plain, 2),
                             "ms_facets": None if faceted is None else round(faceted, 2)})
                print(f"{q!r:22} {who:6} {total:5} matches  {plain:7.2f} ms"
                      + (f"  facets {faceted:7.2f} ms" if faceted is not None else ""), flush=True)
    out = HERE / "results" / "facets_speed.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"docs": a.docs, "runs": a.runs, "facets": has_facets, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
