"""What the ``document`` op (issue 30: the web UI's preview) costs on a big document: index.document
on one text of 20,000 blocks (about 2.3 MB of tagged text, pages on every block), read with no
query, marked for a word in every block, a word in one block in a hundred, a word it lacks, a
fuzzy word, a prefix and a phrase; median of a few runs each.

    python benchmarks/document_marks.py [--blocks 20000] [--runs 5] [--data DIR]

--out: where the JSON goes. --data: keep the collection there (built once, reused by later runs: the same document for a run
of another deskdex tree, put first on PYTHONPATH, to time it before and after a change). Prints a
table and writes benchmarks/results/document_marks.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from deskdex.converters import Document
from deskdex.index import Collection, Row, document

HERE = Path(__file__).resolve().parent
URI = "file:///bench/big.pdf"
WORDS = ("the harbour master kept a ledger of every ship and its cargo while the tide turned "
         "slowly over the old stone pier near the cranes").split()
QUERIES = {"none": "", "every block": "harbour", "one block in 100": "okapi", "absent": "marmalade",
           "fuzzy": "harbor~", "prefix": "led*", "phrase": '"stone pier"', "two words": "ledger cargo"}


def build(data: str, blocks: int) -> None:
    doc = Document(uri=URI, mime="application/pdf", title="A big document")
    doc.meta["pages"] = str(blocks // 40)
    for i in range(blocks):
        words = WORDS[i % 5:] + WORDS[:i % 5]
        text = " ".join(words) + (" okapi" if i % 100 == 7 else "") + f" ({i})."
        doc.add("p", text, page=1 + i // 40)
    with Collection.open(data, writable=True) as coll:
        coll.put(Row(uri=URI, path="/bench/big.pdf", size=1, mtime=1.0, mime="application/pdf",
                     title=doc.title), doc)
        coll.commit()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--data")
    ap.add_argument("--out", help="the JSON written (default benchmarks/results/document_marks.json)")
    a = ap.parse_args()
    data = a.data or tempfile.mkdtemp(prefix="deskdex-docmarks-")
    if not (os.path.isdir(data) and os.listdir(data)):
        build(data, a.blocks)
    rows = {}
    with Collection.open(data) as coll:
        for name, query in QUERIES.items():
            got = document(coll, URI, query)
            times = []
            for _ in range(a.runs):
                t = time.perf_counter()
                document(coll, URI, query)
                times.append(time.perf_counter() - t)
            rows[name] = {"query": query, "median_s": round(statistics.median(times), 3), "marks": got["marks"]}
            print(f"{name:18} {query!r:16} {statistics.median(times):7.3f} s  {got['marks']:6} marks", flush=True)
    out = {"blocks": a.blocks, "runs": a.runs, "load_average": list(os.getloadavg()), "results": rows}
    Path(a.out or HERE / "results" / "document_marks.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
