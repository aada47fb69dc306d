"""The whole daemon at scale, as a user runs it: index N files, then measure what users feel.

    .venv/bin/python benchmarks/daemon_scale.py [--files 100000] [--idle 60] [--changes 20] [--queries 20]

1. Generates N text files (words drawn from the corpus, or a built-in list) in a temp folder.
2. Starts `deskdex daemon` on it and waits for the first full index: wall time, files/s, and the
   peak memory (RSS summed over the daemon and its converter processes, sampled every 0.2 s).
3. Search: wall time of `deskdex search` commands (a new process each, as from a shell, talking
   to the daemon), median and 95th percentile over several kinds of query.
4. Freshness: for each of create, modify, rename and delete, the time from the file operation
   until a search reflects it (median, p95).
5. Idle: the daemon's CPU seconds (with its children) over a quiet period, from /proc.
Prints the figures and writes them to benchmarks/results/daemon_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deskdex.clients.client import call  # noqa: E402 (after the checkout is put on the path)
from deskdex.errors import DaemonUnavailable  # noqa: E402
from recoll_proc import TICK, tree as tree_pids, tree_cpu  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except OSError:
            pass
    return total


def words() -> list[str]:
    """A real vocabulary: the words of the Python tutorial and library docs in the corpus, or the
    system dictionary. (A small vocabulary makes every file a near-duplicate of every other.)"""
    import re

    texts = []
    corpus = Path("/tmp/corpora/mixed/deb/python3.11-doc/html")
    for p in sorted(corpus.rglob("*.html"))[:400]:
        texts.append(re.sub(r"<[^>]+>", " ", p.read_text(errors="ignore")))
    for dict_file in ("/usr/share/dict/words",):
        if not texts and os.path.exists(dict_file):
            texts.append(Path(dict_file).read_text(errors="ignore"))
    ws = sorted({w.lower() for w in " ".join(texts).split() if w.isalpha() and 3 <= len(w) <= 14})
    if len(ws) < 5000:
        raise SystemExit("no vocabulary: build the corpus (../shared/corpus/build.sh) first")
    return ws


def zipf_choice(rnd: random.Random, vocab: list[str], k: int) -> list[str]:
    """k words drawn with Zipf-like frequencies, as in real text (a few common, most rare)."""
    n = len(vocab)
    return [vocab[min(n - 1, int(n ** rnd.random()) - 1)] for _ in range(k)]


def generate(folder: Path, n: int, vocab: list[str]) -> None:
    rnd = random.Random(7)
    for i in range(n):
        sub = folder / f"d{i // 1000:03d}" / f"e{(i // 50) % 20:02d}"
        if i % 50 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        body = " ".join(zipf_choice(rnd, vocab, rnd.randint(80, 400)))
        (sub / f"note{i}.txt").write_text(f"Note {i}\n\n{body} uniq{i}x\n")


def wait_status(sock: str, cond, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            st = call(sock, "status", timeout=30)
            if cond(st):
                return st
        except DaemonUnavailable:
            pass
        time.sleep(0.2)
    raise SystemExit("timed out waiting for the daemon")


def search_paths(sock: str, q: str) -> list[str]:
    return [h["path"] for h in call(sock, "search", query=q, limit=5, timeout=30)["hits"]]


def until(sock: str, q: str, pred, timeout: float = 30.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred(search_paths(sock, q)):
            return time.monotonic() - t0
        time.sleep(0.02)
    return float("inf")


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="deskdex-scale-"))
    docs, home = base / "docs", base / "home"
    docs.mkdir()
    vocab = words()
    t0 = time.monotonic()
    generate(docs, args.files, vocab)
    gen_s = time.monotonic() - t0
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(f'folders = ["{docs}"]\nworkers = {args.workers}\n')
    env = dict(os.environ, DESKDEX_HOME=str(home))
    sock = str(home / "run" / "deskdex.sock")
    log = open(base / "daemon.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "deskdex", "daemon"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    peak = [0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], rss(tree_pids(proc.pid)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    t0 = time.monotonic()
    sampler.start()
    st = wait_status(sock, lambda s: s["state"] == "idle" and s["documents"] >= args.files, 7200)
    index_s = time.monotonic() - t0
    sampling.set()
    sampler.join()
    result: dict[str, object] = {"files": args.files, "workers": args.workers, "generate_seconds": round(gen_s, 1),
                                 "full_index_seconds": round(index_s, 1),
                                 "files_per_second": round(args.files / index_s, 1),
                                 "peak_rss_mb_during_index": round(peak[0] / 2**20, 1),
                                 "daemon_cpu_seconds_index": round(tree_cpu(proc.pid), 1),
                                 "index_bytes": st["index_bytes"], "store_bytes": st["store_bytes"]}
    print(json.dumps(result, indent=2), flush=True)

    # Search from the command line, a new process per query, as a user in a shell.
    rnd = random.Random(3)
    kinds = {
        "rare": [f"uniq{rnd.randrange(args.files)}x" for _ in range(5)],
        "common": [rnd.choice(vocab) for _ in range(5)],
        "two words": [f"{rnd.choice(vocab)} {rnd.choice(vocab)}" for _ in range(5)],
        "phrase": [f'"{rnd.choice(vocab)} {rnd.choice(vocab)}"' for _ in range(5)],
        "filter": [f"{rnd.choice(vocab)} ext:txt in:{docs}/d001" for _ in range(5)],
    }
    deskdex = str(Path(sys.executable).parent / "deskdex")
    times: dict[str, list[float]] = {}
    for kind, qs in kinds.items():
        for q in qs[: max(1, args.queries // len(kinds))]:
            for _ in range(3):
                t = time.perf_counter()
                subprocess.run([deskdex, "search", q, "--limit", "10"], env=env, capture_output=True, check=True)
                times.setdefault(kind, []).append(time.perf_counter() - t)
    every = [x for v in times.values() for x in v]
    result["search_cli_ms"] = {k: {"median": round(statistics.median(v) * 1000, 1), "p95": round(pct(v, 95) * 1000, 1)}
                               for k, v in times.items()}
    result["search_cli_median_ms"] = round(statistics.median(every) * 1000, 1)
    result["search_cli_p95_ms"] = round(pct(every, 95) * 1000, 1)
    print(json.dumps({k: result[k] for k in ("search_cli_ms", "search_cli_median_ms", "search_cli_p95_ms")}, indent=2),
          flush=True)

    # Freshness: from the file operation to the search that reflects it.
    fresh: dict[str, list[float]] = {"create": [], "modify": [], "rename": [], "delete": []}
    live = docs / "live"
    live.mkdir()
    time.sleep(1)
    for i in range(args.changes):
        p = live / f"f{i}.txt"
        p.write_text(f"created zcreat{i}q\n")
        fresh["create"].append(until(sock, f"zcreat{i}q", lambda ps, p=p: ps == [str(p)]))
        p.write_text(f"modified zmodif{i}q\n")
        fresh["modify"].append(until(sock, f"zmodif{i}q", lambda ps, p=p: ps == [str(p)]))
        q = live / f"g{i}.txt"
        os.rename(p, q)
        fresh["rename"].append(until(sock, f"zmodif{i}q", lambda ps, q=q: ps == [str(q)]))
        q.unlink()
        fresh["delete"].append(until(sock, f"zmodif{i}q", lambda ps: ps == []))
    result["freshness_seconds"] = {k: {"median": round(statistics.median(v), 3), "p95": round(pct(v, 95), 3)}
                                   for k, v in fresh.items()}
    allf = [x for v in fresh.values() for x in v]
    result["freshness_p95_seconds"] = round(pct(allf, 95), 3)
    print(json.dumps({"freshness_seconds": result["freshness_seconds"],
                      "freshness_p95_seconds": result["freshness_p95_seconds"]}, indent=2), flush=True)

    # Idle: after the worker processes are released, nothing should run.
    time.sleep(25)
    c0, w0 = tree_cpu(proc.pid), time.monotonic()
    time.sleep(args.idle)
    c1 = tree_cpu(proc.pid)
    result["idle_seconds"] = round(time.monotonic() - w0, 1)
    result["idle_cpu_seconds"] = round(c1 - c0, 3)
    result["idle_rss_mb"] = round(rss(tree_pids(proc.pid)) / 2**20, 1)
    result["cpu_tick_seconds"] = round(1 / TICK, 3)
    proc.send_signal(signal.SIGTERM)
    t = time.monotonic()
    proc.wait(60)
    result["sigterm_exit_seconds"] = round(time.monotonic() - t, 2)
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "daemon_scale.json").write_text(json.dumps(result, indent=2) + "\n")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
