"""Meaning search (issue 32; docs/search.md, "Meaning"): what it gives and what it costs.

    nice -n 10 .venv/bin/python benchmarks/meaning_search.py [--home /tmp/ranking_home] \
        [--corpus /tmp/corpora/mixed] [--work /tmp/meaning_bench] [--parts quality,notes,corpus,daemon] [--notes 10000]
        [--repeat 5] [--corpus-repeat 1]

quality: --home is a home holding the corpus indexed by the words (benchmarks/ranking_mrr.py makes one);
it is copied to WORK/corpus_home and every stored text of the copy gets its vectors (no file is
converted again: the cost of embedding alone, timed in CPU seconds). Then every query of
benchmarks/meaning_items.json (written to avoid the target's words) and benchmarks/known_items.json
(exact words) runs on the copy by the words alone (``words=True``) and fused with meaning: MRR@50,
S@1, S@10 by split (train/test, drawn before any tuning), as benchmarks/ranking_mrr.py counts them.
Also: catalog size before and after, the vectors' memory in a searching process, and the median time
of a search with snippets in process (fused and by words).

notes: NOTES small real-text notes (paragraphs of the corpus's text files, one per file) indexed by
the installed ``deskdex index`` with meaning off and on, alternated --repeat times: CPU seconds of the
whole process tree (the command and its converter processes) and store size, medians.
corpus: the same for the whole corpus (--corpus-repeat times; about 5 minutes a run on 2 cores).
daemon: the daemon's PSS on the corpus homes of the corpus part, meaning off and on, idle after six searches.

Results on stdout and in benchmarks/results/meaning_search.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from deskdex.index import Collection
from deskdex.index import meaning
from deskdex.index.search import search

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ranking_mrr import DEPTH, rank, report  # noqa: E402  # the same counting as the ranking benchmark

DESKDEX = str(Path(sys.executable).with_name("deskdex"))


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def store_bytes(home: Path) -> int:
    return sum(f.stat().st_size for f in (home / "data").rglob("*") if f.is_file())


def add_vectors(home: Path) -> dict[str, Any]:
    """Vectors for every stored text of ``home``'s index, as a writer opening an index made without
    meaning makes them (``Collection.embed_missing``). Its CPU includes reading and parsing each
    stored text, which an indexer with meaning on has in hand already."""
    t0, c0 = time.monotonic(), own_cpu()
    m = meaning.model()
    load_cpu = own_cpu() - c0
    with Collection.open(str(home / "data"), writable=True) as coll:
        db = coll.catalog.db
        meaning.create(db)
        coll.catalog.commit()
        coll.meaning = m
        c1 = own_cpu()
        n = coll.embed_missing()
        embed_cpu = own_cpu() - c1
        passages = db.execute(f"SELECT coalesce(sum(length(vecs)), 0) / {meaning.KEPT}, count(*) FROM meaning").fetchone()
    return {"texts_embedded": n, "texts": passages[1], "passages": passages[0], "model_load_cpu_s": round(load_cpu, 2),
            "embed_cpu_s": round(embed_cpu, 1), "wall_s": round(time.monotonic() - t0, 1)}


MEMORY = """
import sys
from deskdex.index import Collection
from deskdex.index.search import search
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024
coll = Collection.open(sys.argv[1])
search(coll, "warm up the words", words=True)
before = rss()
search(coll, "warm up the vectors", words=False)
print(round(rss() - before, 1))
"""


def memory(home: Path) -> float:
    """What a searching process grows by when it loads the model and the vectors (MiB of RSS), in
    a process of its own that has searched by the words first."""
    p = subprocess.run([sys.executable, "-c", MEMORY, str(home / "data")], capture_output=True, text=True, check=True)
    return float(p.stdout.strip())


def quality(home: Path, corpus: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Collection.open(str(home / "data")) as coll:
        for name in ("meaning_items", "known_items", "known_items_fresh"):
            items = json.loads((HERE / f"{name}.json").read_text())
            for mode, words in (("words", True), ("fused", False)):
                ranks = [rank(list(search(coll, it["query"], limit=DEPTH, snippets=False, words=words)["hits"]),
                              set(it["targets"]), corpus) for it in items]
                out[f"{name}/{mode}"] = report(items, ranks)
        queries = [it["query"] for n in ("meaning_items", "known_items")
                   for it in json.loads((HERE / f"{n}.json").read_text())]
        out["memory_mib_vectors_and_model"] = memory(home)
        for mode, words in (("words", True), ("fused", False)):
            times = []
            for q in queries:
                t = time.perf_counter()
                search(coll, q, words=words)
                times.append(1000 * (time.perf_counter() - t))
            out[f"search_ms_median/{mode}"] = round(statistics.median(times), 1)
            out[f"search_ms_p95/{mode}"] = round(sorted(times)[int(0.95 * len(times))], 1)
    return out


def make_notes(folder: Path, corpus: Path, n: int) -> None:
    """``n`` notes of one real paragraph each (40 to 300 words), from the corpus's text files."""
    folder.mkdir(parents=True)
    i = 0
    for path in sorted(corpus.rglob("*.txt")):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for para in re.split(r"\n\s*\n", text):
            if 40 <= len(para.split()) <= 300:
                sub = folder / f"{i // 500:03d}"
                sub.mkdir(exist_ok=True)
                (sub / f"note{i:05d}.txt").write_text(para.strip() + "\n")
                i += 1
                if i >= n:
                    return
    raise SystemExit(f"only {i} paragraphs in {corpus}'s text files; fewer than {n}")


def notes(work: Path, corpus: Path, n: int, repeat: int) -> dict[str, Any]:
    """Off and on, alternated ``repeat`` times (CPU time on this virtual machine varies by a fifth
    from one run to the next): medians."""
    folder = work / "notes"
    if not folder.is_dir():
        make_notes(folder, corpus, n)
    return off_and_on(work, folder, repeat, {"notes": n}, "notes")


def off_and_on(work: Path, folder: Path, repeat: int, out: dict[str, Any], name: str) -> dict[str, Any]:
    """``deskdex index FOLDER`` into a new home with meaning off, then on, ``repeat`` times: the CPU
    of the whole process tree (benchmarks/recoll_proc.py ``measure``: the converters' fork server
    outlives the command, so the command's own children's time would leave the converters out)."""
    from recoll_proc import measure

    out["runs"] = repeat
    runs: dict[str, list[dict[str, float]]] = {"false": [], "true": []}
    for _ in range(repeat):
        for setting in ("false", "true"):
            home = work / f"{name}_home_{setting}"
            shutil.rmtree(home, ignore_errors=True)
            (home / "config").mkdir(parents=True)
            (home / "config" / "config.toml").write_text(f"meaning = {setting}\n[ocr]\nenabled = false\n")
            run = measure([DESKDEX, "--home", str(home), "index", str(folder)])
            assert run.rc == 0, run.stderr
            runs[setting].append({"cpu_s": run.cpu, "wall_s": run.wall, "store_mib": store_bytes(home) / 2**20})
    for setting, rs in runs.items():
        out[f"meaning_{setting}"] = {k: round(statistics.median(r[k] for r in rs), 2) for k in rs[0]}
        out[f"meaning_{setting}"]["cpu_s_each"] = [round(r["cpu_s"], 2) for r in rs]
    off, on = out["meaning_false"], out["meaning_true"]
    out["cpu_increase_pct"] = round(100 * (on["cpu_s"] / off["cpu_s"] - 1), 1)
    out["store_increase_pct"] = round(100 * (on["store_mib"] / off["store_mib"] - 1), 1)
    return out


def daemon_memory(work: Path, corpus: str) -> dict[str, float]:
    """PSS of the daemon's process tree with meaning off and on, on the corpus homes the ``corpus``
    part made (WORK/corpus_home_false and _true), idle after six searches of the meaning set (once
    it has released what a pass and the searches held: web_latency.settled_memory)."""
    from web_latency import Daemon, settled_memory

    queries = [it["query"] for it in json.loads((HERE / "meaning_items.json").read_text())[:6]]
    out: dict[str, float] = {}
    for setting in ("false", "true"):
        home = work / f"corpus_home_{setting}"
        if not (home / "data" / "catalog.sqlite").exists():
            raise SystemExit(f"no index in {home}: run the corpus part first")
        # Watching the corpus it indexed: the daemon's pass finds nothing to convert.
        (home / "config" / "config.toml").write_text(
            f"folders = [{json.dumps(corpus)}]\nmeaning = {setting}\n[ocr]\nenabled = false\n")
        d = Daemon(home, web=False)
        try:
            for q in queries:
                d.call("search", query=q, snippets=True, limit=10)
            out["on" if setting == "true" else "off"] = settled_memory(d.proc.pid)["pss"]
        finally:
            d.stop()
    out["increase"] = round(out["on"] - out["off"], 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", default="/tmp/ranking_home")
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--work", default="/tmp/meaning_bench")
    ap.add_argument("--parts", default="quality,notes")
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5, help="runs of the notes, off and on alternated")
    ap.add_argument("--corpus-repeat", type=int, default=1, help="runs of the whole corpus, off and on alternated")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = os.path.abspath(args.corpus)
    results: dict[str, Any] = {}
    parts = args.parts.split(",")
    if "quality" in parts:
        home = work / "corpus_home"
        if not (home / "data" / "catalog.sqlite").exists():
            shutil.copytree(args.home, home, ignore=shutil.ignore_patterns("run", "*.lock", "*.sock"))
            # A daemon or `deskdex index` on this home keeps the vectors (with the setting off it drops them).
            config = home / "config" / "config.toml"
            config.write_text("meaning = true\n" + (config.read_text() if config.exists() else ""))
            size = store_bytes(home)
            results["corpus_embedding"] = add_vectors(home)
            results["corpus_embedding"]["store_mib_before"] = round(size / 2**20, 1)
            results["corpus_embedding"]["store_mib_after"] = round(store_bytes(home) / 2**20, 1)
            results["corpus_embedding"]["store_increase_pct"] = round(100 * (store_bytes(home) / size - 1), 1)
        results["corpus_quality"] = quality(home, corpus)
    if "notes" in parts:
        results["notes"] = notes(work, Path(corpus), args.notes, args.repeat)
    if "corpus" in parts:
        results["corpus_indexing"] = off_and_on(work, Path(corpus), args.corpus_repeat, {"corpus": corpus}, "corpus")
    if "daemon" in parts:
        results["daemon_pss_mib_idle_after_six_searches"] = daemon_memory(work, corpus)
    print(json.dumps(results, indent=1))
    out = HERE / "results" / "meaning_search.json"
    old = json.loads(out.read_text()) if out.exists() else {}
    old.update(results)
    out.write_text(json.dumps(old, indent=1) + "\n")


if __name__ == "__main__":
    main()
