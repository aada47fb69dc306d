"""OCR quality: pages of real PDFs rendered to images as a scanner would make them, read back by
deskdex's own code path (an image file through ``converters.convert``: media.image, imagetext, ocr),
and compared with the PDFs' own text layer.

    python benchmarks/ocr_quality.py [--corpus /tmp/corpora/mixed] [--pages 40]

Pages: English pages with a decent text layer (at least 150 words, mostly common English words, no
other script, words not run together; no table of contents or index, whose dot leaders are no text),
at most 3 per PDF, from as many PDFs as it takes. Each page is rendered at 150 and 300 dpi in grey,
given mild noise (Gaussian, sigma 8 of 255) and a small rotation (+-1 to 2 degrees, fixed per page),
saved as PNG with its dpi, and converted. Word recall and precision are over multisets of lower-case
words (letters and digits) against the text layer; seconds per page are the conversion's wall time,
one page at a time. Results go to stdout and to benchmarks/results/ocr_quality.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import unicodedata
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
from PIL import Image, ImageChops, ImageFilter

from deskdex.converters import Limits, Source, convert
from deskdex.converters.limits import OcrOptions

ROOT = Path(__file__).resolve().parent.parent
WORD = re.compile(r"[a-z0-9]+")
COMMON = {"the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "with", "be", "on", "this",
          "are", "by", "or", "an", "not", "from", "at", "which", "can", "you", "if", "we", "all", "will"}
DPIS = (150, 300)


def words(text: str) -> list[str]:
    # Ligatures (the text layer's "\ufb01") as letters, pdfium's marks of a hyphen it already joined
    # dropped (as converters/pdf.py does), a hyphen at a line end joining the word.
    text = unicodedata.normalize("NFKC", text.replace("\ufffe", "").replace("\x02", ""))
    return WORD.findall(re.sub(r"(\w)-\r?\n(\w)", r"\1\2", text).lower())


def english(text: str) -> bool:
    ws = words(text)
    if len(ws) < 150:
        return False
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if sum(ln[-1].isdigit() for ln in lines) > 0.3 * len(lines) or ". . ." in text or "...." in text:
        return False  # a table of contents or an index: dot leaders and page numbers, not prose
    if sum(len(w) > 18 for w in ws) > 0.01 * len(ws):
        return False  # words run together: a text layer without its spaces
    shown = [ch for ch in text if not ch.isspace()]
    foreign = sum(not ch.isascii() for ch in shown)  # CJK, Cyrillic...: another language's page
    return sum(w in COMMON for w in ws) / len(ws) >= 0.12 and foreign <= 0.01 * len(shown)


def pick_pages(corpus: Path, want: int) -> list[tuple[Path, int, str]]:
    picked: list[tuple[Path, int, str]] = []
    for path in sorted(corpus.rglob("*.pdf")):
        try:
            pdf = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError:
            continue
        try:
            n = 0
            for i in range(min(len(pdf), 30)):
                page = pdf[i]
                tp = page.get_textpage()
                text = tp.get_text_range()
                tp.close()
                w, h = page.get_size()
                page.close()
                if w > 700 or h > 1000 or not english(text):  # A4/Letter-ish pages only
                    continue
                picked.append((path, i, text))
                n += 1
                if n == 3:
                    break
        finally:
            pdf.close()
        if len(picked) >= want:
            break
    return picked


def scan(path: Path, index: int, dpi: int, angle: float) -> Image.Image:
    """The page as a scanner would give it: grey, a little noise, a little askew."""
    pdf = pdfium.PdfDocument(str(path))
    try:
        page = pdf[index]
        im = page.render(scale=dpi / 72, grayscale=True).to_pil().copy()
        page.close()
    finally:
        pdf.close()
    im = im.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    noise = Image.effect_noise(im.size, 8)  # Gaussian, centred on 128, sigma 8
    im = ImageChops.add(im, noise, 1.0, -128)  # im + noise - 128, clipped
    return im.filter(ImageFilter.GaussianBlur(0.3))


def score(truth: list[str], got: list[str]) -> tuple[float, float]:
    t, g = Counter(truth), Counter(got)
    common = sum((t & g).values())
    return common / max(1, sum(t.values())), common / max(1, sum(g.values()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--pages", type=int, default=40)
    args = ap.parse_args()
    pages = pick_pages(Path(args.corpus), args.pages)
    if len(pages) < args.pages:
        sys.exit(f"only {len(pages)} English pages with a text layer found under {args.corpus}")
    limits = Limits(time_seconds=600.0, ocr=OcrOptions(seconds=300.0))
    rng = random.Random(16)
    per_dpi: dict[int, list[dict[str, Any]]] = {d: [] for d in DPIS}
    with tempfile.TemporaryDirectory(prefix="deskdex-ocr-bench-") as tmp:
        for n, (path, index, text) in enumerate(pages):
            angle = rng.choice((-1, 1)) * rng.uniform(1.0, 2.0)
            truth = words(text)
            for dpi in DPIS:
                out = Path(tmp, f"p{n}-{dpi}.png")
                scan(path, index, dpi, angle).save(out, dpi=(dpi, dpi))
                t0 = time.perf_counter()
                outcome = convert(Source.from_path(out), limits=limits)[0]
                seconds = time.perf_counter() - t0
                doc = outcome.document
                assert doc is not None, outcome.message
                got = words("\n".join(b.text for b in doc.blocks if not b.text.startswith("Size: ")))
                recall, precision = score(truth, got)
                per_dpi[dpi].append({"pdf": str(path.relative_to(args.corpus)), "page": index + 1, "angle": round(angle, 2),
                                     "words": len(truth), "recall": round(recall, 4),
                                     "precision": round(precision, 4), "seconds": round(seconds, 2),
                                     "ocr": doc.meta.get("ocr")})
                print(f"{dpi} dpi {path.name} p{index + 1}: recall {recall:.3f} precision {precision:.3f} "
                      f"{seconds:.1f} s", flush=True)
    summary: dict[str, Any] = {"pages": len(pages), "pdfs": len({p for p, _, _ in pages}), "noise_sigma": 8,
                               "rotation_degrees": "1 to 2, either way", "by_dpi": {}}
    for dpi, rows in per_dpi.items():
        truth_total = sum(r["words"] for r in rows)
        summary["by_dpi"][str(dpi)] = {
            # Micro-averaged (every word counts once) and the median page.
            "recall": round(sum(r["recall"] * r["words"] for r in rows) / truth_total, 4),
            "precision": round(sum(r["precision"] * r["words"] for r in rows) / truth_total, 4),
            "precision_median_page": statistics.median(r["precision"] for r in rows),
            "recall_median_page": statistics.median(r["recall"] for r in rows),
            "recall_worst_page": min(r["recall"] for r in rows),
            "seconds_per_page": round(statistics.mean(r["seconds"] for r in rows), 2),
        }
    summary["pages_detail"] = per_dpi
    out = ROOT / "benchmarks" / "results" / "ocr_quality.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["by_dpi"], indent=2))


if __name__ == "__main__":
    main()
