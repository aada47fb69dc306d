"""An idle daemon watching many folders: its memory, threads and start time, as an enterprise
server with one home per account runs it.

    .venv/bin/python benchmarks/many_folders.py [--folders 1 1000 10000] [--settle 5]

For each count N: makes N small folders (one text file each; ``--layout empty``: a file in the
last one only; ``--layout one``: one folder of N files, to tell the documents' share) in a temp folder, starts
`deskdex daemon` watching all of them, waits until all N files are indexed and the daemon is idle,
waits ``--settle`` seconds, then measures the PSS of the whole process tree (pages shared between
processes counted once, proportionally, from /proc/PID/smaps_rollup), the daemon's threads and
open inotify descriptors, and the time from a file written in the last folder until a search finds
it. Prints one JSON line per count and writes them all to benchmarks/results/many_folders.json
(``--out`` to name another file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from deskdex.clients.client import call  # noqa: E402
from daemon_scale import wait_status  # noqa: E402
from recoll_proc import tree as tree_pids  # noqa: E402


def pss_kib(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def inotify_fds(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return n


def run(n: int, settle: float, base: Path, layout: str = "each") -> dict[str, object]:
    """``layout``: "each" folder holds a file; "empty": only the last one does (what the folders
    cost, without their documents); "one": one folder holding n files (what the documents cost)."""
    docs, home = base / f"docs{n}", base / f"home{n}"
    folders = []
    for i in range(n):
        folder = docs / ("all" if layout == "one" else f"acct{i:05d}")
        folder.mkdir(parents=True, exist_ok=True)
        if layout != "empty" or i == n - 1:
            (folder / f"note{i}.txt").write_text(f"note of account {i} zacct{i}q\n")
        if str(folder) not in folders[-1:]:
            folders.append(str(folder))
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(f"folders = {json.dumps(folders)}\nworkers = 2\n")
    env = dict(os.environ, DESKDEX_HOME=str(home))
    sock = str(home / "run" / "deskdex.sock")
    with open(base / f"daemon{n}.log", "w") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "deskdex", "daemon"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            files = 1 if layout == "empty" else n
            wait_status(sock, lambda s: s["state"] == "idle" and s["documents"] >= files, 7200)
            ready_s = time.monotonic() - t0
            time.sleep(settle)
            pids = tree_pids(proc.pid)
            result: dict[str, object] = {
                "folders": len(folders), "files": files, "ready_seconds": round(ready_s, 1), "processes": len(pids),
                "idle_pss_mib": round(pss_kib(pids) / 1024, 1),
                "daemon_pss_mib": round(pss_kib([proc.pid]) / 1024, 1),
                "daemon_threads": threads(proc.pid), "inotify_fds": inotify_fds(proc.pid)}
            # A live change in the last folder: written, then found.
            last = Path(folders[-1]) / "live.txt"
            t1 = time.monotonic()
            last.write_text("a live change zlivechangeq\n")
            while time.monotonic() - t1 < 120:
                hits = call(sock, "search", query="zlivechangeq", limit=5, timeout=60)["hits"]
                if [h["path"] for h in hits] == [str(last)]:
                    break
                time.sleep(0.05)
            result["live_change_seconds"] = round(time.monotonic() - t1, 2)
            return result
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folders", type=int, nargs="+", default=[1, 1000, 10000])
    ap.add_argument("--layout", choices=["each", "empty", "one"], default="each",
                    help="a file in each folder, in the last one only, or all files in one folder")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds idle before measuring")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "many_folders.json"))
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="deskdex-folders-"))
    results = []
    try:
        for n in args.folders:
            results.append(run(n, args.settle, base, args.layout))
            print(json.dumps(results[-1]), flush=True)
            shutil.rmtree(base / f"docs{n}")
            shutil.rmtree(base / f"home{n}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    one = next((r for r in results if r["files"] == 1 and r["folders"] == 1), None)
    if one is not None:
        for r in results:
            if r is not one:
                unit = "file" if args.layout == "one" else "folder"
                grown = (r["idle_pss_mib"] - one["idle_pss_mib"]) * 1024
                r[f"kib_per_{unit}"] = round(grown / (r[f"{unit}s"] - 1), 1)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
