"""Per corpus format, the files whose content deskdex indexes against those Recoll indexes (issue 16).

Recoll runs with every filter it has (nothing in ``excludedmimetypes``; its TAR filter, off by
default, on), its helpers installed by packaging/system-deps-bench.sh, ``indexallfilenames`` and its
OCR of text-less PDFs on; deskdex runs
``deskdex index`` through the installed console script with a throwaway home. A file counts as
content-indexed when it, or one of its members (an archive's files, a mail's attachments), has
text beyond its name:

- Recoll: a document of the file whose ``dbytes`` (the size of the text Recoll extracted) is at least
  SMALL_TEXT, or whose text, extracted again through Recoll's Python module, has a word in it;
- deskdex: a catalog row of the file with status ok whose stored document is not name-only
  (``content`` meta not "none") and has body text or a title other than its name (a mail with
  headers and no body: Recoll counts the headers in its text).

    packaging/system-deps-bench.sh        # once, as root: Recoll and its helpers
    .venv/bin/python benchmarks/formats_vs_recoll.py [--corpus /tmp/corpora/mixed] \\
        [--recoll-home DIR [--reuse]] [--deskdex-home DIR]

``--recoll-home DIR --reuse`` keeps the Recoll index of an earlier run in DIR (and its timing) and
indexes only deskdex again; ``--deskdex-home DIR --deskdex-reuse`` keeps deskdex's too (the report
only). Writes benchmarks/results/formats_vs_recoll.{json,md}.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recoll_proc import Run  # noqa: E402
from recoll_tools import ROOT, Deskdex, Recoll  # noqa: E402

from deskdex.converters import tagged  # noqa: E402
from deskdex.index.store import Catalog  # noqa: E402

# OCR as Recoll 1.34's manual says (section "Running OCR on image documents"): its PDF handler runs
# tesseract on a PDF with no text. Recoll has no OCR of image files: those get their EXIF tags.
RECOLL_EXTRA_CONF = "indexallfilenames = 1\npdfocr = 1\nocrprogs = tesseract\ntesseractlang = eng\n"
# Filters Recoll ships but leaves off in its mimeconf (TAR: slow on big archives), turned on in the
# config dir's own mimeconf, which Recoll merges over the system one.
RECOLL_MIMECONF = "[index]\napplication/x-tar = execm rcltar.py\n"
RUN_FILE = "formatbench-run.json"  # in the Recoll home: the timing of the run that built the index
EXAMPLES = 5  # files only one indexer reads, shown per format (the JSON lists every file only Recoll reads)


@dataclass
class FileState:
    """What one indexer made of one corpus file."""

    content: bool = False
    reasons: set[str] = field(default_factory=set)


def load_manifest(corpus: Path) -> dict[str, str]:
    rows = (line.split("\t") for line in (corpus.parent / "manifest.tsv").read_text().splitlines()[1:])
    return {r[0]: r[1] for r in rows if len(r) >= 2}


def timing(run: Run) -> dict[str, Any]:
    return {"wall_s": round(run.wall, 1), "cpu_s": round(run.cpu, 1)}


# -- Recoll -------------------------------------------------------------------------------------
def index_recoll(home: str, corpus: str, reuse: bool) -> tuple[Recoll, dict[str, Any]]:
    recoll = Recoll(home, corpus, excluded="", extra=RECOLL_EXTRA_CONF)
    Path(home, "mimeconf").write_text(RECOLL_MIMECONF)
    run_file = Path(home, RUN_FILE)
    if reuse and run_file.exists() and Path(home, "xapiandb").is_dir():
        print(f"recoll: re-using the index in {home}", flush=True)
        return recoll, {**json.loads(run_file.read_text()), "reused": True}
    print(f"recoll: indexing {corpus} into {home}", flush=True)
    t = timing(recoll.index())
    run_file.write_text(json.dumps(t))
    return recoll, t


def recoll_log_errors(recoll: Recoll) -> dict[str, str]:
    """Path -> the last error line Recoll logged for it (its filter failed, a helper is missing)."""
    out: dict[str, str] = {}
    if os.path.exists(recoll.log):
        with open(recoll.log, errors="replace") as f:
            for line in f:
                if line.startswith((":1:", ":2:")):
                    for path in (p for p in line.split("[")[1:]):
                        path = path.split("]", 1)[0]
                        if path.startswith(recoll.corpus):
                            out[path] = line.split(":", 3)[-1].strip()[:200]
    return out


# Run by the system Python (python3-recoll): for each (url, ipath, mtype) read as JSON lines, whether the text
# Recoll's filters give for that document has a word in it ("1") or not ("0"). ``dbytes`` counts
# whitespace too: an ODT with an empty body has dbytes 1.
_HAS_WORDS = r"""
import html, json, re, sys
from recoll import recoll, rclextract
db = recoll.connect(confdir=sys.argv[1])
for line in sys.stdin:
    doc = recoll.Doc()
    doc.url, doc.ipath, doc.mimetype = json.loads(line)
    try:
        text = rclextract.Extractor(doc).textextract(doc.ipath).text or ""
    except Exception:
        text = ""
    m = re.search(r"(?is)<body[^>]*>(.*)</body>", text) if "<html" in text[:300].lower() else None
    body = html.unescape(re.sub(r"(?s)<[^>]*>", " ", m.group(1))) if m else text
    found = "1" if re.search(r"\w", body) else "0"
    print(found, flush=True)
"""
SMALL_TEXT = 64  # bytes: below this, dbytes may be only whitespace; the text itself is checked


def has_words(recoll: Recoll, docs: list[tuple[str, str, str]]) -> list[bool]:
    if not docs:
        return []
    out = subprocess.run(["/usr/bin/python3", "-c", _HAS_WORDS, recoll.confdir], capture_output=True, text=True,
                         env=recoll.env, input="".join(json.dumps(d) + "\n" for d in docs), check=True).stdout
    return [line == "1" for line in out.splitlines()]


def recoll_states(recoll: Recoll) -> dict[str, FileState]:
    """Path -> state, from every document of the corpus folder with its text size (``dbytes``); a
    document with less than SMALL_TEXT bytes counts when that text has a word in it."""
    cmd = ["recollq", "-c", recoll.confdir, "-n", "0-100000000", "-F", "url ipath mtype dbytes",
           f"dir:{recoll.corpus}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=recoll.env, check=True).stdout
    states: dict[str, FileState] = defaultdict(FileState)
    small: list[tuple[str, str, str]] = []
    for line in out.splitlines()[2:]:  # the query as Recoll read it, then the count
        url, ipath, mtype, dbytes = ([base64.b64decode(p).decode("utf-8", "replace") for p in line.split(" ")]
                                     + ["", "", "", ""])[:4]
        if not url.startswith("file://") or mtype == "inode/directory":
            continue
        state = states[url[7:]]
        if int(dbytes or 0) >= SMALL_TEXT:
            state.content = True
        elif int(dbytes or 0) > 0:
            small.append((url, ipath, mtype))
        elif not ipath:
            state.reasons.add(f"no text ({mtype})")
    for (url, ipath, mtype), words in zip(small, has_words(recoll, small)):
        if words:
            states[url[7:]].content = True
        elif not ipath:
            states[url[7:]].reasons.add(f"only whitespace ({mtype})")
    for path, message in recoll_log_errors(recoll).items():
        states[path].reasons.add(f"error: {message}")
    return states


# -- deskdex ------------------------------------------------------------------------------------
def head_commit() -> str:
    """The commit of the deskdex that indexes (recorded with the run: a reused index keeps its own)."""
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def index_deskdex(home: str, corpus: str, reuse: bool) -> tuple[Deskdex, dict[str, Any]]:
    deskdex = Deskdex(home, corpus, ocr=True)  # as Recoll's pdfocr = 1 below
    run_file = Path(home, RUN_FILE)
    if reuse and run_file.exists():
        print(f"deskdex: re-using the index in {home}", flush=True)
        return deskdex, {**json.loads(run_file.read_text()), "reused": True}
    print(f"deskdex: indexing {corpus} into {home}", flush=True)
    t: dict[str, Any] = {**timing(deskdex.index()), "commit": head_commit()}
    run_file.write_text(json.dumps(t))
    return deskdex, t


def titled(title: str, uri: str) -> bool:
    """A title that is not the file's (or member's) name: a mail's subject, a page's title. Recoll
    counts those in its text (a mail's headers are part of its body there)."""
    name = unquote(re.split(r"[/#]", uri.rstrip("/"))[-1])
    return bool(title.strip()) and title.strip() != name


def deskdex_states(deskdex: Deskdex) -> dict[str, FileState]:
    """Path -> state, from deskdex's catalog and text store (read-only, through its own API)."""
    catalog = Catalog(os.path.join(deskdex.home, "data", "catalog.sqlite"), writable=False)
    try:
        rows = {r.uri: r for r in catalog.rows("source = 'files'")}
        states: dict[str, FileState] = defaultdict(FileState)
        for row in rows.values():
            top = row
            while top.parent and top.parent in rows:
                top = rows[top.parent]
            if not top.path:
                continue
            state = states[top.path]
            member = top is not row
            if row.status != "ok":
                state.reasons.add(f"{'member ' if member else ''}{row.status}: {row.reason or ''}")
                continue
            data = catalog.texts.get(row.blob) if row.blob else None
            doc = tagged.loads(data) if data is not None else None
            if doc is None:
                state.reasons.add("no stored text")
            elif doc.meta.get("content") == "none":
                if not member:
                    state.reasons.add(f"name only ({doc.mime})")
            elif (doc.body_text() + doc.body_text(boilerplate=True)).strip() or titled(doc.title, row.uri):
                state.content = True
            elif not member:
                state.reasons.add(f"empty text ({doc.mime})")
        return states
    finally:
        catalog.close()


# -- the comparison -----------------------------------------------------------------------------
def compare(manifest: dict[str, str], corpus: str, recoll: dict[str, FileState],
            deskdex: dict[str, FileState]) -> list[dict[str, Any]]:
    by_format: dict[str, list[str]] = defaultdict(list)
    for rel, fmt in manifest.items():
        by_format[fmt].append(rel)
    rows = []
    for fmt, rels in sorted(by_format.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        r_reasons: Counter[str] = Counter()
        d_reasons: Counter[str] = Counter()
        r_only, d_only = [], []
        r_n = d_n = 0
        for rel in sorted(rels):
            path = os.path.join(corpus, rel)
            r, d = recoll.get(path, FileState(reasons={"not in the index"})), \
                deskdex.get(path, FileState(reasons={"not in the index"}))
            r_n += r.content
            d_n += d.content
            if not r.content:
                r_reasons.update(r.reasons or {"no text"})
            if not d.content:
                d_reasons.update(d.reasons or {"no text"})
            if r.content and not d.content:
                r_only.append(rel)
            elif d.content and not r.content:
                d_only.append(rel)
        rows.append({"format": fmt, "files": len(rels), "recoll": r_n, "deskdex": d_n, "diff": d_n - r_n,
                     "recoll_only": len(r_only), "deskdex_only": len(d_only),
                     "recoll_only_files": r_only, "deskdex_only_examples": d_only[:EXAMPLES],
                     "recoll_reasons": dict(r_reasons.most_common(4)),
                     "deskdex_reasons": dict(d_reasons.most_common(4))})
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| format | files | recoll content | deskdex content | deskdex − recoll | recoll only | deskdex only |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        flag = " ⚠" if r["diff"] < 0 else ""
        lines.append(f"| {r['format']} | {r['files']} | {r['recoll']} | {r['deskdex']} | {r['diff']:+d}{flag} "
                     f"| {r['recoll_only']} | {r['deskdex_only']} |")
    tot = {k: sum(r[k] for r in rows) for k in ("files", "recoll", "deskdex", "recoll_only", "deskdex_only")}
    lines.append(f"| **all** | {tot['files']} | {tot['recoll']} | {tot['deskdex']} | "
                 f"{tot['deskdex'] - tot['recoll']:+d} | {tot['recoll_only']} | {tot['deskdex_only']} |")
    return lines


def timing_text(t: dict[str, Any]) -> str:
    reused = " (index of an earlier run)" if t.get("reused") else ""
    return f"{t['wall_s']:.0f} s wall, {t['cpu_s']:.0f} s CPU{reused}"


def markdown(result: dict[str, Any]) -> str:
    rows = result["formats"]
    behind = [r for r in rows if r["diff"] < 0]
    missing = [r for r in rows if r["recoll"] and not r["deskdex"]]
    out = ["# deskdex and Recoll: files whose content each indexes, per format", "",
           f"Corpus `{result['corpus']}` ({sum(r['files'] for r in rows)} files), {result['date']}, "
           f"Recoll {result['recoll']['version']}. Produced by `benchmarks/formats_vs_recoll.py`; "
           "see docs/benchmarks.md.", "",
           f"Full index (2 CPUs): Recoll {timing_text(result['recoll']['timing'])}; deskdex "
           f"{timing_text(result['deskdex']['timing'])} (commit {result['deskdex']['commit']}).", "",
           "Target (issue 16): deskdex indexes the content of every format Recoll does, and at least as many "
           f"files of each. Formats where deskdex is behind (⚠): {len(behind)}; formats Recoll reads and "
           f"deskdex does not at all: {', '.join(r['format'] for r in missing) or 'none'}.", "",
           *table(rows), "", "## Why files have no content", ""]
    for r in rows:
        if r["recoll"] == r["files"] and r["deskdex"] == r["files"]:
            continue
        out.append(f"- **{r['format']}** ({r['files']}): recoll {r['recoll_reasons'] or '-'}; "
                   f"deskdex {r['deskdex_reasons'] or '-'}")
        if r["recoll_only_files"]:
            out.append(f"  - recoll only: {', '.join('`' + p + '`' for p in r['recoll_only_files'][:EXAMPLES])}")
        if r["deskdex_only_examples"]:
            out.append(f"  - deskdex only: {', '.join('`' + p + '`' for p in r['deskdex_only_examples'])}")
    return "\n".join(out) + "\n"


def recoll_version() -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "recollcmd"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--recoll-home", help="Recoll's config and index folder (default: a temporary one)")
    ap.add_argument("--reuse", action="store_true", help="re-use the Recoll index already in --recoll-home")
    ap.add_argument("--deskdex-home", help="deskdex's home (default: a temporary one); must be new or empty")
    ap.add_argument("--deskdex-reuse", action="store_true",
                    help="re-use the deskdex index already in --deskdex-home (only the report again)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    corpus = str(Path(args.corpus).resolve())
    manifest = load_manifest(Path(corpus))
    work = "" if args.recoll_home and args.deskdex_home else tempfile.mkdtemp(prefix="formats-vs-recoll-")
    recoll, r_time = index_recoll(args.recoll_home or os.path.join(work, "recoll"), corpus, args.reuse)
    deskdex, d_time = index_deskdex(args.deskdex_home or os.path.join(work, "deskdex"), corpus, args.deskdex_reuse)
    print(f"recoll: {r_time}\ndeskdex: {d_time}", flush=True)
    rows = compare(manifest, corpus, recoll_states(recoll), deskdex_states(deskdex))
    result = {"corpus": corpus, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "recoll": {"version": recoll_version(), "home": recoll.confdir, "timing": r_time,
                         "conf": Path(recoll.confdir, "recoll.conf").read_text()},
              "deskdex": {"home": deskdex.home, "timing": d_time, "commit": d_time.get("commit", "?")},
              "formats": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "formats_vs_recoll.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    (out / "formats_vs_recoll.md").write_text(markdown(result))
    print(f"{'format':<10} {'files':>6} {'recoll':>7} {'deskdex':>8} {'d - r':>6}")
    for r in rows:
        print(f"{r['format']:<10} {r['files']:>6} {r['recoll']:>7} {r['deskdex']:>8} {r['diff']:>+6}"
              + ("  <-- deskdex behind" if r["diff"] < 0 else ""))
    print(f"written: {out / 'formats_vs_recoll.md'}, {out / 'formats_vs_recoll.json'}; indexes in "
          f"{recoll.confdir} and {deskdex.home}")


if __name__ == "__main__":
    main()
