"""The measurements of compare_recoll.py, one function each: search timing, search quality,
freshness through the live daemons, idle CPU, and interference with a CPU-bound program."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
import random
import string
from typing import Any

from recoll_proc import tree_cpu

# (kind, deskdex query, Recoll query): the same question in each query language
SEARCHES: list[tuple[str, str, str]] = [
    ("rare word", "anacron", "anacron"), ("rare word", "bisect", "bisect"), ("rare word", "netfilter", "netfilter"),
    ("rare word", "booktabs", "booktabs"), ("rare word", "futex", "futex"),
    ("common word", "package", "package"), ("common word", "system", "system"), ("common word", "data", "data"),
    ("common word", "example", "example"),
    ("phrase", '"regular expression"', '"regular expression"'), ("phrase", '"event loop"', '"event loop"'),
    ("phrase", '"package maintainer"', '"package maintainer"'), ("phrase", '"file system"', '"file system"'),
    ("two words", "socket timeout", "socket timeout"), ("two words", "unicode encoding", "unicode encoding"),
    ("two words", "latex table", "latex table"), ("two words", "mail header", "mail header"),
    ("filter", "font ext:pdf", "font ext:pdf"), ("filter", "apt ext:html", "apt ext:html"),
    ("filter", "rebase in:{corpus}/debsrc/git", "rebase dir:{corpus}/debsrc/git"),
]


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[18] if len(xs) > 1 else xs[0]


def search_times(tools: list[Any], corpus: str, reps: int, mode: str = "paths") -> dict[str, Any]:
    """Wall time of each command-line search, the tools alternating query by query. ``mode``
    "paths" prints only where each hit is; "snippets" a listing with a passage of each hit."""
    times: dict[str, list[float]] = {t.name: [] for t in tools}
    per_kind: dict[str, dict[str, list[float]]] = {t.name: {} for t in tools}
    hits: dict[str, dict[str, int]] = {t.name: {} for t in tools}
    for t in tools:  # once unmeasured: what a person's second search finds (page cache, bytecode)
        subprocess.run(t.search_cmd("warm", mode=mode), capture_output=True, env=t.env)
    for _ in range(reps):
        for kind, dq, rq in SEARCHES:
            for t in tools:
                q = (dq if t.name == "deskdex" else rq).format(corpus=corpus)
                t0 = time.perf_counter()
                out = subprocess.run(t.search_cmd(q, mode=mode), capture_output=True, text=True, env=t.env)
                dt = time.perf_counter() - t0
                times[t.name].append(dt)
                per_kind[t.name].setdefault(kind, []).append(dt)
                if mode == "paths":
                    hits[t.name][q] = len(t.paths_shown(out.stdout))
    return {t.name: {"median": statistics.median(times[t.name]), "p95": p95(times[t.name]), "mode": mode,
                     "by_kind_median": {k: statistics.median(v) for k, v in per_kind[t.name].items()},
                     **({"results_shown": hits[t.name]} if mode == "paths" else {})} for t in tools}


def quality(tools: list[Any], corpus: str, queries: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in tools:
        precisions, rranks, rows = [], [], []
        for q in queries:
            relevant = {os.path.join(corpus, r) for r in q["relevant"]}
            got = t.search(q["query"], 10, every=True) if t.name == "deskdex" else t.search(q["query"], 10)
            good = [p in relevant for p in got]
            precisions.append(sum(good) / 10)
            rank = next((i + 1 for i, g in enumerate(good) if g), None)
            rranks.append(1 / rank if rank else 0.0)
            rows.append({"query": q["query"], "p10": sum(good) / 10, "first_relevant": rank})
        out[t.name] = {"p_at_10": statistics.mean(precisions), "mrr": statistics.mean(rranks), "queries": rows}
    return out


def start_daemon(tool: Any, logdir: str) -> tuple[subprocess.Popen, str]:
    cmd, how = tool.daemon_cmd()
    log = open(os.path.join(logdir, f"{tool.name}-daemon.log"), "w")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**getattr(tool, "env", os.environ), "PYTHONPATH": root}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env)
    return proc, how


def wait_idle(tool: Any, timeout: float = 300.0) -> None:
    """Until deskdex's daemon has caught up with the folder (its status says idle)."""
    import json

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(tool.status_cmd(), capture_output=True, text=True, env=tool.env)
        if out.returncode == 0 and json.loads(out.stdout).get("state") == "idle":
            return
        time.sleep(0.5)
    raise RuntimeError(f"{tool.name}: the daemon did not become idle within {timeout} s")


def stop_daemon(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def freshness(tools: list[Any], target: str, trials: int, timeout: float) -> dict[str, Any]:
    """Append a new word to ``target``; poll each tool's command-line search until it finds the word.
    The daemons run side by side, so one write is timed for both; polls alternate between the tools."""
    lat: dict[str, list[float]] = {t.name: [] for t in tools}
    missed: dict[str, int] = {t.name: 0 for t in tools}
    for i in range(trials + 1):  # trial 0 warms up (start-up scans, first commit) and is not counted
        word = "zqfresh" + "".join(random.choices(string.ascii_lowercase, k=10))
        with open(target, "a") as f:
            f.write(f"\nfreshness probe {word}\n")
        t0 = time.monotonic()
        pending = {t.name: t for t in tools}
        while pending and time.monotonic() - t0 < (timeout * 3 if i == 0 else timeout):
            for name, t in list(pending.items()):
                if t.search(word, 1):
                    if i:
                        lat[name].append(time.monotonic() - t0)
                    del pending[name]
            time.sleep(0.05)
        for name in pending:
            if i:
                missed[name] += 1
        print(f"  freshness trial {i}: " + ", ".join(f"{n} {v[-1]:.1f} s" for n, v in lat.items() if v), flush=True)
        time.sleep(1.0)
    return {n: {"median": statistics.median(v) if v else None, "p95": p95(v) if v else None, "trials": len(v),
                "missed": missed[n], "all": [round(x, 2) for x in v]} for n, v in lat.items()}


def idle_cpu(procs: dict[str, subprocess.Popen], seconds: float) -> dict[str, float]:
    c0 = {n: tree_cpu(p.pid) for n, p in procs.items()}
    time.sleep(seconds)
    return {n: round(tree_cpu(p.pid) - c0[n], 3) for n, p in procs.items()}


LOOP = ("import sys,time\nend=time.monotonic()+float(sys.argv[1]);n=0;t=time.monotonic();mark=t\n"
        "while True:\n n+=1\n if n%20000==0:\n  t=time.monotonic()\n  if t-mark>=0.25:\n"
        "   print(f'{t:.3f} {n}',flush=True);mark=t\n  if t>end: break\n")


def _rate(samples: list[tuple[float, int]], start: float, end: float) -> float:
    inside = [(t, n) for t, n in samples if start <= t <= end]
    if len(inside) < 2:
        return 0.0
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def interference(cmd: list[str], baseline_seconds: float, max_seconds: float,
                 env: dict[str, str] | None = None) -> dict[str, float]:
    """Iterations/s of a one-thread CPU loop alone, then while ``cmd`` (a full index) runs."""
    alone = subprocess.run([sys.executable, "-c", LOOP, str(baseline_seconds)], capture_output=True, text=True)
    base = [(float(a), int(b)) for a, b in (line.split() for line in alone.stdout.splitlines())]
    base_rate = _rate(base, base[0][0], base[-1][0])
    loop = subprocess.Popen([sys.executable, "-c", LOOP, str(max_seconds)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    t0 = time.monotonic()
    idx = subprocess.run(cmd, capture_output=True, text=True, env=env)
    t1 = time.monotonic()
    loop.terminate()
    out, _ = loop.communicate()
    samples = [(float(a), int(b)) for a, b in (line.split() for line in out.splitlines())]
    busy = _rate(samples, t0, t1)
    return {"alone_per_s": round(base_rate), "beside_per_s": round(busy), "kept": round(busy / base_rate, 3),
            "index_seconds": round(t1 - t0, 1), "index_rc": idx.returncode}
