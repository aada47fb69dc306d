"""How well deskdex finds the main text of real web pages, beside trafilatura alone.

    .venv/bin/python benchmarks/main_content.py [--sets news,sphinx,sphinx-themes] [--limit N]
        [--part tune|held-out|both] [--per-page]
    .venv/bin/python benchmarks/main_content.py --corpus-speed trafilatura|dom|tokens|none

For each labelled page (see benchmarks/labelled_pages.py) it extracts the main text with deskdex's
default (trafilatura's text aligned onto our blocks), the DOM method (the fallback, the default
before issue 17), the notes' token method, all text (no marking, a floor) and trafilatura alone
(its own text, default and ``fast``), and prints per data set and per part (``tune``: the pages
tuned on; ``held-out``: never looked at while tuning; see ``Page.part``), averaged over pages: word
precision, recall and F1 (bag of words against the label), word 4-gram overlap (Jaccard of the sets
of 4-grams) and ms per page; then for a set drawn from several manuals the F1 of each method per
manual. Figures go to benchmarks/results/main_content.json. A set that cannot be loaded is reported
MISSING and the others still run. ``--corpus-speed`` instead converts the corpus's HTML pages with
one method (what indexing spends on them); run it under /work/shared/tools/peak_pss.py for memory.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deskdex.converters import content, html  # noqa: E402
from deskdex.converters.content import WORD  # noqa: E402
from deskdex.converters.html import from_text  # noqa: E402
from deskdex.converters.source import Source  # noqa: E402
import labelled_pages  # noqa: E402


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def prf(got: list[str], want: list[str]) -> tuple[float, float, float]:
    common = sum((Counter(got) & Counter(want)).values())
    p = common / len(got) if got else 0.0
    r = common / len(want) if want else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def ngram_overlap(got: list[str], want: list[str], n: int = 4) -> float:
    a = {tuple(got[k:k + n]) for k in range(len(got) - n + 1)}
    b = {tuple(want[k:k + n]) for k in range(len(want) - n + 1)}
    return len(a & b) / len(a | b) if a | b else 0.0


def _deskdex(method: str | None) -> Callable[[str], str]:
    def extract(html: str) -> str:
        return from_text(html, "http://bench.invalid/", "text/html", main_content=method).body_text()
    return extract


def _trafilatura(**options: bool) -> Callable[[str], str] | None:
    try:
        import trafilatura
    except ImportError:
        print("trafilatura not installed (pip install -e '.[bench]'): its column is left out", file=sys.stderr)
        return None
    return lambda html: trafilatura.extract(html, include_comments=False, include_tables=True, **options) or ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(labelled_pages.LABELS))
    ap.add_argument("--limit", type=int, default=None, help="at most this many pages of each sphinx set")
    ap.add_argument("--part", choices=("tune", "held-out", "both"), default="both",
                    help="only the pages of one part (tune while tuning: the held-out part stays unseen)")
    ap.add_argument("--per-page", action="store_true")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "main_content.json")
    ap.add_argument("--corpus-speed", metavar="METHOD", choices=(*content.METHODS, "none"),
                    help="instead: convert the corpus's HTML pages with METHOD and print the time")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    if args.corpus_speed:
        return corpus_speed(None if args.corpus_speed == "none" else args.corpus_speed)
    methods: dict[str, Callable[[str], str]] = {
        "default (traf.)": _deskdex("trafilatura"), "dom": _deskdex("dom"), "tokens (notes)": _deskdex("tokens"),
        "all text": _deskdex(None)}
    for label, options in (("trafilatura", {}), ("trafilatura fast", {"fast": True})):
        fn = _trafilatura(**options)
        if fn:
            methods[label] = fn
    loaders = {name: (lambda load=load: load(limit=args.limit)) for name, load in labelled_pages.LOADERS.items()}
    results: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for name in args.sets.split(","):
        try:
            pages = [p for p in loaders[name]() if args.part in ("both", p.part)]
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"\n{name}: MISSING, cannot load its pages ({exc})")
            continue
        if not pages:
            print(f"\n{name}: no pages" + (f" in the {args.part} part" if args.part != "both" else " found: MISSING"))
            continue
        parts = Counter(p.part for p in pages)
        print(f"\n{name}: {len(pages)} pages ({parts['tune']} tune, {parts['held-out']} held-out); "
              f"labels: {labelled_pages.LABELS[name]}")
        print(f"{'method':18} {'part':9} {'pages':>5} {'P':>6} {'R':>6} {'F1':>6} {'4-gram':>7} {'ms/page':>8}")
        by_source: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        results[name] = {}
        for label, fn in methods.items():
            scores: dict[str, list[tuple[float, float, float, float, float]]] = defaultdict(list)
            fn(pages[0].html)  # a first call imports the library: no page's time
            for page in pages:
                t0 = time.perf_counter()
                text = fn(page.html)
                dt = time.perf_counter() - t0
                got, want = words(text), words(page.label)
                p, r, f = prf(got, want)
                g = ngram_overlap(got, want)
                by_source[f"{_source(page.name)} {page.part}"][label].append(f)
                scores[page.part].append((p, r, f, g, dt))
                scores["all"].append((p, r, f, g, dt))
                if args.per_page:
                    print(f"    {label:18} {page.part:9} {page.name:50} P={p:.2f} R={r:.2f} F1={f:.2f} 4g={g:.2f}")
            results[name][label] = {}
            for part in ("tune", "held-out", "all"):
                rows = scores.get(part)
                if not rows or (part == "all" and len(scores) < 3):  # "all" only where both parts are
                    continue
                p, r, f, g, dt = (sum(col) / len(rows) for col in zip(*rows))
                results[name][label][part] = {"pages": len(rows), "precision": round(p, 4), "recall": round(r, 4),
                                              "f1": round(f, 4), "ngram4": round(g, 4), "ms_per_page": round(1000 * dt, 2)}
                print(f"{label:18} {part:9} {len(rows):5} {p:6.3f} {r:6.3f} {f:6.3f} {g:7.3f} {1000 * dt:8.1f}")
        # One manual with many pages of one kind can carry a set's average: F1 per source and part.
        if len({src.rsplit(" ", 1)[0] for src in by_source}) > 1:
            results[name]["by source"] = {src: {label: round(sum(v) / len(v), 4) for label, v in fs.items()}
                                          for src, fs in sorted(by_source.items())}
            print("  F1 by source: " + "; ".join(
                f"{src} ({len(next(iter(fs.values())))}): " + " ".join(f"{sum(v) / len(v):.2f}" for v in fs.values())
                for src, fs in sorted(by_source.items())) + f"  [{', '.join(methods)}]")
    if args.part == "both" and args.limit is None:
        # A run of some sets replaces their figures only: the others' stay as last measured.
        args.out.parent.mkdir(parents=True, exist_ok=True)
        figures = json.loads(args.out.read_text()) if args.out.exists() else {}
        args.out.write_text(json.dumps({**figures, **results}, indent=1) + "\n")
        print(f"\nwritten to {args.out}")
    return 0


def corpus_speed(method: str | None, corpus: Path = labelled_pages.CORPUS) -> int:
    """Convert every HTML page of the corpus (by suffix) with ``method``: the time indexing spends."""
    paths = sorted(p for p in corpus.rglob("*") if p.suffix.lower() in (".html", ".htm", ".xhtml") and p.is_file())
    t0 = time.perf_counter()
    blocks = main = 0
    for path in paths:
        doc = html.convert(Source.from_path(path), "text/html", main_content=method)
        blocks += len(doc.blocks)
        main += sum(not b.boilerplate for b in doc.blocks)
    dt = time.perf_counter() - t0
    print(f"{method}: {len(paths)} pages in {dt:.1f} s ({1000 * dt / max(len(paths), 1):.1f} ms/page); "
          f"{main} of {blocks} blocks main")
    out = Path(__file__).parent / "results" / "main_content_speed.json"
    figures = json.loads(out.read_text()) if out.exists() else {}
    figures[str(method)] = {"pages": len(paths), "seconds": round(dt, 1), "blocks": blocks, "main_blocks": main}
    out.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


def _source(name: str) -> str:
    """The manual a page comes from (``sphinx/MANUAL/...``), the generator of an own page
    (``own/GENERATOR/...``), or its set."""
    parts = name.split("/")
    return parts[1] if parts[0] in ("sphinx", "own", "own2", "own3") and len(parts) > 2 else parts[0]


if __name__ == "__main__":
    sys.exit(main())
