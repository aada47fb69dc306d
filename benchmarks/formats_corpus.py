"""Share of corpus files per office format (and PDF) converted without error, with speed.

Every file goes through ``converters.convert.convert`` inside ``converters.isolation.WorkerPool``
(one file per worker at a time, killed past the time limit). Formats run one after another
so each gets its own wall time: docs/s and MB/s are per format.

    .venv/bin/python benchmarks/formats_corpus.py [--corpus /tmp/corpora/mixed] [--workers 1] [--timeout 60]
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter, defaultdict
from pathlib import Path

from deskdex.converters.isolation import WorkerPool
from deskdex.converters.limits import Limits
from deskdex.converters.source import Source

FORMATS = ("pdf", "docx", "odt", "ott", "ods", "ots", "odp", "otp", "odg", "otg", "fodt", "rtf",
           "pptx", "pptm", "xlsx", "xlsm", "epub")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--formats", default=",".join(FORMATS))
    args = ap.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    corpus = Path(args.corpus)
    wanted = args.formats.split(",")
    by_ext: dict[str, list[Path]] = defaultdict(list)
    for p in sorted(corpus.rglob("*")):
        ext = p.suffix.lower().lstrip(".")
        if ext in wanted and p.is_file():
            by_ext[ext].append(p)
    limits = Limits(time_seconds=args.timeout)
    print(f"{'format':<7} {'files':>5} {'ok':>5} {'errors':>6} {'err %':>6} {'docs/s':>7} {'MB/s':>6}  reasons")
    totals = Counter()
    failures: list[str] = []
    with WorkerPool(workers=args.workers, limits=limits, idle=False) as pool:
        for ext in wanted:
            files = by_ext.get(ext, [])
            if not files:
                continue
            size = sum(f.stat().st_size for f in files)
            reasons: Counter[str] = Counter()
            t = time.perf_counter()
            for source, outcomes in pool.map(Source.from_path(f) for f in files):
                first = outcomes[0]
                if not first.ok:
                    reasons[first.reason] += 1
                    failures.append(f"{ext}: {source.uri.removeprefix('file://' + str(corpus))}: "
                                    f"{first.reason}: {first.message[:140]}")
            wall = time.perf_counter() - t
            errors = sum(reasons.values())
            totals.update(files=len(files), errors=errors, bytes=size)
            totals["wall"] += wall
            print(f"{ext:<7} {len(files):>5} {len(files) - errors:>5} {errors:>6} {100 * errors / len(files):>6.1f} "
                  f"{len(files) / wall:>7.1f} {size / 1e6 / wall:>6.2f}  {dict(reasons) or ''}", flush=True)
    if totals["files"]:
        print(f"{'all':<7} {totals['files']:>5} {totals['files'] - totals['errors']:>5} {totals['errors']:>6} "
              f"{100 * totals['errors'] / totals['files']:>6.1f} {totals['files'] / totals['wall']:>7.1f} "
              f"{totals['bytes'] / 1e6 / totals['wall']:>6.2f}")
    for line in failures:
        print("FAIL", line)


if __name__ == "__main__":
    main()
