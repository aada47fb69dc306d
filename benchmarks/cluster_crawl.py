"""Crawling through the broker: pages per second with 1 and 2 `deskdex worker` processes, against the
same crawl made on one machine (issue 19).

    .venv/bin/python benchmarks/cluster_crawl.py [--sites 4] [--pages 150] [--rounds 2]

Generated sites on 127.0.0.1 (tests/webcrawl_site.py, kind "big": pages of 300 words with 5 links
each, served by this process), a real redis-server, real `deskdex worker` processes (`--concurrency
1`: one request at a time each), `deskdex crawl` of every site into a fresh home, with the delay
between two requests to one site at 0 (the figure is the machinery, not the politeness). One
machine's crawl converts in one converter process beside its fetching; through workers, each worker
fetches and converts while the coordinator stores. Runs alternate (local, 1 worker, 2 workers) so
that the host's drift hits all. 2 cores here are shared by the sites, the coordinator, Redis and the
workers: the scaling ratio is a floor of what separate machines give.
Writes benchmarks/results/cluster_crawl.json."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from cluster_convert import DESKDEX, Cluster  # noqa: E402
from webcrawl_site import SiteServer  # noqa: E402


def crawl(urls: list[str], home: Path, extra: list[str]) -> dict[str, Any]:
    shutil.rmtree(home, ignore_errors=True)
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text("")
    start = time.perf_counter()
    out = subprocess.run([DESKDEX, "--home", str(home), "crawl", *urls, "--allow-private", "--delay", "0",
                          "--max-pages", "100000", "--json", *extra], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - start
    summary = json.loads(out)
    return {"wall_s": round(wall, 2), "fetched": summary["fetched"], "stored": summary["stored"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", type=int, default=4)
    ap.add_argument("--pages", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cluster_crawl.json"))
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Path(tempfile.mkdtemp(prefix="deskdex-cluster-crawl-"))
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        with Cluster(work, ["--allow-private"]) as cluster, ExitStack() as stack:
            sites = [stack.enter_context(SiteServer(kind="big", pages=args.pages, seed=i)) for i in range(args.sites)]
            urls = [s.url("/") for s in sites]
            for r in range(args.rounds):
                runs.setdefault("local", []).append(crawl(urls, work / "home", []))
                for n in (1, 2):
                    cluster.scale(n)
                    runs.setdefault(f"broker {n}", []).append(crawl(urls, work / "home", ["--broker", cluster.broker]))
                cluster.scale(0)
                print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]['wall_s']} s ({v[-1]['fetched']} fetched)"
                                                     for k, v in runs.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {k: min(v, key=lambda x: x["wall_s"]) for k, v in runs.items()}
    rate = {k: round(v["fetched"] / v["wall_s"], 1) for k, v in best.items()}
    result = {"when": time.strftime("%Y-%m-%d %H:%M"), "sites": args.sites, "pages_per_site": args.pages,
              "fetched": best["local"]["fetched"], "runs": runs, "pages_per_s": rate,
              "scaling_broker_2_over_1": round(rate["broker 2"] / rate["broker 1"], 2),
              "broker_1_over_local": round(rate["broker 1"] / rate["local"], 2)}
    print(f"\n{args.sites} sites of {args.pages} pages ({result['fetched']} requests), best of {args.rounds}")
    print("| run | pages/s |\n|---|---:|")
    for k in ("local", "broker 1", "broker 2"):
        print(f"| {k} | {rate[k]} |")
    print(f"scaling 2/1 workers: {result['scaling_broker_2_over_1']}; 1 worker over one machine: "
          f"{result['broker_1_over_local']}")
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
