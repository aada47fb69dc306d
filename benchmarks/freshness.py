"""Freshness through the daemon under load (issue 18): how long after a save a search finds the
saved word, warm (converters running, index open) and cold (the first change after the daemon
released them), with a CPU-bound program on every core but one.

    .venv/bin/python benchmarks/freshness.py [--trials 15] [--files 300] [--release-after 3]
                                             [--hogs N] [--poll 0.025] [--label NAME] [--keep] [--broker]

With --broker, the daemon is a coordinator (docs/scale-out.md): a redis-server on 127.0.0.1 and one
``deskdex worker`` (benchmarks/cluster_convert.py starts both) convert its files.

Makes a fresh home and a watched folder under /tmp (``--files`` small text, Markdown and HTML
files copied from --source, by default the small10k tree of benchmarks/index_cases.py when it is
there, which is only read; else generated text), with ``release_after`` set to --release-after
seconds (default 3, not the 20 s default, so that a cold trial does not take 20 s), and starts
``deskdex --home H daemon -v``: the console script next to the Python running this (another venv's
Python measures that venv's deskdex). Once the first index is done it starts --hogs spinning
processes (default: one per core but one) for the whole measurement, at normal priority; the
daemon works at idle priority on the core left.

A trial rewrites one of the text files with a new unique word appended (open, write, close) and
polls a search for the word through the daemon's socket, in this process (deskdex.clients.client
``call``; a ``deskdex search`` process per poll would cost ~100 ms itself), every --poll seconds;
the latency is from the close to the answer of the first search that finds it. The poll interval
bounds the resolution: a figure is late by up to one interval plus one search. Each poll is also a
search the daemon answers at idle priority: where another program takes the core left to it, the
polls take part of the little CPU it gets. Trials:

- warm: half a second after the previous trial found its word (the converters are up, the index open);
- cold: after --release-after seconds without any request (a search or a status counts as work and
  restarts the daemon's release timer, so nothing is asked meanwhile), once /proc shows that the
  daemon's converter processes are gone and that it maps no file of its index any more (tantivy
  maps its files; a daemon starved at idle priority can take a while between the two). The save
  then pays the converters' start (a fork from the fork server, imports, models) and the index's
  reopening.

One warm-up trial is not counted; then --trials cold and warm trials, alternating. Each trial line
gives the latency and, from the daemon's debug log and /proc, when the daemon began applying the
change (its watcher's delay), when a converter process was started (cold), the CPU seconds the
daemon and the new converters used until the word was found, and how busy the machine's CPUs were
meanwhile: the daemon works at idle priority, so anyone else's program on the free core delays it.

Prints median, p95 and max of each kind, over all trials and over those during which the core left
to the daemon was mostly free (the machine busy less than the hogs and 0.9 of a core). Writes them,
every trial, the share of the machine's CPU time busy during the trials (the hogs, the daemon and
anything else running), the commit (``git rev-parse --short HEAD`` of this checkout, and of the one
the measured package is installed from), date, machine and load to
benchmarks/results/freshness.json under --label (default "latest"), keeping the other labels: a
"before" run with another venv's Python and an "after" run with this one sit in one file.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import random
import re
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from interference import spin  # noqa: E402
from recoll_steps import p95  # noqa: E402
from tests.daemon_fixture import DaemonProcess, _cpu_seconds  # noqa: E402

import deskdex as deskdex_pkg  # noqa: E402
from deskdex.clients.client import call  # noqa: E402

SOURCE = "/tmp/deskdex-index-cases-ro3s656s/small10k/tree"
SUFFIXES = (".txt", ".md", ".html")
TICK = os.sysconf("SC_CLK_TCK")


def make_folder(dest: Path, source: Path, n: int) -> list[Path]:
    """``n`` small files of ``source`` copied to ``dest`` (every k-th, in path order), or generated
    text when there is no ``source``. Returns the text files, the trials' targets."""
    picked: list[Path] = []
    if source.is_dir():
        found = sorted(p for p in source.rglob("*") if p.suffix in SUFFIXES and p.is_file()
                       and 200 < p.stat().st_size < 64 * 1024)
        picked = found[:: max(1, len(found) // n)][:n]
    if len(picked) < n // 2:
        rnd = random.Random(18)
        words = ["".join(rnd.choices(string.ascii_lowercase, k=rnd.randint(3, 9))) for _ in range(3000)]
        for i in range(n):
            p = dest / f"d{i % 10}" / f"note{i}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("\n".join(" ".join(rnd.choices(words, k=12)) for _ in range(rnd.randint(5, 80))) + "\n")
    else:
        for p in picked:
            out = dest / p.relative_to(source)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, out)
    return sorted(p for p in dest.rglob("*.txt"))


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
        except OSError:
            pass
    return out


def workers(daemon_pid: int) -> list[int]:
    """The daemon's converter processes: its grandchildren (multiprocessing's fork server, a child
    of the daemon that outlives a release, forks them)."""
    return [w for c in children(daemon_pid) for w in children(c)]


def started_at(pid: int) -> float | None:
    """When a process started, in seconds since boot (CLOCK_BOOTTIME; /proc counts clock ticks, 10 ms)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]) / TICK
    except (OSError, ValueError, IndexError):
        return None


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot (/proc/stat; idle and iowait are not busy)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(f) - f[3] - f[4], sum(f)


def index_maps(pid: int, home: Path) -> int:
    """Files of the daemon's tantivy index mapped in its memory: none once it has let go of the
    index (writer and readers; tantivy maps its files rather than holding them open)."""
    where = str(home / "data" / "tantivy")
    try:
        return sum(where in line for line in open(f"/proc/{pid}/maps"))
    except OSError:
        return 0


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def trial(sock: str, target: Path, original: str, word: str, poll: float,
          timeout: float) -> tuple[float | None, float, float]:
    """Save ``target`` with ``word``; seconds until a search finds it (None: not in ``timeout``),
    and the time of the save: wall clock, and seconds since boot."""
    with open(target, "w") as f:
        f.write(original + f"\nfreshness probe {word}\n")
    t0 = time.monotonic()
    saved_wall, saved_boot = time.time(), time.clock_gettime(time.CLOCK_BOOTTIME)
    while time.monotonic() - t0 < timeout:
        if call(sock, "search", query=word, limit=1, snippets=False, timeout=timeout)["hits"]:
            return time.monotonic() - t0, saved_wall, saved_boot
        time.sleep(poll)
    return None, saved_wall, saved_boot


def applied_at(log: Path, path: Path, after: float) -> float | None:
    """Wall-clock time of the daemon's first "applying ... records" debug line naming ``path``
    logged at or after ``after`` (the log's times are local, to the millisecond)."""
    pat = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) DEBUG applying ")
    for line in log.read_text(errors="replace").splitlines():
        m = pat.match(line)
        if m and str(path) in line:
            t = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
            if t >= after - 0.002:
                return t
    return None


def git_head(where: Path) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True)
    if out.returncode:
        return None
    # "+changes": the package differs from the commit (changes to benchmarks/ and docs/ do not count)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks",
                            ":!docs"], cwd=where, capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + ("+changes" if dirty else "")


def summary(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "median": round(statistics.median(xs), 3), "p95": round(p95(xs), 3),
            "max": round(max(xs), 3), "min": round(min(xs), 3)}


def summarize(rows: list[dict[str, Any]], hogs: int, cpus: int) -> dict[str, Any]:
    """Median, p95 and max of each kind, over every trial and over the trials during which the
    machine was busy less than the hogs and nine tenths of a core: the core left to the daemon was
    mostly free (on a shared machine someone else's program may take it, and then the daemon, at
    idle priority, waits)."""
    result: dict[str, Any] = {}
    free_below = (hogs + 0.9) / cpus
    for kind in ("warm", "cold"):
        got = [r for r in rows if r["kind"] == kind]
        lat = [r["latency"] for r in got if r["latency"] is not None]
        free = [r["latency"] for r in got if r["latency"] is not None and r["machine_busy"] < free_below]
        apply = [r["save_to_apply"] for r in got if r["save_to_apply"] is not None]
        s = result[kind] = {**summary(lat), "missed": len(got) - len(lat), "under_1s": sum(x <= 1.0 for x in lat),
                            "free_core": {**summary(free), "under_1s": sum(x <= 1.0 for x in free),
                                          "machine_busy_below": round(free_below, 3)},
                            "save_to_apply_median": round(statistics.median(apply), 3) if apply else None}
        if got:
            s["daemon_cpu_median"] = round(statistics.median(r["daemon_cpu"] for r in got), 3)
        if kind == "cold":
            ws = [r["save_to_worker_start"] for r in got if r["save_to_worker_start"] is not None]
            s["save_to_worker_start_median"] = round(statistics.median(ws), 3) if ws else None
            if got:
                s["new_workers_cpu_median"] = round(statistics.median(r["new_workers_cpu"] for r in got), 3)
            s["trials_with_workers_left"] = sum(r["workers_before"] > 0 for r in got)
            s["trials_with_index_open"] = sum(r["index_maps_before"] > 0 for r in got)
    return result


def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    return {"host": platform.node(), "cpu": model, "cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=15, help="cold trials and as many warm ones (plus one warm-up)")
    ap.add_argument("--files", type=int, default=300, help="files in the watched folder")
    ap.add_argument("--source", default=SOURCE, help="tree to copy them from (read only); generated text if missing")
    ap.add_argument("--release-after", type=float, default=3.0, help="the daemon's release_after setting, seconds")
    ap.add_argument("--hogs", type=int, default=max(0, (os.cpu_count() or 2) - 1),
                    help="CPU-bound processes spinning throughout (default: one per core but one)")
    ap.add_argument("--poll", type=float, default=0.025, help="seconds between two searches of a trial")
    ap.add_argument("--timeout", type=float, default=60.0, help="a trial not found in this many seconds is missed")
    ap.add_argument("--label", default="latest", help="name of this run in the results file")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "freshness.json"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (home, daemon log)")
    ap.add_argument("--broker", action="store_true",
                    help="the daemon as a coordinator: a redis-server on 127.0.0.1 and one `deskdex worker` convert")
    args = ap.parse_args()

    deskdex = Path(sys.executable).parent / "deskdex"  # what tests.daemon_fixture starts, as users do
    # The checkout the measured package comes from (an editable install links into it): its commit
    # is the measured code's, which a run with another venv's Python makes other than this one's.
    measured = Path(deskdex_pkg.__file__).resolve().parent.parent
    base = Path(tempfile.mkdtemp(prefix="deskdex-fresh-"))
    docs = base / "docs"
    docs.mkdir()
    targets = make_folder(docs, Path(args.source), args.files)
    originals = {p: p.read_text(errors="replace") for p in targets}
    nfiles = sum(1 for p in docs.rglob("*") if p.is_file())
    print(f"{nfiles} files in {docs} ({len(targets)} text files to save); deskdex {deskdex}", flush=True)

    rnd = random.Random()
    extra = f"release_after = {float(args.release_after)}\n"
    cluster: list[Any] = []  # redis-server and the worker, with --broker
    if args.broker:
        from cluster_convert import start_redis, start_worker

        redis_proc, broker = start_redis(base)
        cluster = [redis_proc, start_worker(base, "w1", broker)]
        extra += f'broker = "{broker}"\n'
    daemon = DaemonProcess(base / "home", [docs], extra_config=extra, args=("-v",))
    hogs: list[mp.Process] = []
    rows: list[dict[str, Any]] = []
    load0 = os.getloadavg()
    ticks0: tuple[int, int] | None = None
    try:
        t = time.monotonic()
        daemon.start()  # waits for the first index (status says idle)
        assert daemon.proc is not None
        pid = daemon.proc.pid
        st = daemon.call("status")
        print(f"first index done in {time.monotonic() - t:.1f} s: {st.get('converted')} converted", flush=True)
        q: "mp.Queue[int]" = mp.Queue()
        hogs = [mp.Process(target=spin, args=(1e9, q), daemon=True) for _ in range(args.hogs)]
        for h in hogs:
            h.start()
        sock = daemon.socket
        ticks0 = cpu_ticks()
        kinds = ["warm-up"] + [k for _ in range(args.trials) for k in ("cold", "warm")]
        for n, kind in enumerate(kinds):
            if kind == "cold":
                time.sleep(args.release_after + 0.5)  # no request meanwhile: it would restart the timer
                deadline = time.monotonic() + args.release_after + 30
                # The daemon ends the converters first, then lets go of the index: both, or the
                # trial would find the index still open.
                while (workers(pid) or index_maps(pid, daemon.home)) and time.monotonic() < deadline:
                    time.sleep(0.1)
            else:
                time.sleep(0.5)
            before = set(workers(pid))
            nthreads, nmaps = threads(pid), index_maps(pid, daemon.home)
            cpu0, ticks = _cpu_seconds(pid), cpu_ticks()
            target = targets[n % len(targets)]
            word = "zqfresh" + "".join(rnd.choices(string.ascii_lowercase, k=10))
            latency, saved, saved_boot = trial(sock, target, originals[target], word, args.poll, args.timeout)
            new = [w for w in workers(pid) if w not in before]
            ticks1, daemon_cpu = cpu_ticks(), _cpu_seconds(pid) - cpu0
            workers_cpu = sum(_cpu_seconds(w) for w in new)
            starts = [s for w in new if (s := started_at(w)) is not None]
            applied = applied_at(daemon.log, target, saved)
            row = {"n": n, "kind": kind, "latency": None if latency is None else round(latency, 4),
                   "workers_before": len(before), "index_maps_before": nmaps, "daemon_threads_before": nthreads,
                   "save_to_apply": None if applied is None else round(applied - saved, 3),
                   "save_to_worker_start": round(min(starts) - saved_boot, 3) if starts else None,
                   # CPU seconds until found: the daemon's own (converters ended meanwhile included),
                   # and those of the converters started for this save (their start-up and the file)
                   "daemon_cpu": round(daemon_cpu, 2), "new_workers_cpu": round(workers_cpu, 2),
                   "machine_busy": round((ticks1[0] - ticks[0]) / max(1, ticks1[1] - ticks[1]), 2),
                   "file": str(target.relative_to(docs))}
            rows.append(row)
            print(f"{kind:7} {'missed' if latency is None else f'{latency:6.3f} s'}  workers before {len(before)}, "
                  f"index maps {nmaps}, threads {nthreads}; applying after {row['save_to_apply']} s"
                  + (f", worker started after {row['save_to_worker_start']} s" if starts else "")
                  + f"; CPU s daemon {row['daemon_cpu']}, new workers {row['new_workers_cpu']}; "
                  f"machine busy {row['machine_busy']:.0%}", flush=True)
    finally:
        for h in hogs:
            if h.is_alive():
                h.terminate()
        for h in hogs:
            h.join(5)
        if daemon.proc is not None:
            daemon.stop()
        for proc in reversed(cluster):  # the worker, then Redis
            proc.terminate()
            proc.wait(60)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}")

    load1 = os.getloadavg()
    ticks1 = cpu_ticks()
    # The share of the machine's CPU time busy during the trials: the hogs' (hogs / cpus), the
    # daemon's and whatever else ran (other people's programs on a shared machine).
    busy = round((ticks1[0] - ticks0[0]) / max(1, ticks1[1] - ticks0[1]), 3) if ticks0 else None
    result = summarize(rows, args.hogs, os.cpu_count() or 1)
    for kind in ("warm", "cold"):
        sm = result[kind]
        for name, x in (("", sm), (" (free core)", sm["free_core"])):
            if x["n"]:
                print(f"{kind}{name}: median {x['median']:.3f} s, p95 {x['p95']:.3f} s, max {x['max']:.3f} s "
                      f"({x['n']} trials, {x['under_1s']} within 1 s)")
        print(f"  {sm['missed']} missed; {sm['free_core']['n']} of {sm['n'] + sm['missed']} trials with the "
              f"free core mostly free")
    record = {**result, "commit": git_head(ROOT), "measured_checkout": str(measured),
              "measured_commit": git_head(measured), "deskdex": str(deskdex),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "load": {"hogs": args.hogs, "loadavg_before": load0, "loadavg_after": load1,
                       "cpu_busy_share_during_trials": busy},
              "settings": {"files": nfiles, "release_after": args.release_after, "poll": args.poll,
                           "trials": args.trials, "timeout": args.timeout},
              "trials": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(out.read_text()) if out.exists() else {}
    saved[args.label] = record
    out.write_text(json.dumps(saved, indent=1) + "\n")
    print(f"wrote {out} [{args.label}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
