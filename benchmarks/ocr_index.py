"""What OCR costs a full index: the corpus indexed from scratch with OCR off, then on.

    python benchmarks/ocr_index.py [--corpus /tmp/corpora/mixed] [--workers 2] [--subset]

``--subset``: only the corpus's images and PDFs (copied, as links, into a temporary folder), the
files OCR can touch. For each run: wall time of ``deskdex index``, and how many documents say what
OCR did (``ocr`` in their metadata: yes, partial, failed, skipped...), read back from the catalog.
Results go to stdout and to benchmarks/results/ocr_index.json (ocr_index_subset.json with --subset).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from deskdex.index import Collection

ROOT = Path(__file__).resolve().parent.parent
OCR_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".gif", ".bmp", ".webp", ".pdf"}


def run(corpus: Path, workers: int, enabled: bool) -> dict[str, object]:
    home = tempfile.mkdtemp(prefix="deskdex-ocr-index-")
    try:
        Path(home, "config").mkdir()
        Path(home, "config", "config.toml").write_text(f"[ocr]\nenabled = {'true' if enabled else 'false'}\n")
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "deskdex", "--home", home, "index", str(corpus), "--json",
                              "--workers", str(workers)], capture_output=True, text=True, check=True, cwd=ROOT)
        seconds = time.perf_counter() - t0
        summary = json.loads(out.stdout)
        ocr: Counter[str] = Counter()
        words = 0
        with Collection.open(str(Path(home, "data"))) as coll:
            for row in coll.catalog.rows("status='ok' AND (mime LIKE 'image/%' OR mime LIKE '%pdf')"):
                doc = coll.document(row)
                if doc is not None and "ocr" in doc.meta:
                    ocr[doc.meta["ocr"]] += 1
                    if doc.meta["ocr"] in ("yes", "partial"):
                        words += len(doc.body_text().split())
        return {"ocr": enabled, "seconds": round(seconds, 1), "indexed": summary["indexed"],
                "reused": summary["reused"], "members": summary["members"], "failed": summary["failed"],
                "failed_by_reason": summary["failed_by_reason"], "documents_by_ocr": dict(ocr),
                "words_of_ocr_documents": words}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--subset", action="store_true", help="only the images and PDFs of the corpus")
    args = ap.parse_args()
    corpus = Path(args.corpus)
    files = [p for p in corpus.rglob("*") if p.is_file()]
    tmp = None
    if args.subset:
        tmp = Path(tempfile.mkdtemp(prefix="deskdex-ocr-subset-"))
        files = [p for p in files if p.suffix.lower() in OCR_SUFFIXES]
        for p in files:
            dest = tmp / p.relative_to(corpus)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.link(p, dest) if p.stat().st_dev == tmp.stat().st_dev else shutil.copy2(p, dest)
        corpus = tmp
    try:
        runs = [run(corpus, args.workers, False), run(corpus, args.workers, True)]
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    result = {"corpus": args.corpus, "subset": "images and PDFs" if args.subset else "all", "files": len(files),
              "workers": args.workers, "runs": runs}
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results" / ("ocr_index_subset.json" if args.subset else "ocr_index.json")
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
