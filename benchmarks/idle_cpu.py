"""Idle cost and reaction time of the watcher and the socket server, measured in this process.

    .venv/bin/python benchmarks/idle_cpu.py [--folders 2000] [--idle 60] [--changes 50]

Prints: watch setup time for a tree of N folders; CPU seconds and context switches of every
thread over an idle period (the goal is zero); and the latency from a file write to its
Changed record (median and 95th percentile), which bounds how fresh search results can be.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deskdex.clients.client import call  # noqa: E402
from deskdex.pipeline.coalesce import Changed  # noqa: E402
from deskdex.daemon.server import Server  # noqa: E402
from deskdex.pipeline.watch import Watcher  # noqa: E402


def switches() -> int:
    total = 0
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/status") as f:
            total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
    return total


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folders", type=int, default=2000)
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument("--changes", type=int, default=50)
    args = ap.parse_args()
    seen: dict[str, float] = {}
    cond = threading.Condition()

    def sink(batch: list) -> None:
        now = time.monotonic()
        with cond:
            for r in batch:
                if isinstance(r, Changed):
                    seen.setdefault(r.path, now)
            cond.notify_all()

    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "tree")
        for i in range(args.folders):
            os.makedirs(os.path.join(root, f"d{i // 50}", f"e{i}"))
        t0 = time.monotonic()
        watcher = Watcher(sink).start()
        watcher.add(root)
        print(f"watch setup, {args.folders} folders: {time.monotonic() - t0:.2f} s")
        server = Server(os.path.join(tmp, "run", "s.sock"), {"status": lambda req: {"state": "idle"}}).start()
        call(server.path, "status")
        time.sleep(1)
        c0, s0 = cpu(), switches()
        time.sleep(args.idle)
        c1, s1 = cpu(), switches()
        print(f"idle {args.idle:.0f} s: CPU {c1 - c0:.4f} s, context switches {s1 - s0} "
              f"(threads: {threading.active_count()})")
        lat = []
        for i in range(args.changes):
            path = os.path.join(root, f"d{i % 40}", f"e{(i % 40) * 50}", f"f{i}.txt")
            t = time.monotonic()
            with open(path, "w") as f:
                f.write("hello")
            with cond:
                cond.wait_for(lambda path=path: path in seen, timeout=10)
            lat.append(seen.get(path, float("inf")) - t)
            time.sleep(0.05)
        lat.sort()
        print(f"write -> Changed record, {len(lat)} files: median {statistics.median(lat):.3f} s, "
              f"p95 {lat[int(0.95 * (len(lat) - 1))]:.3f} s, max {lat[-1]:.3f} s")
        server.stop()
        watcher.stop()


if __name__ == "__main__":
    main()
