"""Ranking quality on known-item queries (issue 17): MRR@50, success@1 and @10 of the real search.

    python benchmarks/ranking_mrr.py [--home DIR] [--corpus /tmp/corpora/mixed] \
        [--items FILE] [--boosts title=2,body=1,...] [--set NAME=VALUE ...] [--out NAME] [--quiet]

Queries: benchmarks/known_items.json, written by reading documents of the corpus (never from
search output), or another set of that form (--items: known_items_fresh.json, written
before the tuning of issue 32 and never tuned on; meaning_items.json, queries that avoid the
target's words): each names the document(s) a person remembering it wants (several only when
they are copies of one document) and its split, train or test, drawn at random (seed 17; 3232 for
the fresh set, 3233 for the meaning set) before
any tuning; tune on train only and read test as the held-out figure.

--home: a home holding the corpus indexed; made and indexed (OCR off) when it holds no index yet,
reused as it is otherwise. Every query runs through deskdex.index.search.search on the home's
Collection, with duplicate collapsing off and on; the rank of a query is that of the first hit
that is one of its targets or a member inside one (an attachment of a target mail), 0 past 50.
--boosts: field weights put in place of index/fulltext.py FIELD_BOOSTS for this run (fields not
named keep theirs), so tuning needs no code change. --set: a module constant of
deskdex.index.query for this run (NAME=VALUE, VALUE a number), the knobs of how text clauses
are combined. Results on stdout and in benchmarks/results/ranking_mrr.json (or NAME.json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse
from collections import defaultdict
from pathlib import Path
from typing import Any

from deskdex.index import Collection, fulltext, query
from deskdex.index.search import search

HERE = Path(__file__).resolve().parent
DESKDEX = str(Path(sys.executable).with_name("deskdex"))
DEPTH = 50  # MRR@50: a target found past this counts as not found


def ensure_index(home: str, corpus: str) -> None:
    data = Path(home, "data", "tantivy")
    if data.is_dir() and any(data.iterdir()):
        return
    Path(home, "config").mkdir(parents=True, exist_ok=True)
    Path(home, "config", "config.toml").write_text("[ocr]\nenabled = false\n")
    os.chmod(home, 0o700)
    t0 = time.monotonic()
    subprocess.run([DESKDEX, "--home", home, "index", corpus], check=True, stdout=subprocess.DEVNULL)
    print(f"indexed {corpus} in {time.monotonic() - t0:.0f} s", file=sys.stderr)


def parse_pairs(text: str) -> dict[str, float]:
    out = {}
    for pair in filter(None, text.split(",")):
        name, _, value = pair.partition("=")
        out[name.strip()] = float(value)
    return out


def rank(hits: list[dict[str, Any]], targets: set[str], corpus: str) -> int:
    """1-based rank of the first hit that is a target (or inside one), 0 if none is."""
    for i, hit in enumerate(hits, 1):
        uri = hit["uri"].split("#", 1)[0]
        path = urllib.parse.unquote(uri.removeprefix("file://"))
        if os.path.relpath(path, corpus) in targets:
            return i
    return 0


def figures(ranks: list[int]) -> dict[str, float]:
    n = len(ranks) or 1
    return {"n": len(ranks), "mrr": round(sum(1 / r for r in ranks if r) / n, 4),
            "s@1": round(sum(r == 1 for r in ranks) / n, 4), "s@10": round(sum(0 < r <= 10 for r in ranks) / n, 4)}


def run(coll: Collection, items: list[dict[str, Any]], corpus: str, collapse: bool) -> list[int]:
    ranks = []
    for item in items:
        hits = search(coll, item["query"], limit=DEPTH, snippets=False, collapse=collapse)["hits"]
        ranks.append(rank(list(hits), set(item["targets"]), corpus))
    return ranks


def report(items: list[dict[str, Any]], ranks: list[int]) -> dict[str, Any]:
    groups: dict[str, list[int]] = defaultdict(list)
    for item, r in zip(items, ranks):
        groups[item["split"]].append(r)
        groups[f"{item['split']}/{item['kind']}"].append(r)
        groups["all"].append(r)
    return {name: figures(rs) for name, rs in sorted(groups.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", default="/tmp/ranking_home")
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--items", "--queries", dest="queries", default=str(HERE / "known_items.json"),
                    help="the query set: known_items.json, known_items_fresh.json (held out), meaning_items.json")
    ap.add_argument("--boosts", default="", help="field=weight,... in place of FIELD_BOOSTS")
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: a constant of deskdex.index.query")
    ap.add_argument("--out", default="ranking_mrr")
    ap.add_argument("--quiet", action="store_true", help="print the summary line only")
    args = ap.parse_args()
    corpus = os.path.abspath(args.corpus)
    ensure_index(args.home, corpus)
    fulltext.FIELD_BOOSTS.update(parse_pairs(args.boosts))
    for name, value in parse_pairs(",".join(args.set)).items():
        if not hasattr(query, name):
            sys.exit(f"deskdex.index.query has no {name}")
        setattr(query, name, type(getattr(query, name))(value))
    items = json.loads(Path(args.queries).read_text())
    results: dict[str, Any] = {"boosts": dict(fulltext.FIELD_BOOSTS), "set": args.set, "queries": len(items)}
    with Collection.open(os.path.join(args.home, "data")) as coll:
        for collapse in (False, True):
            ranks = run(coll, items, corpus, collapse)
            mode = "collapse_on" if collapse else "collapse_off"
            results[mode] = report(items, ranks)
            results[mode + "_ranks"] = {item["query"]: r for item, r in zip(items, ranks)}
    for mode in ("collapse_off", "collapse_on"):
        r = results[mode]
        print(f"{mode:12}  train MRR {r['train']['mrr']:.3f} s@1 {r['train']['s@1']:.3f} s@10 {r['train']['s@10']:.3f}"
              f"  |  test MRR {r['test']['mrr']:.3f} s@1 {r['test']['s@1']:.3f} s@10 {r['test']['s@10']:.3f}")
        if not args.quiet:
            for name, f in r.items():
                if "/" in name:
                    print(f"    {name:16} n={f['n']:3}  MRR {f['mrr']:.3f}  s@1 {f['s@1']:.3f}  s@10 {f['s@10']:.3f}")
    out = HERE / "results" / f"{args.out}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
