"""Near-duplicate quality on real text: precision and recall for several (k, min_similarity).

Documents come from the corpus (/tmp/corpora/mixed, built by ../shared/corpus/build.sh),
converted with converters.convert. Positive pairs:
  - edits a person or a site would make to a document: a changed header, a changed date,
    a paragraph added (taken from another document), all three at once;
  - the same text in another format, as the corpus ships it: Python's docs as HTML and as
    reST source, Debian policy documents as HTML and plain text, debmake-doc as PDF and text.
Negative pairs: every other pair, in particular the hundreds of different pages of one Sphinx
site (one template). A second run glues each HTML page's boilerplate back into its main text
(a converter that did not spot the template) to see whether the template alone merges pages.

Usage: .venv/bin/python benchmarks/dups_quality.py [--pages 200]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import os
import random
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deskdex.converters.convert import convert  # noqa: E402
from deskdex.converters import Source  # noqa: E402
from deskdex.paths import path_to_uri  # noqa: E402
from deskdex.index import fingerprints as fpr  # noqa: E402
from deskdex.index.simhash import simhash  # noqa: E402

CORPUS = "/tmp/corpora/mixed/deb"
SETTINGS = [(k, s) for k in (3, 4, 6, 8, 10) for s in (0.0, 0.3, 0.5, 0.7)]
FP_ONLY = (0.3, 0.5)  # the patent's method alone, for comparison


def text_of(path: str) -> tuple[str, str]:
    """(main text, boilerplate) of a file, decompressing .gz the way a compressed file is converted."""
    if path.endswith(".gz"):
        name = os.path.basename(path)[:-3]
        src = Source(uri=path_to_uri(path), name=name, data=gzip.decompress(open(path, "rb").read()))
    else:
        src = Source.from_path(path)
    doc = convert(src)[0].document
    if doc is None:
        return "", ""
    return doc.text(main_only=True), doc.body_text(boilerplate=True)


def edits(text: str, other: str, rng: random.Random) -> dict[str, str]:
    paras = [p for p in text.split("\n") if p.strip()]
    extra = " ".join(other.split()[:80])  # a paragraph of about 80 words from another document
    at = rng.randrange(len(paras) + 1)
    header = "Printed by j.smith on workstation-42 | Internal copy | Do not distribute"
    dated = re.sub(r"\b(19|20)\d\d\b", "2031", text)
    dated = f"Last updated: {rng.randint(1, 28)} March 2031\n" + dated
    return {
        "header": header + "\n" + "\n".join(paras[1:]),
        "date": dated,
        "paragraph": "\n".join(paras[:at] + [extra] + paras[at:]),
        "all three": header + "\n" + "Last updated: 2 May 2031\n" + "\n".join(paras[1:at] + [extra] + paras[at:]),
    }


def format_pairs(n_sphinx: int, rng: random.Random) -> list[tuple[str, str, str]]:
    pairs = []
    srcs = sorted(glob.glob(f"{CORPUS}/python3.11-doc/html/_sources/**/*.rst.txt", recursive=True))
    for s in rng.sample(srcs, min(n_sphinx, len(srcs))):
        html = s.replace("/_sources/", "/").replace(".rst.txt", ".html")
        if os.path.isfile(html):
            pairs.append(("html/rst", html, s))
    pol = f"{CORPUS}/debian-policy"
    for h, t in [("README.html", "README.txt.gz"), ("autopkgtest.html", "autopkgtest.txt.gz"),
                 ("copyright-format-1.0.html", "copyright-format-1.0.txt.gz"),
                 ("debconf_specification.html", "debconf_specification.txt.gz"),
                 ("menu-policy-1.html", "menu-policy.txt.gz"), ("perl-policy-1.html", "perl-policy.txt.gz")]:
        pairs.append(("html/txt", f"{pol}/{h}", f"{pol}/{t}"))
    for lang in ("en", "de"):
        pairs.append(("pdf/txt", f"{CORPUS}/debmake-doc/debmake-doc.{lang}.pdf",
                      f"{CORPUS}/debmake-doc/debmake-doc.{lang}.txt.gz"))
    return pairs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=200, help="Sphinx pages to edit and to pair with their source")
    args = ap.parse_args()
    if not os.path.isdir(CORPUS):
        sys.exit(f"no corpus at {CORPUS}: run ../shared/corpus/build.sh")
    rng = random.Random(7)
    t0 = time.perf_counter()
    htmls = sorted(glob.glob(f"{CORPUS}/python3.11-doc/html/**/*.html", recursive=True))
    htmls += sorted(glob.glob(f"{CORPUS}/debian-reference/*.en.html"))
    originals = {p: text_of(p) for p in rng.sample(htmls, min(args.pages, len(htmls)))}
    originals = {p: t for p, t in originals.items() if len(t[0].split()) >= 100}
    docs: list[tuple[str, str, str]] = []  # (label, main, boilerplate)
    family: list[str] = []  # the source a document was made from: same family = duplicates
    kind_of: list[str] = []
    others = list(originals.values())
    for p, (main, boiler) in originals.items():
        docs.append((p, main, boiler))
        family.append(p)
        kind_of.append("original")
        for kind, edited in edits(main, rng.choice(others)[0], rng).items():
            docs.append((f"{p} [{kind}]", edited, boiler))
            family.append(p)
            kind_of.append(kind)
    for kind, a, b in format_pairs(args.pages // 2, rng):
        if a not in originals:
            docs.append((a, *text_of(a)))
            family.append(a)
            kind_of.append("original")
        docs.append((b, *text_of(b)))
        family.append(a)
        kind_of.append(kind)
    # A true pair: two documents of one family, labelled by the edit that made the second.
    truth = {(i, j): kind_of[j] if kind_of[i] == "original" else f"{kind_of[i][:3]}~{kind_of[j][:3]}"
             for i in range(len(docs)) for j in range(i + 1, len(docs)) if family[i] == family[j]}
    truth = {p: ("edit~edit" if "~" in v else v) for p, v in truth.items()}
    print(f"{len(docs)} documents, {len(truth)} true pairs, converted in {time.perf_counter() - t0:.1f} s")
    for glued in (False, True):
        evaluate(docs, truth, glued)


def evaluate(docs: list[tuple[str, str, str]], truth: dict[tuple[int, int], str], glued: bool) -> None:
    mains = [m + "\n" + b if glued else m for _, m, b in docs]
    sh = [simhash(m) for m in mains]
    fps = [fpr.fingerprints(m) for m in mains]
    has = np.array([s is not None for s in sh])
    fp_arr = np.array([s or 0 for s in sh], dtype=np.uint64)
    dist = np.bitwise_count(fp_arr[:, None] ^ fp_arr[None, :])
    dist[~has, :] = 99
    dist[:, ~has] = 99
    ii, jj = np.nonzero(np.triu(dist <= max(k for k, _ in SETTINGS), 1))
    sims = {(i, j): fpr.similarity(fps[i], fps[j]) for i, j in zip(ii.tolist(), jj.tolist())}
    print(f"\n== {'boilerplate glued into the main text' if glued else 'main text only (boilerplate apart)'}")
    kinds = sorted(set(truth.values()))
    print(f"{'k':>3} {'min_sim':>7} {'found':>6} {'false+':>6} {'precision':>9} {'recall':>6}  "
          + "  ".join(f"{k[:10]:>10}" for k in kinds))
    for k, s in SETTINGS:
        found = {p for p, v in sims.items() if dist[p] <= k and v >= s}
        tp = found & truth.keys()
        prec = len(tp) / len(found) if found else 1.0
        rec = len(tp) / len(truth)
        per = []
        for kind in kinds:
            want = [p for p, v in truth.items() if v == kind]
            per.append(f"{sum(p in found for p in want)}/{len(want)}")
        print(f"{k:>3} {s:>7.2f} {len(found):>6} {len(found - tp):>6} {prec:>9.3f} {rec:>6.3f}  "
              + "  ".join(f"{x:>10}" for x in per))
    for s in FP_ONLY:
        found = set(fpr.shared_pairs(dict(enumerate(fps)), s))
        tp = found & truth.keys()
        per = [f"{sum(p in found for p in truth if truth[p] == kind)}/{sum(v == kind for v in truth.values())}"
               for kind in kinds]
        print(f"{'fp':>3} {s:>7.2f} {len(found):>6} {len(found - tp):>6} {len(tp) / max(1, len(found)):>9.3f} "
              f"{len(tp) / len(truth):>6.3f}  " + "  ".join(f"{x:>10}" for x in per))
    for kind in kinds:
        ds = sorted(int(dist[p]) for p, v in truth.items() if v == kind)
        print(f"simhash distance of true pairs, {kind}: median {ds[len(ds) // 2]}, 90th pct "
              f"{ds[int(len(ds) * 0.9)]}, max {ds[-1]}")
    tsims = sorted((fpr.similarity(fps[p[0]], fps[p[1]]), int(dist[p]), v) for p, v in truth.items())
    print("hardest true pairs (similarity, distance, kind):", [(round(a, 2), b, c) for a, b, c in tsims[:6]])
    false = sorted(((v, int(dist[p]), p) for p, v in sims.items() if p not in truth and dist[p] <= 10),
                   reverse=True)[:5]
    print("closest false pairs (similarity, distance):",
          [(round(v, 2), d, os.path.basename(docs[p[0]][0]), os.path.basename(docs[p[1]][0])) for v, d, p in false])


if __name__ == "__main__":
    main()
