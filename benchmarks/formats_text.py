"""Convert every corpus file of the text, web, mail and compound formats in this process; print, per
detected format, files, documents (members included), docs/s, MB/s and the error share.

    python benchmarks/formats_text.py [--corpus /tmp/corpora/mixed] [--limit N]

The corpus comes from ../shared/corpus/build.sh. Times are conversion only (no indexing).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deskdex.converters import Source, convert, default_registry  # noqa: E402
from deskdex.converters.detect import detect  # noqa: E402

FORMATS = {"text/plain", "text/html", "application/xhtml+xml", "text/markdown", "text/x-rst", "text/x-source",
           "text/csv", "text/tab-separated-values",
           "application/json", "application/xml", "message/rfc822", "application/mbox", "application/zip",
           "application/x-tar", "application/gzip", "application/x-bzip2", "application/x-xz",
           "application/warc", "application/x-trec"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--limit", type=int, default=0, help="at most this many files per format (0: all)")
    args = ap.parse_args()
    registry = default_registry()
    files: dict[str, list[Path]] = collections.defaultdict(list)
    for p in sorted(Path(args.corpus).rglob("*")):
        if p.is_file() and not p.is_symlink():
            mime = detect(Source.from_path(p), registry)
            if mime in FORMATS and (not args.limit or len(files[mime]) < args.limit):
                files[mime].append(p)
    print(f"{'format':28} {'files':>6} {'docs':>6} {'MB':>8} {'docs/s':>8} {'MB/s':>7} {'errors':>7}  top reasons")
    for mime in sorted(files):
        docs = errors = 0
        size = sum(p.stat().st_size for p in files[mime])
        reasons: collections.Counter[str] = collections.Counter()
        start = time.perf_counter()
        for p in files[mime]:
            for o in convert(Source.from_path(p)):
                docs += 1
                if not o.ok:
                    errors += 1
                    reasons[o.reason] += 1
        secs = time.perf_counter() - start
        top = ", ".join(f"{r} {n}" for r, n in reasons.most_common(3))
        print(f"{mime:28} {len(files[mime]):6d} {docs:6d} {size / 1e6:8.2f} {docs / secs:8.0f} "
              f"{size / 1e6 / secs:7.2f} {errors / max(docs, 1):7.1%}  {top}")


if __name__ == "__main__":
    main()
