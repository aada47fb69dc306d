"""How often collapsing duplicates hides what a person looks for (issue 17).

Runs each query twice on an indexed corpus, with collapsing on and off, and counts:

- known-item queries (``{"query", "targets": [corpus-relative paths], ...}``): the queries whose
  target is found without collapsing (in the first ``--top`` hits) but hidden with it (not shown
  as itself in the first ``--top``);
- queries without targets (``{"query", "kind"}``, benchmarks/search_queries.json): the queries
  where collapsing hid one of the first 10 uncollapsed hits that is not a copy of a hit shown (the
  same text in the same format as one): another format, version or translation hidden. A hit in
  no cluster that is missing is not counted: collapsing orders ties newest first, so it moved.

The collapsing rule is the code that runs this script: run it with main's interpreter for the
figures before a change and with the branch's after; both read the same index (the rule is
worked out at search time from the catalog).

    .venv/bin/deskdex --home /tmp/collapse-before index /tmp/corpora/mixed   # OCR off in its config
    .venv/bin/python benchmarks/collapse_hidden.py --home /tmp/collapse-before \\
        --queries benchmarks/collapse_queries.json --queries benchmarks/search_queries.json --label after

Writes benchmarks/results/collapse_hidden-LABEL.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from deskdex.errors import DeskdexError
from deskdex.index import Collection, search
from deskdex.paths import Home

RESULTS = Path(__file__).parent / "results"


def load(paths: list[str]) -> list[dict[str, Any]]:
    """The queries of every file: a JSON list, or an object with a ``queries`` list."""
    out: list[dict[str, Any]] = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        for q in data["queries"] if isinstance(data, dict) else data:
            out.append({**q, "file": os.path.basename(p)})
    return out


def where(hit: dict[str, Any], corpus: str) -> str:
    """A hit as a corpus-relative path (an archive member: the archive's path, ``#``, its name)."""
    uri = str(hit["uri"])
    rel = os.path.relpath(hit["path"], corpus)
    return rel + "#" + uri.split("#", 1)[1] if "#" in uri else rel


def run(coll: Collection, query: str, collapse: bool, top: int) -> list[dict[str, Any]]:
    try:
        return list(search(coll, query, limit=top, snippets=False, collapse=collapse)["hits"])
    except DeskdexError as exc:
        print(f"  {query!r}: {exc}")
        return []


def timed(coll: Collection, queries: list[str], rounds: int) -> dict[str, float]:
    """Each query's median time over ``rounds`` (after one untimed run), in ms: their median, 95th
    percentile and maximum."""
    per: list[float] = []
    for q in queries:
        times = []
        for i in range(rounds + 1):
            t = time.perf_counter()
            try:
                search(coll, q, limit=10)
            except DeskdexError:
                break
            if i:
                times.append(1000 * (time.perf_counter() - t))
        if times:
            per.append(statistics.median(times))
    per.sort()
    return {"median_ms": round(statistics.median(per), 1), "p95_ms": round(per[int(0.95 * (len(per) - 1))], 1),
            "max_ms": round(per[-1], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True, help="a deskdex home holding the indexed corpus")
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--queries", action="append", required=True, help="a JSON file of queries (repeatable)")
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--label", default="run", help="names the results file")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds of the searches people run (10 hits, "
                    "snippets, collapsed): what the collapsing rule costs")
    args = ap.parse_args()
    queries = load(args.queries)
    corpus = os.path.abspath(args.corpus)
    known = {"queries": 0, "found": 0, "hidden": 0, "hidden_queries": []}
    free = {"queries": 0, "hid_other": 0, "hid_copy_only": 0, "hidden_queries": []}
    started = time.monotonic()
    with Collection.open(Home.resolve(args.home).data_dir) as coll:
        db = coll.catalog.db
        kind = {uri: (text, mime) for uri, text, mime in db.execute("SELECT uri, text_sum, mime FROM docs")}
        clustered = {uri for (uri,) in db.execute("SELECT uri FROM docs WHERE cluster IS NOT NULL")}
        for q in queries:
            every = run(coll, q["query"], False, args.top)
            shown = run(coll, q["query"], True, args.top)
            shown_at = {where(h, corpus) for h in shown}
            if q.get("targets"):
                known["queries"] += 1
                found = [t for t in q["targets"] if t in {where(h, corpus) for h in every}]
                if not found:
                    print(f"  not found even without collapsing: {q['query']!r}")
                else:
                    known["found"] += 1
                    if not any(t in shown_at for t in found):
                        known["hidden"] += 1
                        known["hidden_queries"].append({"query": q["query"], "targets": found})
                continue
            free["queries"] += 1
            shown_kinds = {kind.get(h["uri"]) for h in shown}
            # In no cluster, a hit missing from the collapsed list is not collapsed away: ties in
            # score are ordered differently (newest first) when collapsing, so it moved down.
            hidden = [h for h in every[:10] if where(h, corpus) not in shown_at and h["uri"] in clustered]
            other = [where(h, corpus) for h in hidden if kind.get(h["uri"]) not in shown_kinds]
            if other:
                free["hid_other"] += 1
                free["hidden_queries"].append({"query": q["query"], "hidden": other})
            elif hidden:
                free["hid_copy_only"] += 1
        timing = timed(coll, [q["query"] for q in queries], args.rounds)
    seconds = round(time.monotonic() - started, 1)
    share = known["hidden"] / known["queries"] if known["queries"] else 0.0
    print(f"known-item queries: {known['queries']}, target found without collapsing: {known['found']}, "
          f"hidden by collapsing: {known['hidden']} ({100 * share:.1f} % of the queries)")
    for h in known["hidden_queries"]:
        print(f"  hidden: {h['query']!r} -> {', '.join(h['targets'])}")
    if free["queries"]:
        print(f"queries without targets: {free['queries']}, collapsing hid another format, version or "
              f"translation from the first 10: {free['hid_other']} "
              f"({100 * free['hid_other'] / free['queries']:.1f} %); hid copies only: {free['hid_copy_only']}")
        for h in free["hidden_queries"]:
            print(f"  hid: {h['query']!r} -> {', '.join(h['hidden'][:3])}")
    print(f"search (10 hits, snippets, collapsed), median of {args.rounds} rounds per query: "
          f"median {timing['median_ms']} ms, 95th percentile {timing['p95_ms']} ms, maximum {timing['max_ms']} ms")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"collapse_hidden-{args.label}.json"
    out.write_text(json.dumps({"label": args.label, "top": args.top, "queries_files": args.queries,
                               "known_items": known, "share_hidden": round(share, 4), "without_targets": free,
                               "timing": timing, "seconds": seconds}, indent=1) + "\n")
    print(f"written to {out} ({seconds} s)")


if __name__ == "__main__":
    main()
