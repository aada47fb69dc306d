"""Compare PDF text extractors on corpus PDFs: pypdfium2, pdfminer.six, poppler's pdftotext.

Prints seconds per file, MB/s, failures, and text agreement between each pair of engines as
word-set Jaccard and containment (share of A's words found in B), averaged over the files
both engines read. Each extraction runs in a child process under a time limit; the time
measured is the extraction alone (imports excluded; pdftotext includes its process start).

    .venv/bin/python benchmarks/pdf_compare.py [--corpus /tmp/corpora/mixed] [--sample 40] [--timeout 60]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ENGINES = ("pypdfium2", "pdfminer", "pdftotext")
_WORD = re.compile(r"\w+")


def extract(engine: str, path: str) -> tuple[float, str]:
    if engine == "pypdfium2":
        import pypdfium2 as pdfium

        t = time.perf_counter()
        pdf = pdfium.PdfDocument(path)
        parts = []
        for i in range(len(pdf)):
            page = pdf[i]
            tp = page.get_textpage()
            parts.append(tp.get_text_range())
            tp.close()
            page.close()
        pdf.close()
        return time.perf_counter() - t, "\n".join(parts)
    if engine == "pdfminer":
        import logging

        logging.getLogger("pdfminer").setLevel(logging.ERROR)
        from pdfminer.high_level import extract_text

        t = time.perf_counter()
        text = extract_text(path)
        return time.perf_counter() - t, text
    t = time.perf_counter()
    out = subprocess.run(["pdftotext", "-q", "-enc", "UTF-8", path, "-"], capture_output=True, check=True)
    return time.perf_counter() - t, out.stdout.decode("utf-8", "replace")


def run_one(engine: str, path: Path, timeout: float) -> dict[str, object]:
    try:
        proc = subprocess.run([sys.executable, __file__, "--one", engine, str(path)], capture_output=True,
                              timeout=timeout, text=True)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout {timeout:g}s", "seconds": timeout}
    if proc.returncode != 0:
        return {"ok": False, "error": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(proc.stdout)


def sample(corpus: Path, n: int) -> list[Path]:
    pdfs = sorted(p for p in corpus.rglob("*.pdf") if p.is_file())
    # Deterministic and spread over the corpus: the n paths with the smallest hashes.
    return sorted(pdfs, key=lambda p: hashlib.sha1(str(p.relative_to(corpus)).encode()).hexdigest())[:n]


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        seconds, text = extract(*args.one)
        print(json.dumps({"ok": True, "seconds": seconds, "text": text}))
        return
    files = sample(Path(args.corpus), args.sample)
    total_mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"{len(files)} PDFs, {total_mb:.1f} MB, time limit {args.timeout:g} s per file and engine", flush=True)
    results: dict[str, list[dict[str, object]]] = {e: [] for e in ENGINES}
    for i, f in enumerate(files, 1):
        for e in ENGINES:
            results[e].append(run_one(e, f, args.timeout))
        print(f"[{i}/{len(files)}] {f.relative_to(args.corpus)}  " + "  ".join(
            f"{e}={r['seconds']:.2f}s" if r.get("ok") else f"{e}=FAIL" for e, r in
            ((e, results[e][-1]) for e in ENGINES)), file=sys.stderr, flush=True)
    print(f"\n{'engine':<10} {'ok':>4} {'fail':>4} {'s/file':>8} {'median s':>9} {'MB/s':>7}")
    for e in ENGINES:
        ok = [(r, f) for r, f in zip(results[e], files) if r.get("ok")]
        secs = sorted(float(r["seconds"]) for r, _ in ok)
        mb = sum(f.stat().st_size for _, f in ok) / 1e6
        total = sum(secs)
        print(f"{e:<10} {len(ok):>4} {len(files) - len(ok):>4} {total / max(len(ok), 1):>8.3f} "
              f"{secs[len(secs) // 2] if secs else 0:>9.3f} {mb / total if total else 0:>7.2f}")
    print(f"\n{'pair (A vs B)':<24} {'files':>5} {'Jaccard':>8} {'A in B':>7} {'B in A':>7}")
    for a, b in itertools.combinations(ENGINES, 2):
        jac, ab, ba = [], [], []
        for ra, rb in zip(results[a], results[b]):
            if not (ra.get("ok") and rb.get("ok")):
                continue
            wa, wb = words(str(ra["text"])), words(str(rb["text"]))
            if not wa and not wb:
                continue
            inter = len(wa & wb)
            jac.append(inter / len(wa | wb))
            ab.append(inter / len(wa) if wa else 0.0)
            ba.append(inter / len(wb) if wb else 0.0)
        n = max(len(jac), 1)
        print(f"{a + ' vs ' + b:<24} {len(jac):>5} {sum(jac) / n:>8.3f} {sum(ab) / n:>7.3f} {sum(ba) / n:>7.3f}")
    fails = [(e, f.relative_to(args.corpus), r["error"]) for e in ENGINES
             for r, f in zip(results[e], files) if not r.get("ok")]
    for e, f, err in fails:
        print(f"FAIL {e}: {f}: {err}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
