"""Conversion through the broker: files per second with 1 and 2 `deskdex worker` processes, against
the same files converted on one machine (issue 19).

    .venv/bin/python benchmarks/cluster_convert.py [--case slice1000|notes2000] [--rounds 2]

A real redis-server on 127.0.0.1 (a free port, no files), real `deskdex worker` processes (one file at a
time each: `--concurrency 1`), `deskdex index --broker` on a fresh home for each run; then `deskdex index
--workers N` without a broker, same tree, same N. Runs alternate (local 1, broker 1, local 2, broker 2, ...)
so that the host's drift hits both. This machine has 2 cores, shared by the coordinator (checksums,
catalog, index), the workers and Redis: the scaling ratio here is a floor of what separate machines give.
Writes benchmarks/results/cluster_convert.json."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
DESKDEX = str(Path(sys.executable).parent / "deskdex")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def start_worker(work: Path, name: str, broker: str, extra: list[str] | None = None) -> subprocess.Popen[bytes]:
    home = work / f"worker-{name}"
    home.mkdir(exist_ok=True)
    log = open(work / f"{name}.log", "w")
    proc = subprocess.Popen([DESKDEX, "--home", str(home), "worker", "--broker", broker, "--concurrency", "1",
                             "--name", name, *(extra or [])], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while " ready." not in (work / f"{name}.log").read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker {name} did not start:\n{(work / f'{name}.log').read_text()}")
        time.sleep(0.1)
    return proc


class Cluster:
    """A redis-server of the benchmark's own and the `deskdex worker` processes on it, all stopped on exit."""

    def __init__(self, work: Path, extra: list[str] | None = None) -> None:
        self.work, self.extra = work, extra or []
        self.redis, self.broker = start_redis(work)
        self.workers: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> "Cluster":
        return self

    def scale(self, n: int) -> None:
        """Exactly ``n`` workers running."""
        while len(self.workers) < n:
            self.workers.append(start_worker(self.work, f"w{len(self.workers) + 1}", self.broker, self.extra))
        while len(self.workers) > n:
            w = self.workers.pop()
            w.send_signal(signal.SIGTERM)
            w.wait(60)

    def __exit__(self, *exc: object) -> None:
        self.scale(0)
        self.redis.terminate()
        self.redis.wait(10)


def index(tree: Path, home: Path, extra: list[str]) -> dict[str, Any]:
    shutil.rmtree(home, ignore_errors=True)
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(f"folders = [{json.dumps(str(tree))}]\n")
    start = time.perf_counter()
    out = subprocess.run([DESKDEX, "--home", str(home), "index", str(tree), "--json", "--no-progress", *extra],
                         capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - start
    summary = json.loads(out)
    return {"wall_s": round(wall, 2), "files": summary["indexed"] + summary["reused"] + summary["failed"],
            "failed": summary["failed"]}


def build_tree(case: str, tree: Path, corpus: Path) -> None:
    import index_cases

    if case == "notes2000":
        import daemon_scale

        tree.mkdir(parents=True)
        daemon_scale.generate(tree, 2000, daemon_scale.words())
        return
    index_cases.build(case, tree, corpus, index_cases.load_manifest(corpus), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="slice1000", choices=("slice1000", "notes2000"))
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cluster_convert.json"))
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Path(tempfile.mkdtemp(prefix="deskdex-cluster-"))
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        with Cluster(work) as cluster:
            tree = work / "tree"
            build_tree(args.case, tree, Path(args.corpus))
            subprocess.run(["cat"] + [str(p) for p in tree.rglob("*") if p.is_file()], stdout=subprocess.DEVNULL)
            for r in range(args.rounds):
                for n in (1, 2):
                    runs.setdefault(f"local {n}", []).append(index(tree, work / "home", ["--workers", str(n)]))
                    cluster.scale(n)
                    runs.setdefault(f"broker {n}", []).append(index(tree, work / "home", ["--broker", cluster.broker]))
                    print(f"round {r + 1}, {n} worker(s): local {runs[f'local {n}'][-1]['wall_s']} s, "
                          f"broker {runs[f'broker {n}'][-1]['wall_s']} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {k: min(v, key=lambda x: x["wall_s"]) for k, v in runs.items()}
    rate = {k: round(v["files"] / v["wall_s"], 1) for k, v in best.items()}
    result = {"when": time.strftime("%Y-%m-%d %H:%M"), "case": args.case, "files": best["local 1"]["files"],
              "runs": runs, "files_per_s": rate,
              "scaling_broker_2_over_1": round(rate["broker 2"] / rate["broker 1"], 2),
              "scaling_local_2_over_1": round(rate["local 2"] / rate["local 1"], 2),
              "broker_over_local": {n: round(rate[f"broker {n}"] / rate[f"local {n}"], 2) for n in (1, 2)}}
    print(f"\n{args.case}: {result['files']} files, best of {args.rounds}")
    print("| run | files/s |\n|---|---:|")
    for k in ("local 1", "broker 1", "local 2", "broker 2"):
        print(f"| {k} | {rate[k]} |")
    print(f"scaling 2/1 workers: broker {result['scaling_broker_2_over_1']}, local {result['scaling_local_2_over_1']}")
    path = Path(args.out)
    old = json.loads(path.read_text()) if path.exists() else {}
    old[args.case] = result
    path.write_text(json.dumps(old, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
