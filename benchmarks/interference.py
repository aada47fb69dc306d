"""What indexing costs the user: the throughput a CPU-bound program keeps while the daemon runs a
full index beside it, against the same program alone.

    .venv/bin/python benchmarks/interference.py --corpus /tmp/corpora/mixed [--seconds 20] [--procs N]

The program is N processes (default: one per core, the worst case: the user's work wants every
core) each counting loop iterations; throughput is iterations per second summed. The daemon runs
as `deskdex daemon` on a fresh home over the corpus (idle CPU and I/O priority, bounded workers);
the measurement window starts once the daemon is converting. Prints the ratio; writes
benchmarks/results/interference.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deskdex.clients.client import call  # noqa: E402 (after the checkout is put on the path)
from deskdex.errors import DaemonUnavailable  # noqa: E402


def spin(seconds: float, out: "mp.Queue[int]") -> None:
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        for _ in range(10000):
            n += 1
    out.put(n)


def throughput(procs: int, seconds: float) -> float:
    q: "mp.Queue[int]" = mp.Queue()
    ps = [mp.Process(target=spin, args=(seconds, q)) for _ in range(procs)]
    for p in ps:
        p.start()
    total = sum(q.get() for _ in ps)
    for p in ps:
        p.join()
    return total / seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/corpora/mixed")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    alone = throughput(args.procs, args.seconds)
    home = Path(tempfile.mkdtemp(prefix="deskdex-interf-"))
    (home / "config").mkdir()
    (home / "config" / "config.toml").write_text(f'folders = ["{args.corpus}"]\n')
    env = dict(os.environ, DESKDEX_HOME=str(home))
    log = open(home / "daemon.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "deskdex", "daemon"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    sock = str(home / "run" / "deskdex.sock")
    while True:  # until the daemon is converting, not just starting
        try:
            st = call(sock, "status", timeout=10)
            if st["state"] == "indexing" and st.get("current"):
                break
        except DaemonUnavailable:
            pass
        time.sleep(0.2)
    docs0 = call(sock, "status")["converted"]
    beside = throughput(args.procs, args.seconds)
    st = call(sock, "status")
    still_indexing = st["state"] != "idle"
    alone_after = throughput(args.procs, args.seconds) if not still_indexing else None
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    shutil.rmtree(home, ignore_errors=True)
    result = {"procs": args.procs, "seconds": args.seconds, "alone_per_s": round(alone),
              "beside_full_index_per_s": round(beside), "kept_share": round(beside / alone, 3),
              "daemon_converted_during_window": st["converted"] - docs0,
              "daemon_still_indexing_at_end_of_window": still_indexing,
              "alone_again_per_s": round(alone_after) if alone_after else None}
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "interference.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
