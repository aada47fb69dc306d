"""Wall time of `deskdex search QUERY` (the installed console script, snippets on, default limit)
through a running daemon and without one, and of `recollq -A` (abstracts: Recoll's snippets) on
the same queries in the same run.

    python benchmarks/search_latency.py [--home DIR | --corpus /tmp/corpora/mixed] \
        [--recoll-conf DIR] [--variant NAME[=PYTHONPATH]]... [--runs 3]

--home: a home indexed already (`deskdex --home DIR index CORPUS`); without it the corpus is
indexed into a throwaway home first (10 minutes and more). --recoll-conf: Recoll's config folder;
indexed with recollindex first when it holds no index; leave it out to time deskdex alone.
--variant: another deskdex tree to time side by side (a copy of the package tree put first on
PYTHONPATH, e.g. `before=/tmp/base-pkg`; the default is the installed one, `after`): each gets
its own copy of the home so that their daemons run at once and every query is timed for every
tool back to back, which keeps a busy machine's swings out of the comparison.
Queries: benchmarks/search_queries.json (their kinds are in its note). Results on stdout and in
benchmarks/results/search_latency.json: median, 95th percentile and mean per tool and mode, and
medians per kind of query.
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DESKDEX = str(Path(sys.executable).with_name("deskdex"))
# deskdex's `type:` groups as Recoll says them (its `rclcat:` categories, or MIME types).
RECOLL_TYPES = {"pdf": "mime:application/pdf", "mail": "rclcat:message", "slides": "rclcat:presentation",
                "sheet": "rclcat:spreadsheet", "web": "mime:text/html", "text": "mime:text/plain",
                "doc": "rclcat:wordprocessing"}


def recoll_query(query: str) -> str:
    """The query in Recoll's language: `type:` as its categories, `word~` without the tilde (Recoll
    has no fuzzy words in its query language), the rest as it is (words ANDed, phrases, `ext:`,
    `word*` are the same)."""
    out = []
    for word in query.split(" "):
        if word.startswith("type:"):
            word = RECOLL_TYPES[word[5:]]
        elif word.endswith("~"):
            word = word[:-1]
        out.append(word)
    return " ".join(out)


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(xs: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(xs) * 1000, 1), "p95_ms": round(percentile(xs, 95) * 1000, 1),
            "mean_ms": round(statistics.fmean(xs) * 1000, 1), "max_ms": round(max(xs) * 1000, 1), "n": len(xs)}


class Variant:
    """One deskdex tree with its own home (its daemon, when up)."""

    def __init__(self, name: str, pythonpath: str, home: str, corpus: str, config: str = "") -> None:
        self.name, self.home = name, home
        # The daemon watches the corpus, as a user's watches the folders indexed (with no folder
        # set it would walk the home folder). The rest of the indexed home's config is kept: a
        # daemon started with other settings (`[ocr] enabled = false` dropped) would convert
        # files again while it is timed.
        Path(home, "config").mkdir(parents=True, exist_ok=True)
        Path(home, "config", "config.toml").write_text(_with_folders(config, corpus))
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "DESKDEX_HOME")}
        if pythonpath:
            self.env["PYTHONPATH"] = pythonpath
        self.daemon: subprocess.Popen[bytes] | None = None

    def search_cmd(self, query: str) -> list[str]:
        # As typed: `--` only before a query that starts with `-`.
        return [DESKDEX, "--home", self.home, "search", *(["--"] if query.startswith("-") else []), query]

    def start(self) -> None:
        self.daemon = subprocess.Popen([DESKDEX, "--home", self.home, "daemon"], env=self.env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from deskdex.clients.client import call
        from deskdex.errors import DaemonUnavailable

        path = _socket_of(self.home)
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:  # until it answers, and has looked at the corpus again
            if self.daemon.poll() is not None:
                raise RuntimeError(f"the daemon of {self.name} ended with {self.daemon.returncode}")
            try:
                if call(path, "status")["state"] == "idle":
                    return
            except DaemonUnavailable:
                pass
            time.sleep(1)
        raise RuntimeError(f"the daemon of {self.name} was not idle within 30 minutes")

    def stop(self) -> None:
        if self.daemon is None:
            return
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        self.daemon = None


def _with_folders(config: str, corpus: str) -> str:
    """``config`` (a config.toml's text) with ``folders`` set to the corpus alone."""
    lines = config.splitlines()
    top = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")), len(lines))
    kept = [line for line in lines[:top] if not line.replace(" ", "").startswith("folders=")]
    return "\n".join([f"folders = [{json.dumps(corpus)}]", *kept, *lines[top:]]) + "\n"


def _socket_of(home: str) -> str:
    from deskdex.paths import Home

    return Home.resolve(home).socket


def run(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    took = time.perf_counter() - t
    if done.returncode:
        raise RuntimeError(f"{cmd} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return took


def timings(tools: list[tuple[str, object]], queries: list[dict[str, str]], runs: int,
            seed: int) -> dict[str, list[tuple[str, float]]]:
    """(query, seconds) per tool: every query once untimed (warm), then ``runs`` rounds, each in
    another order, every tool on a query one after the other."""
    out: dict[str, list[tuple[str, float]]] = {name: [] for name, _ in tools}
    rnd = random.Random(seed)
    for round_ in range(runs + 1):
        order = list(queries)
        rnd.shuffle(order)
        for q in order:
            for name, (cmd, env) in ((n, t) for n, t in tools):  # type: ignore[misc]
                took = run(cmd(q["query"]), env)
                if round_:
                    out[name].append((q["query"], took))
        print(f"  round {round_}/{runs} done", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", help="a home with the corpus indexed already")
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--recoll-conf", help="Recoll's config folder (indexed first when empty)")
    ap.add_argument("--variant", action="append", default=[], help="NAME[=PYTHONPATH] (default: after)")
    ap.add_argument("--queries", default=str(HERE / "search_queries.json"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--out", default=str(HERE / "results" / "search_latency.json"))
    args = ap.parse_args()
    queries = json.loads(Path(args.queries).read_text())["queries"]
    work = tempfile.mkdtemp(prefix="deskdex-latency-")
    home = args.home
    if home is None:
        home = os.path.join(work, "home")
        print(f"indexing {args.corpus} into {home} ...", flush=True)
        subprocess.run([DESKDEX, "--home", home, "index", args.corpus, "--no-progress"], check=True,
                       stdout=subprocess.DEVNULL)
    config_file = Path(home, "config", "config.toml")
    config = config_file.read_text() if config_file.is_file() else ""
    specs = [v.split("=", 1) if "=" in v else [v, ""] for v in args.variant] or [["after", ""]]
    variants = []
    for name, pythonpath in specs:
        vhome = home
        if len(specs) > 1:  # one daemon per home: each variant searches its own copy
            vhome = os.path.join(work, "home-" + name)
            shutil.copytree(os.path.join(home, "data"), os.path.join(vhome, "data"),
                            ignore=shutil.ignore_patterns("*.lock"))
        variants.append(Variant(name, pythonpath, vhome, args.corpus, config))
    recoll_env = {**os.environ, "PATH": "/usr/bin:/bin:" + os.environ.get("PATH", "")}
    if args.recoll_conf and not Path(args.recoll_conf, "xapiandb").is_dir():
        sys.path.insert(0, str(HERE))
        from recoll_tools import Recoll

        print(f"indexing {args.corpus} with Recoll into {args.recoll_conf} ...", flush=True)
        Recoll(args.recoll_conf, args.corpus).index()

    def recoll_cmd(q: str) -> list[str]:
        return ["recollq", "-c", args.recoll_conf, "-n", "0-10", "-A", recoll_query(q)]

    recoll = [("recollq", (recoll_cmd, recoll_env))] if args.recoll_conf else []
    load = {"before": os.getloadavg()}
    results: dict[str, object] = {}
    try:
        for v in variants:
            v.start()
        print("through the daemon ...", flush=True)
        daemon = timings([(f"deskdex {v.name}", (v.search_cmd, v.env)) for v in variants] + recoll,
                         queries, args.runs, args.seed)
    finally:
        for v in variants:
            v.stop()
    print("without a daemon ...", flush=True)
    alone = timings([(f"deskdex {v.name}", (v.search_cmd, v.env)) for v in variants] + recoll,
                    queries, args.runs, args.seed + 1)
    load["after"] = os.getloadavg()

    kinds = {q["query"]: q["kind"] for q in queries}
    table = {}
    for mode, data in (("daemon", daemon), ("no daemon", alone)):
        for tool, pairs in data.items():
            if tool == "recollq" and mode == "no daemon":
                tool_key = "recollq (again)"
            else:
                tool_key = tool if tool == "recollq" else f"{tool}, {mode}"
            xs = [t for _, t in pairs]
            by_kind = {k: round(statistics.median([t for q, t in pairs if kinds[q] == k]) * 1000, 1)
                       for k in dict.fromkeys(kinds.values())}
            table[tool_key] = {**summary(xs), "median_ms_by_kind": by_kind,
                               "median_ms_by_query": {q: round(statistics.median([t for qq, t in pairs if qq == q]) * 1000, 1)
                                                      for q in kinds}}
    if args.recoll_conf:
        rec = table["recollq"]["median_ms"]
        for key, row in table.items():
            if key.startswith("deskdex"):
                row["ratio_to_recollq_median"] = round(row["median_ms"] / rec, 1)
    print(f"\n{len(queries)} queries x {args.runs} runs; load average {load['before'][0]:.1f} before, "
          f"{load['after'][0]:.1f} after, {os.cpu_count()} CPUs")
    print(f"{'':34} {'median':>8} {'p95':>8} {'mean':>8} {'max':>8}  (ms)")
    for key, row in table.items():
        ratio = f"  x{row['ratio_to_recollq_median']} recollq" if "ratio_to_recollq_median" in row else ""
        print(f"{key:34} {row['median_ms']:8.1f} {row['p95_ms']:8.1f} {row['mean_ms']:8.1f} {row['max_ms']:8.1f}{ratio}")
    print("\nmedian by kind (ms):")
    for key, row in table.items():
        print(f"  {key:32} " + ", ".join(f"{k} {v}" for k, v in row["median_ms_by_kind"].items()))
    results = {"queries": len(queries), "runs": args.runs, "cpus": os.cpu_count(), "load_average": load,
               "variants": {v.name: (dict(specs)[v.name] or "installed") for v in variants},
               "command": "deskdex --home HOME search QUERY (snippets on, default limit 10)",
               "recoll_command": "recollq -c CONF -n 0-10 -A QUERY" if args.recoll_conf else None,
               "results": table}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
