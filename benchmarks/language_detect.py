"""Language detectors compared on corpus texts: accuracy, speed and memory.

Labelled texts: the Debian Administrator's Handbook pages of the corpus, one folder per language
(/tmp/corpora/mixed/deb/debian-handbook/<ll-CC>/), converted with converters.convert, main text
only; each detector sees the sample deskdex detects on (converters/language.py: SAMPLE characters
from the start of the body). Many translated pages are still English past their heading: a
page's label is its folder's language only when the sample says so by a rule independent of
both detectors (``label``: most letters in the language's script, or more of its common words
than English ones), else English. Half of the pages of each language (every other file, sorted) are
held out and reported apart, so that the choice is not tuned to the pages it is scored on.

Each detector runs in a fresh process so that its memory (peak RSS) is its own.

Usage: .venv/bin/python benchmarks/language_detect.py [--pages 60]
Writes benchmarks/results/language_detect.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HANDBOOK = "/tmp/corpora/mixed/deb/debian-handbook"
HERE = os.path.dirname(os.path.abspath(__file__))


# A few of each language's commonest words (Latin-script languages of the handbook).
_COMMON = {"en": {"the", "and", "of", "is", "to", "in", "that", "for"},
           "de": {"der", "die", "und", "das", "ist", "nicht", "mit", "ein"},
           "es": {"el", "la", "de", "que", "y", "los", "las", "es"},
           "fr": {"le", "la", "les", "et", "des", "est", "une", "du"}}
_SCRIPT = {"ar": ("\u0600", "\u06ff"), "el": ("\u0370", "\u03ff"), "ru": ("\u0400", "\u04ff"),
           "ja": ("\u3040", "\u9fff"), "ko": ("\uac00", "\ud7af"), "zh": ("\u4e00", "\u9fff")}


def label(code: str, text: str) -> str:
    """``code`` if the text is in that language by the rule of the module docstring, else en."""
    letters = [c for c in text if c.isalpha()]
    if code in _SCRIPT:
        lo, hi = _SCRIPT[code]
        return code if sum(lo <= c <= hi for c in letters) > len(letters) / 2 else "en"
    words = text.lower().split()
    mine = sum(w in _COMMON.get(code, set()) for w in words)
    return code if mine > sum(w in _COMMON["en"] for w in words) else "en"


def samples(pages: int) -> list[tuple[str, str, bool]]:
    """(language code, sample, held out) for up to ``pages`` pages of each language."""
    from deskdex.converters.convert import convert
    from deskdex.converters.language import SAMPLE
    from deskdex.converters.source import Source

    out = []
    for folder in sorted(glob.glob(os.path.join(HANDBOOK, "*"))):
        code = os.path.basename(folder).split("-")[0]
        for i, path in enumerate(sorted(glob.glob(os.path.join(folder, "*.html")))[:pages]):
            doc = convert(Source.from_path(path))[0].document
            text = doc.text(main_only=True)[:SAMPLE] if doc is not None else ""
            if len(text) > 200:
                out.append((label(code, text), text, i % 2 == 1))
    return out


def run_one(name: str, data: str) -> dict[str, object]:
    """In a child process: load detector ``name``, detect every sample, report."""
    items = json.load(open(data))
    start = time.perf_counter()
    if name == "py3langid":
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

        def detect(text: str) -> str:
            return str(ident.classify(text)[0])
    else:
        from lingua import LanguageDetectorBuilder

        detector = LanguageDetectorBuilder.from_all_languages().with_low_accuracy_mode().build()

        def detect(text: str) -> str:
            lang = detector.detect_language_of(text)
            return lang.iso_code_639_1.name.lower() if lang is not None else ""
    loaded = time.perf_counter() - start
    detect(items[0][1])  # lingua loads its models on first use
    first = time.perf_counter() - start
    t0 = time.perf_counter()
    got = [detect(text) for _, text, _ in items]
    spent = time.perf_counter() - t0
    result: dict[str, object] = {"load_s": round(loaded, 3), "first_s": round(first, 3),
                                 "ms_per_text": round(1000 * spent / len(items), 2),
                                 "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    for part, held in (("tuning", False), ("held_out", True)):
        pairs = [(code, g) for (code, _, h), g in zip(items, got) if h == held]
        result[f"accuracy_{part}"] = round(sum(c == g for c, g in pairs) / len(pairs), 4)
        result[f"texts_{part}"] = len(pairs)
        result[f"errors_{part}"] = sorted({f"{c}->{g}" for c, g in pairs if c != g})
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=60)
    ap.add_argument("--child", nargs=2)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(*args.child)))
        return
    data = "/tmp/language_detect_samples.json"
    items = samples(args.pages)
    json.dump(items, open(data, "w"))
    print(f"{len(items)} texts, languages: {sorted({c for c, _, _ in items})}")
    results = {}
    for name in ("py3langid", "lingua-low-accuracy"):
        out = subprocess.run([sys.executable, __file__, "--child", name, data], capture_output=True, text=True,
                             check=True)
        results[name] = json.loads(out.stdout)
        print(name, json.dumps(results[name]))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "language_detect.json"), "w") as f:
        json.dump({"texts": len(items), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
