"""Indexing speed and memory, deskdex against Recoll, case by case (issue 18).

    packaging/system-deps-bench.sh        # once, as root, if recollindex is missing
    .venv/bin/python benchmarks/index_cases.py [--cases corpus,slice1000,small10k] [--big] [--keep]
        [--corpus /tmp/corpora/mixed] [--limit N] [--profile OUT.txt]

Cases: ``corpus`` (a copy of the whole corpus), ``slice1000`` (1,000 corpus files, seeded, each format
in proportion), ``small10k`` (10,000 small real text and HTML files: the corpus's small ones, then
paragraphs of its longer text files written as small files), ``small100k`` (--big: the generated
notes of benchmarks/daemon_scale.py). Each tree is built under /tmp. For each case, the two tools one
after the other on the same tree: a first full index, a second with nothing changed, then the tree
moved away and copied back (``cp -a``: same bytes and mtimes, new inodes and ctimes) and a third run.
Per run: wall time, CPU (user+sys of the whole process tree, orphans included), peak PSS of the tree
(from /proc/PID/smaps_rollup, pages shared between processes counted once) and peak RSS of the tree,
both the largest sum at one 0.2 s sample; documents and failures. Both tools are configured as in
compare_recoll.py (recoll_tools), OCR off on both (Recoll's default).

Prints a table per case and merges the cases run into benchmarks/results/index_cases.json (not
with --limit N, which caps each case at N files for a quick check of the script). --profile runs
deskdex alone under py-spy instead (benchmarks/index_profile.py) and writes the top functions.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import index_profile  # noqa: E402
from compare_recoll import ensure_prerequisites, load_manifest  # noqa: E402
from recoll_proc import Run, _become_subreaper, _reap_orphans, exited, pss_kib, sample, tree  # noqa: E402
from recoll_tools import ROOT, Deskdex, Recoll  # noqa: E402

from deskdex.pipeline.scan import Excluder, walk  # noqa: E402

CASES = {"corpus": None, "slice1000": 1000, "small10k": 10_000, "small100k": 100_000}
SEED = 18
SMALL = 16 * 1024  # bytes: a small file of a home folder (a note, a README, a saved page)
TEXT_FORMATS = {"txt", "md", "rst"}
INTERVAL = 0.2


# -- measuring ----------------------------------------------------------------------------------
def measure(cmd: list[str], env: dict[str, str]) -> tuple[Run, int]:
    """recoll_proc.measure with the tree's PSS sampled too: (the run, peak PSS in bytes). The tree is
    every descendant of this process (a subreaper), so the fork server and workers count even if
    they outlive deskdex's main process."""
    run, peak_pss = Run(cmd), 0
    _become_subreaper()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    me = os.getpid()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        while True:
            pids = tree(me)[1:]
            run.peak_rss_live = max(run.peak_rss_live, sample(pids, run.peaks))
            peak_pss = max(peak_pss, 1024 * sum(pss_kib(p) for p in pids))
            if (ended := exited(proc.pid, INTERVAL)) is not None:
                status = ended[0]
                break
        run.wall = time.perf_counter() - t0
        run.rc = os.waitstatus_to_exitcode(status)
        _reap_orphans()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        out.seek(0)
        err.seek(0)
        run.stdout, run.stderr = out.read(), err.read()
    run.peak_rss_sum, run.processes = sum(run.peaks.values()), len(run.peaks)
    if run.rc:
        raise RuntimeError(f"{cmd[0]} failed ({run.rc}): {run.stderr[-2000:]}")
    return run, peak_pss


def index_once(tool: Deskdex | Recoll, label: str) -> dict[str, Any]:
    if isinstance(tool, Recoll) and os.path.exists(tool.log):
        os.truncate(tool.log, 0)  # its failures are read from the log of this run
    load = os.getloadavg()[0]
    run, peak_pss = measure(tool.index_cmd(), tool.env)
    out: dict[str, Any] = {"wall_s": round(run.wall, 2), "cpu_s": round(run.cpu, 2),
                           "peak_pss_mib": round(peak_pss / 2**20, 1), "peak_rss_mib": round(run.peak_rss_live / 2**20, 1),
                           "processes": run.processes, "load_before": round(load, 2)}
    if isinstance(tool, Deskdex):
        s = json.loads(run.stdout)
        out["converted"], out["unchanged"], out["reused"] = s["indexed"] + s["members"], s["unchanged"], s["reused"]
    else:
        st = tool.status()
        out["files_done"], out["docs_done"] = int(st.get("filesdone", 0)), int(st.get("docsdone", 0))
    if label == "first":
        out.update(tool.summary(run))
    print(f"  {tool.name:8} {label:7} {run.wall:7.1f} s wall {run.cpu:7.1f} s CPU "
          f"{out['peak_pss_mib']:7.0f} MiB PSS {out['peak_rss_mib']:7.0f} MiB RSS", flush=True)
    return out


# -- the trees ----------------------------------------------------------------------------------
def copy_into(tree_dir: Path, sources: list[tuple[Path, str]]) -> None:
    for src, rel in sources:
        dst = tree_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def stratified(rows: list[tuple[str, str]], n: int, rnd: random.Random) -> list[str]:
    """``n`` paths, each format's share as in ``rows`` (largest remainder; every format once at least)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for path, fmt in rows:
        groups[fmt].append(path)
    quota = {f: max(1, n * len(g) // len(rows)) for f, g in groups.items()}
    by_remainder = sorted(groups, key=lambda f: -(n * len(groups[f]) % len(rows)))
    i = 0
    while sum(quota.values()) < n and i < 10 * len(by_remainder):
        f = by_remainder[i % len(by_remainder)]
        if quota[f] < len(groups[f]):
            quota[f] += 1
        i += 1
    while sum(quota.values()) > n:
        quota[max(quota, key=quota.__getitem__)] -= 1
    return sorted(p for f in sorted(groups) for p in rnd.sample(sorted(groups[f]), min(quota[f], len(groups[f]))))


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if len(p.strip()) >= 40]


def build_small(tree_dir: Path, corpus: Path, manifest: dict[str, str], n: int, rnd: random.Random) -> None:
    """The corpus's small text and HTML files, then paragraphs of its longer text files, a few
    consecutive ones a file (a third of them as HTML pages). Each paragraph is written once, and
    never from a file copied whole, so no two files are copies of each other."""
    sizes = {rel: (corpus / rel).stat().st_size for rel in manifest if (corpus / rel).is_file()}
    small = sorted(r for r, s in sizes.items() if s <= SMALL and manifest[r] in TEXT_FORMATS | {"html"})
    rnd.shuffle(small)
    # Flat names: deskdex leaves out build/, cache/, hidden files... (Excluder), Recoll does not.
    copy_into(tree_dir, [(corpus / r, f"real/{i // 100:03d}/{i:05d}-{Path(r).name}")
                         for i, r in enumerate(small[:n])])
    sources = sorted(r for r, s in sizes.items() if s > SMALL and manifest[r] in TEXT_FORMATS)
    rnd.shuffle(sources)
    i = len(small[:n])
    for rel in sources:
        paras = paragraphs((corpus / rel).read_text(errors="replace"))
        while paras and i < n:
            k = rnd.randint(1, 6)
            chunk, paras = paras[:k], paras[k:]
            sub = tree_dir / "notes" / f"{i // 100:03d}"
            sub.mkdir(parents=True, exist_ok=True)
            if i % 3 == 0:
                body = "".join(f"<p>{html.escape(p)}</p>\n" for p in chunk)
                title = html.escape(chunk[0].splitlines()[0][:80])
                (sub / f"page{i:05d}.html").write_text(
                    f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>\n{body}</body></html>\n")
            else:
                (sub / f"note{i:05d}.txt").write_text("\n\n".join(chunk) + "\n")
            i += 1
        if i >= n:
            return
    raise SystemExit(f"only {i} small files from {corpus}; fewer than {n}")


def build(case: str, tree_dir: Path, corpus: Path, manifest: dict[str, str], limit: int | None) -> None:
    rnd = random.Random(SEED)
    n = CASES[case] if limit is None else min(limit, CASES[case] or limit)
    tree_dir.mkdir(parents=True)
    if case == "corpus" and limit is None:
        # A copy, not the corpus itself: the third run moves the tree away and copies it back.
        # (Not hard links either: a new link changes the corpus files' ctime under others' daemons.)
        subprocess.run(["cp", "-a", f"{corpus}/.", str(tree_dir)], check=True)
    elif case in ("corpus", "slice1000"):
        rows = [(r, f) for r, f in manifest.items() if (corpus / r).is_file()]
        copy_into(tree_dir, [(corpus / r, r) for r in stratified(rows, n, rnd)])
    elif case == "small10k":
        build_small(tree_dir, corpus, manifest, n, rnd)
    else:
        import daemon_scale

        daemon_scale.generate(tree_dir, n, daemon_scale.words())


def copy_back(tree_dir: Path) -> None:
    """The same bytes and mtimes under the same paths, as a restore from a backup leaves them."""
    away = tree_dir.with_name(tree_dir.name + ".away")
    tree_dir.rename(away)
    subprocess.run(["cp", "-a", str(away), str(tree_dir)], check=True)
    shutil.rmtree(away)


def warm(tree_dir: Path) -> None:
    """Every file read once: both tools start from the same page cache."""
    for p in tree_dir.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(1 << 20):
                    pass


def tools_for(case_dir: Path, tree_dir: Path) -> list[Deskdex | Recoll]:
    deskdex = Deskdex(str(case_dir / "deskdex-home"), str(tree_dir))
    return [deskdex, Recoll(str(case_dir / "recoll-conf"), str(tree_dir))]


def run_case(case: str, work: Path, corpus: Path, manifest: dict[str, str], limit: int | None) -> dict[str, Any]:
    case_dir = work / case
    tree_dir = case_dir / "tree"
    print(f"{case}: building the tree ...", flush=True)
    build(case, tree_dir, corpus, manifest, limit)
    files = [p for p in tree_dir.rglob("*") if p.is_file()]
    r: dict[str, Any] = {"files": len(files), "bytes": sum(p.stat().st_size for p in files),
                         "left_out_by_deskdex_exclusions": len(files) - sum(1 for _ in walk(str(tree_dir), Excluder()))}
    if case == "small10k":  # how many are real files, how many written from paragraphs
        r["made_of"] = {d: sum(1 for p in files if p.relative_to(tree_dir).parts[0] == d) for d in ("real", "notes")}
    print(f"{case}: {r['files']} files, {r['bytes'] / 1e6:.1f} MB", flush=True)
    tools = tools_for(case_dir, tree_dir)
    warm(tree_dir)
    for label in ("first", "second", "copied"):
        if label == "copied":
            copy_back(tree_dir)
            warm(tree_dir)
        for t in tools:
            r.setdefault(t.name, {})[label] = index_once(t, label)
    return r


# -- the report ---------------------------------------------------------------------------------
ROWS = [("first", "wall_s", "full index, wall (s)"), ("first", "cpu_s", "full index, CPU of the tree (s)"),
        ("first", "peak_pss_mib", "full index, peak PSS of the tree (MiB)"),
        ("first", "peak_rss_mib", "full index, peak RSS of the tree (MiB)"),
        ("first", "documents", "documents indexed (members included)"), ("first", "failed", "files failed"),
        ("second", "wall_s", "second run, nothing changed, wall (s)"), ("second", "cpu_s", "second run, CPU (s)"),
        ("copied", "wall_s", "copied-back tree, wall (s)"), ("copied", "cpu_s", "copied-back tree, CPU (s)"),
        ("copied", "peak_pss_mib", "copied-back tree, peak PSS (MiB)")]


def table(case: str, r: dict[str, Any]) -> str:
    lines = [f"### {case}: {r['files']} files, {r['bytes'] / 1e6:.1f} MB", "",
             "| measure | deskdex | Recoll | deskdex/Recoll |", "|---|---:|---:|---:|"]
    for run, key, label in ROWS:
        d, rc = r["deskdex"][run].get(key), r["recoll"][run].get(key)
        ratio = f"{d / rc:.2f}" if isinstance(d, (int, float)) and rc else ""
        lines.append(f"| {label} | {d} | {rc} | {ratio} |")
    c = r["deskdex"]["copied"]
    lines += ["", f"deskdex on the copied-back tree: {c['converted']} documents converted again, "
                  f"{c['unchanged']} unchanged, {c['reused']} reused; Recoll: {r['recoll']['copied']['docs_done']} "
                  f"documents done. deskdex's exclusions leave out {r['left_out_by_deskdex_exclusions']} files "
                  "Recoll indexes. Load average (1 min) before each run is in the JSON."]
    return "\n".join(lines) + "\n"


def profile(cases: list[str], work: Path, corpus: Path, manifest: dict[str, str], limit: int | None,
            out: Path) -> None:
    text = []
    for case in cases:
        case_dir = work / case
        build(case, case_dir / "tree", corpus, manifest, limit)
        warm(case_dir / "tree")
        deskdex = tools_for(case_dir, case_dir / "tree")[0]
        raw = str(case_dir / "py-spy.raw")
        print(f"{case}: deskdex index under py-spy ...", flush=True)
        t0 = time.perf_counter()
        index_profile.record(deskdex.index_cmd(), raw, deskdex.env)
        title = f"{case}: deskdex index, {time.perf_counter() - t0:.0f} s wall under py-spy"
        text.append(index_profile.report(title, index_profile.summarise(raw)))
    out.write_text(f"# py-spy record --subprocesses --format raw, {time.strftime('%Y-%m-%d %H:%M')}, "
                   f"{platform.machine()}, {os.cpu_count()} cores shared with other work\n"
                   f"# python benchmarks/index_cases.py {' '.join(sys.argv[1:])}\n\n" + "\n".join(text))
    print(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="corpus,slice1000,small10k", help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--big", action="store_true", help="add small100k (100,000 generated files)")
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--limit", type=int, help="at most N files a case (a quick check; nothing written)")
    ap.add_argument("--keep", action="store_true", help="keep the trees and indexes (printed at the end)")
    ap.add_argument("--profile", metavar="OUT.txt", help="profile deskdex alone with py-spy instead")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "index_cases.json"))
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c] + (["small100k"] if args.big else [])
    if unknown := set(cases) - set(CASES):
        ap.error(f"unknown cases: {', '.join(sorted(unknown))}")
    corpus = Path(args.corpus).resolve()
    ensure_prerequisites(corpus)
    manifest = load_manifest(corpus)
    work = Path(tempfile.mkdtemp(prefix="deskdex-index-cases-"))
    try:
        if args.profile:
            profile(cases, work, corpus, manifest, args.limit, Path(args.profile))
            return
        results = {c: run_case(c, work, corpus, manifest, args.limit) for c in cases}
        for c, r in results.items():
            print("\n" + table(c, r))
        if args.limit is None:
            path = Path(args.out)
            old = json.loads(path.read_text()) if path.exists() else {}
            meta = {"when": time.strftime("%Y-%m-%d %H:%M"), "command": "python benchmarks/index_cases.py "
                    + " ".join(sys.argv[1:]), "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                    f"Python {platform.python_version()}", "recoll_version": subprocess.run(
                        ["dpkg-query", "-W", "-f=${Version}", "recollcmd"], capture_output=True, text=True).stdout}
            cases_out = {**old.get("cases", {}), **{c: {**meta, **r} for c, r in results.items()}}
            path.write_text(json.dumps({"cases": cases_out}, indent=1) + "\n")
            print("wrote", path)
    finally:
        if args.keep:
            print("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
