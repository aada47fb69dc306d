"""Index the corpus from scratch and again unchanged; print documents/s, MB/s, sizes, and the
median wall time of five `deskdex search` commands.

    python benchmarks/index_corpus.py --corpus /tmp/corpora/mixed [--exclude-pdf] [--workers N]

The corpus comes from ../shared/corpus/build.sh. Results go to stdout and, as JSON, to
benchmarks/results/index_corpus.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ["debian package", "spreadsheet", '"regular expression"', "unicode encoding", "python"]


def deskdex(home: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deskdex", "--home", home, *args], capture_output=True,
                          text=True, cwd=ROOT, check=True)


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--exclude-pdf", action="store_true", help="leave PDFs out (pdfminer alone is very slow)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        sys.exit(f"no corpus at {corpus}: run ../shared/corpus/build.sh")
    home = tempfile.mkdtemp(prefix="deskdex-bench-")
    extra = ["--workers", str(args.workers)]
    if args.exclude_pdf:
        Path(home, "config").mkdir(parents=True, exist_ok=True)
        Path(home, "config", "config.toml").write_text('exclude = ["*.pdf"]\n')
    files = [p for p in corpus.rglob("*") if p.is_file() and not (args.exclude_pdf and p.suffix.lower() == ".pdf")]
    corpus_bytes = sum(p.stat().st_size for p in files)

    t0 = time.perf_counter()
    first = json.loads(deskdex(home, "index", str(corpus), "--json", *extra).stdout)
    full = time.perf_counter() - t0
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    second = json.loads(deskdex(home, "index", str(corpus), "--json", *extra).stdout)
    again = time.perf_counter() - t0

    timings = {}
    for q in QUERIES:
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            deskdex(home, "search", q, "--limit", "10")
            runs.append(time.perf_counter() - t)
        timings[q] = statistics.median(runs)
    data = Path(home, "data")
    sizes = {"tantivy": du(data / "tantivy"), "store": sum(p.stat().st_size for p in data.glob("catalog.sqlite*"))}
    docs = first["indexed"] + first["members"] + first["reused"]
    result = {
        "corpus_files": len(files), "corpus_bytes": corpus_bytes, "workers": args.workers,
        "exclude_pdf": args.exclude_pdf,
        "full_seconds": round(full, 2), "cpu_seconds_children": round(cpu.ru_utime + cpu.ru_stime, 1),
        "documents": docs, "failed": first["failed"], "failed_by_reason": first["failed_by_reason"],
        "docs_per_second": round(docs / full, 1), "mb_per_second": round(corpus_bytes / 1e6 / full, 2),
        "second_run_seconds": round(again, 2), "second_run_unchanged": second["unchanged"],
        "index_bytes": sizes["tantivy"], "store_bytes": sizes["store"],
        "index_plus_store_vs_corpus": round((sizes["tantivy"] + sizes["store"]) / corpus_bytes, 3),
        "search_median_seconds": {q: round(t, 3) for q, t in timings.items()},
        "search_median_of_medians": round(statistics.median(timings.values()), 3),
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "index_corpus.json").write_text(json.dumps(result, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    else:
        print("kept", home)


if __name__ == "__main__":
    main()
