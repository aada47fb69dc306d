"""deskdex and Recoll side by side on the same corpus, in one run: full index (wall, CPU, peak memory,
size, documents and failures per format), a second unchanged run, command-line search time, search
quality on the judged queries of benchmarks/queries.json, freshness through the live daemons, idle
CPU, and the throughput a CPU-bound program keeps beside a full index.

    packaging/system-deps-bench.sh            # once, as root: recollcmd, poppler-utils, filters
    .venv/bin/pip install -e '.[bench]'       # matplotlib for the charts
    .venv/bin/python benchmarks/compare_recoll.py [--fresh 20] [--idle 300] [--quick]

Writes benchmarks/results/recoll-comparison.{md,json} and the PNG charts; see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recoll_report  # noqa: E402
import recoll_steps as steps  # noqa: E402
from recoll_tools import ROOT, Deskdex, Recoll  # noqa: E402

from deskdex.pipeline.scan import Excluder, walk  # noqa: E402


def ensure_prerequisites(corpus: Path) -> None:
    if not shutil.which("recollindex") or not shutil.which("pdftotext"):
        subprocess.run([str(ROOT / "packaging" / "system-deps-bench.sh")], check=True)
    if not corpus.is_dir():
        subprocess.run([str(ROOT.parent / "shared" / "corpus" / "build.sh")], check=True)
    if not corpus.is_dir():
        sys.exit(f"no corpus at {corpus} after ../shared/corpus/build.sh")


def load_manifest(corpus: Path) -> dict[str, str]:
    path = corpus.parent / "manifest.tsv"
    if not path.exists():
        return {}
    rows = (line.split("\t") for line in path.read_text().splitlines()[1:])
    return {r[0]: r[1] for r in rows if len(r) >= 2}


def run_dict(run) -> dict:
    return {k: v for k, v in asdict(run).items() if k not in ("stdout", "stderr", "peaks", "cmd")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--fresh", type=int, default=20, help="freshness trials (median of these)")
    ap.add_argument("--fresh-timeout", type=float, default=90.0)
    ap.add_argument("--idle", type=float, default=300.0, help="quiet seconds for the idle CPU figure")
    ap.add_argument("--search-reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="CI-sized: 3 freshness trials, 20 s idle, 1 search rep")
    ap.add_argument("--keep", action="store_true", help="keep the indexes (printed at the end)")
    ap.add_argument("--from-json", metavar="FILE", help="only write the report again from a run's JSON")
    args = ap.parse_args()
    if args.from_json:
        r = json.loads(Path(args.from_json).read_text())
        r["figures"] = {name: recoll_report.flat(r, name) for name in ("deskdex", "recoll")}
        recoll_report.write(r, Path(args.out))
        return
    if args.quick:
        args.fresh, args.idle, args.search_reps = 3, 20.0, 1
    corpus = Path(args.corpus).resolve()
    ensure_prerequisites(corpus)
    manifest = load_manifest(corpus)
    work = tempfile.mkdtemp(prefix="deskdex-vs-recoll-")
    tools = [Deskdex(os.path.join(work, "deskdex"), str(corpus)), Recoll(os.path.join(work, "recoll"), str(corpus))]
    files = [p for p in corpus.rglob("*") if p.is_file()]
    notes: list[str] = []
    r: dict = {"when": time.strftime("%Y-%m-%d %H:%M"), "corpus": str(corpus), "corpus_files": len(files),
               "corpus_bytes": sum(p.stat().st_size for p in files),
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
               "command": "python benchmarks/compare_recoll.py " + " ".join(sys.argv[1:]),
               "recoll_version": subprocess.run(["dpkg-query", "-W", "-f=${Version}", "recollcmd"],
                                                capture_output=True, text=True).stdout}
    for p in files:  # the same warm page cache for both (the first tool would otherwise pay for the reads)
        with open(p, "rb") as f:
            while f.read(1 << 20):
                pass

    for label in ("index", "second"):
        for t in tools:
            print(f"{t.name}: {label} run ...", flush=True)
            run = t.index()
            r.setdefault(t.name, {})[label] = run_dict(run)
            if label == "index":
                r[t.name]["summary"] = t.summary(run)
            print(f"  {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, {run.peak_rss_sum / 2**20:.0f} MiB", flush=True)
    for t in tools:
        r[t.name]["size_bytes"] = t.size()
        r[t.name]["per_format"] = {k: dict(v) for k, v in t.per_format(manifest).items()}

    print("search timing, no daemon running ...", flush=True)
    r["search_no_daemon"] = steps.search_times(tools, str(corpus), args.search_reps)
    queries = json.loads((ROOT / "benchmarks" / "queries.json").read_text())["queries"]
    r["quality"] = steps.quality(tools, str(corpus), queries)

    print("search timing, freshness and idle (live daemons side by side) ...", flush=True)
    target = corpus / "deb" / "bash-doc" / "examples" / "INDEX.txt"
    if not target.exists():  # a smaller corpus: any text file
        target = next(p for p in sorted(files) if p.suffix == ".txt")
    original, st = target.read_bytes(), target.stat()
    procs = {}
    try:
        for t in tools:
            procs[t.name], how = steps.start_daemon(t, work)
            notes.append(f"{t.name} freshness: {how}")
        time.sleep(5)
        steps.wait_idle(tools[0])
        # As people search: deskdex's daemon runs (it is the service users keep running); recollq
        # reads its index directly whether recollindex -m runs or not.
        r["search"] = steps.search_times(tools, str(corpus), args.search_reps)
        r["search_snippets"] = steps.search_times(tools, str(corpus), args.search_reps, mode="snippets")
        r["freshness"] = steps.freshness(tools, str(target), args.fresh, args.fresh_timeout)
        time.sleep(25)  # past deskdex's idle release of its workers (20 s) and Recoll's last flush
        r["idle"] = {"seconds": args.idle, "cpu": steps.idle_cpu(procs, args.idle)}
    finally:
        for p in procs.values():
            steps.stop_daemon(p)
        target.write_bytes(original)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))

    print("interference ...", flush=True)
    r["interference"] = {}
    for t in tools:
        fresh = type(t)(os.path.join(work, t.name + "-again"), str(corpus))
        cmd = ([*fresh.index_cmd()[:3], "daemon", "--once"] if t.name == "deskdex"
               else fresh.index_cmd())
        r["interference"][t.name] = steps.interference(cmd, 10.0, 3600.0, getattr(fresh, "env", None))
        print(f"  {t.name}: {r['interference'][t.name]}", flush=True)
    notes.append("interference: `deskdex daemon --once` (workers at idle priority, as the daemon runs) against "
                 "`recollindex` (its default niceness), each on a fresh index, beside a one-thread Python loop")
    notes.append("Recoll leaves out the MIME types deskdex does not convert (" + " ".join(
        __import__("recoll_tools").RECOLL_EXCLUDED_MIMES.split()) + "); its queries use the query language "
                 "(words ANDed, as recollq -a), deskdex's its own; both stem English")
    left_out = len(files) - sum(1 for _ in walk(str(corpus), Excluder()))
    notes.append(f"deskdex's default exclusions (hidden files, *.egg-info/, build/, cache/, *.class, ...) leave "
                 f"out {left_out} corpus files that Recoll indexes; they are in neither of deskdex's counts")
    notes.append("CPU is user+sys of every process of the tree, orphans included: the benchmark becomes a child "
                 "subreaper, so processes that outlive their parent (deskdex's multiprocessing fork server "
                 "and its converters) are reaped by it and counted through RUSAGE_CHILDREN. Peak memory is the "
                 "largest sum of the current RSS of every process of the tree at one 0.2 s sample; the sum of "
                 "every process's own "
                 "peak (VmHWM) is also given, but it adds up processes that never lived at the same time "
                 "(Recoll restarts its filter processes)")
    r["notes"] = notes
    r["figures"] = {t.name: recoll_report.flat(r, t.name) for t in tools}
    recoll_report.write(r, Path(args.out))
    print((Path(args.out) / "recoll-comparison.md").read_text())
    if args.keep:
        print("kept", work)
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
