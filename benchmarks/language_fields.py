"""What searching every language's body field costs a query, in the index itself.

A query word is searched in ``body`` and in the body field of every language with a stemmer
(index/query.py, BODIES: 18 fields). This times the same queries (benchmarks/search_queries.json)
on one indexed home, in process, parse and search (top 10, counted; no snippets), with the word
searched in every body field and, for comparison, in ``body`` alone (what a query cost before
documents had languages). Run with no daemon writing to the home.

Usage: .venv/bin/python benchmarks/language_fields.py --home DIR [--runs 5]
Writes benchmarks/results/language_fields.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deskdex.index import Collection  # noqa: E402
from deskdex.index import query as query_language  # noqa: E402
from deskdex.index.search import parse  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    queries = [q["query"] for q in json.load(open(os.path.join(HERE, "search_queries.json")))["queries"]]
    every = query_language.BODIES
    out = {}
    with Collection.open(os.path.join(args.home, "data")) as coll:
        searcher = coll.index.searcher()
        langs = dict(coll.catalog.db.execute("SELECT coalesce(lang, '-'), count(*) FROM docs GROUP BY 1"))
        for name, bodies in (("every_language", every), ("body_only", ("body",))):
            query_language.BODIES = bodies
            times = []
            for _ in range(args.runs):
                for q in queries:
                    t0 = time.perf_counter()
                    searcher.search(parse(coll.index, q), 10, count=True)
                    times.append(1000 * (time.perf_counter() - t0))
            times.sort()
            out[name] = {"median_ms": round(statistics.median(times), 3),
                         "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3),
                         "mean_ms": round(statistics.mean(times), 3)}
            print(name, out[name])
        query_language.BODIES = every
    result = {"queries": len(queries), "runs": args.runs, "documents_by_language": langs, **out}
    print("documents by language:", langs)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "language_fields.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
