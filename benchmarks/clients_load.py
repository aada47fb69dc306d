"""Many clients at once: a real daemon answering N concurrent clients for a while.

    .venv/bin/python benchmarks/clients_load.py [--clients 50] [--seconds 40] [--mode command|socket]
                                                [--files 400] [--folder DIR]

1. Indexes a small generated corpus (``--files`` text files) or ``--folder`` with a real
   ``deskdex daemon`` on a private home, and waits until it is idle.
2. Starts ``--clients`` clients together, each searching in a loop for ``--seconds``:
   ``command`` (the default) runs the installed ``deskdex search`` command, a new process per search
   as from a shell; ``socket`` runs one Python process per client that calls the daemon's socket
   through deskdex.clients.client, a new connection per search.
3. Prints the errors (target 0: a refused connection, a non-zero exit, a traceback, anything on
   stderr), the searches done, and the median and 99th percentile latency; writes them to
   benchmarks/results/clients_load_<mode>.json.

A search the fast path cannot get from the daemon falls back to reading the index directly, which
still answers: it counts as an error only if it says something on stderr, but shows in the latency.
"""

from __future__ import annotations

import argparse
import collections
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
DESKDEX = str(Path(sys.executable).parent / "deskdex")
WORDS = ("apple pear plum cherry grape melon lemon lime orange peach apricot fig date kiwi mango papaya "
         "guava berry walnut almond hazel pecan cashew river mountain valley forest desert ocean island "
         "harbour bridge tower castle garden meadow orchard village market station library museum theatre "
         "violin piano guitar trumpet flute drum cello harp organ banjo").split()
QUERIES = ("apple", "river OR mountain", "garden -castle", '"piano guitar"', "mel*", "orchard village",
           "ext:txt harbour", "zeppelin")

# One socket client: waits for the common start, searches until the end, prints its figures.
SOCKET_CLIENT = """
import json, sys, time
from deskdex.clients.client import call
from deskdex.errors import DeskdexError
sock, start, end, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
queries = json.loads(sys.argv[5])
lat, errors = [], []
time.sleep(max(0.0, start - time.time()))
i = seed
while time.time() < end:
    q = queries[i % len(queries)]
    i += 1
    t = time.perf_counter()
    try:
        call(sock, "search", query=q, limit=10)
        lat.append(time.perf_counter() - t)
    except DeskdexError as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        errors.append(f"uncaught {type(exc).__name__}: {exc}")
print(json.dumps({"latencies": lat, "errors": errors}))
"""


def generate(folder: Path, n: int) -> None:
    rnd = random.Random(14)
    for i in range(n):
        body = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(50, 300)))
        (folder / f"note{i:05d}.txt").write_text(f"Note {i}\n\n{body}\n")


def wait_idle(env: dict[str, str], proc: subprocess.Popen[bytes], timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    last: dict[str, object] = {}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the daemon exited ({proc.returncode})")
        p = subprocess.run([DESKDEX, "status", "--json"], env=env, capture_output=True, text=True)
        if p.returncode == 0:
            last = json.loads(p.stdout)
            if last.get("daemon") and last.get("state") == "idle":
                return last
        time.sleep(0.5)
    raise SystemExit(f"the daemon did not become idle in {timeout:.0f} s: {last}")


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run_commands(env: dict[str, str], clients: int, seconds: float) -> tuple[list[float], list[str]]:
    """``clients`` threads, each running ``deskdex search`` processes back to back (a thread waiting
    for its process holds no CPU, so the measuring side adds little)."""
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)
    end = [0.0]

    def client(n: int) -> None:
        barrier.wait()
        if n == 0:
            end[0] = time.monotonic() + seconds
        while not end[0]:
            time.sleep(0.001)
        i = n
        while time.monotonic() < end[0]:
            q = QUERIES[i % len(QUERIES)]
            i += 1
            t = time.perf_counter()
            p = subprocess.run([DESKDEX, "search", q, "--limit", "10"], env=env, capture_output=True, text=True)
            took = time.perf_counter() - t
            with lock:
                if p.returncode != 0 or p.stderr.strip():
                    lines = p.stderr.strip().splitlines() or [f"exit {p.returncode}"]
                    errors.append(f"exit {p.returncode}: {lines[-1][:200]}")
                else:
                    lat.append(took)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, errors


def run_sockets(sock: str, env: dict[str, str], clients: int, seconds: float) -> tuple[list[float], list[str]]:
    start = time.time() + 2.0 + clients * 0.05  # every client process is up and waiting by then
    end = start + seconds
    procs = [subprocess.Popen([sys.executable, "-c", SOCKET_CLIENT, sock, str(start), str(end), str(n),
                               json.dumps(QUERIES)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for n in range(clients)]
    lat: list[float] = []
    errors: list[str] = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            errors.append(f"client exit {p.returncode}: {err.strip().splitlines()[-1:] or ''}")
            continue
        got = json.loads(out)
        lat += got["latencies"]
        errors += got["errors"]
    return lat, errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--mode", choices=("command", "socket"), default="command")
    ap.add_argument("--files", type=int, default=400, help="size of the generated corpus")
    ap.add_argument("--folder", type=Path, help="index this folder instead of a generated corpus")
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="deskdex-clients-"))
    home = base / "home"
    folder = args.folder.resolve() if args.folder else base / "docs"
    if not args.folder:
        folder.mkdir()
        generate(folder, args.files)
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(f"folders = [{json.dumps(str(folder))}]\n")
    env = dict(os.environ, DESKDEX_HOME=str(home), NO_COLOR="1")
    sock = str(home / "run" / "deskdex.sock")
    log = open(base / "daemon.log", "w")
    proc = subprocess.Popen([DESKDEX, "daemon"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        st = wait_idle(env, proc, 600)
        print(f"daemon idle with {st['documents']} documents; {args.clients} {args.mode} clients for "
              f"{args.seconds:g} s ...", flush=True)
        t0 = time.monotonic()
        if args.mode == "command":
            lat, errors = run_commands(env, args.clients, args.seconds)
        else:
            lat, errors = run_sockets(sock, env, args.clients, args.seconds)
        wall = time.monotonic() - t0
        alive = proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    kinds = collections.Counter(e[:120] for e in errors)
    result = {
        "mode": args.mode, "clients": args.clients, "seconds": args.seconds, "documents": st["documents"],
        "searches": len(lat), "searches_per_second": round(len(lat) / wall, 1), "errors": len(errors),
        "error_kinds": dict(kinds.most_common(5)),
        "median_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
        "p99_ms": round(pct(lat, 99) * 1000, 1) if lat else None,
        "max_ms": round(max(lat) * 1000, 1) if lat else None,
        "daemon_alive": alive, "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"clients_load_{args.mode}.json").write_text(json.dumps(result, indent=2) + "\n")
    if os.environ.get("KEEP"):
        print(f"kept {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
