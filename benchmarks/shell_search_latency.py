"""How fast the desktop's search box gets deskdex's hits (issue 31: a search through D-Bus answers in
<= 50 ms median): `deskdex shell-search` on a private session bus (dbus-daemon), activated by that
bus from the file `deskdex service install` writes, asked as GNOME Shell asks (one connection kept,
GetInitialResultSet, then GetResultMetas of the ids) and as KRunner asks (Match), each timed by the
caller from the call sent to the reply read. Beside each, interleaved, the daemon's own search op on its
socket with the same arguments: the difference is what the bus and the service add. Also the cold
start: the first call, which waits for the bus to start the service.

    python benchmarks/shell_search_latency.py [--home DIR --corpus DIR] [--files 3000] [--runs 3]

--home with --corpus: a home with that folder indexed already (`deskdex --home DIR index CORPUS`);
without them, --files generated text files (words of the queries among common words) are indexed into
a throwaway home first. Queries: benchmarks/search_queries.json (their words as the shell passes them).
Prints the figures and writes benchmarks/results/shell_search_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DESKDEX = str(Path(sys.executable).with_name("deskdex"))
BUS_NAME, PATH = "org.deskdex.SearchProvider", "/org/deskdex/SearchProvider"
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:dir={dir}</listen><servicedir>{services}</servicedir>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
</policy></busconfig>
"""
FILLER = ("the of and to in is for on that with as by this are be or from at it an was which can not have all "
          "report budget meeting notes project letter draft summary plan list table figure section chapter").split()


def summary(ms: list[float]) -> dict[str, float]:
    xs = sorted(ms)
    return {"median_ms": round(statistics.median(xs), 2), "p90_ms": round(xs[int(0.9 * (len(xs) - 1))], 2),
            "mean_ms": round(statistics.fmean(xs), 2), "max_ms": round(xs[-1], 2), "n": len(xs)}


def generate(folder: Path, count: int, queries: list[str]) -> None:
    rnd = random.Random(31)
    words = sorted({w.strip('"():').lower() for q in queries for w in q.split() if w.strip('"():')})
    words = [w for w in words if ":" not in w and w.isalnum()]
    for i in range(count):
        text = " ".join(rnd.choice(words) if rnd.random() < 0.05 else rnd.choice(FILLER) for _ in range(300))
        (folder / f"{i // 100:03d}").mkdir(exist_ok=True)
        (folder / f"{i // 100:03d}" / f"doc{i:05d}.txt").write_text(f"Document {i}\n\n{text}\n")


def wait_idle(socket_path: str) -> None:
    from deskdex.clients.client import call
    from deskdex.errors import DaemonUnavailable

    for _ in range(3000):
        try:
            if call(socket_path, "status")["state"] == "idle":
                return
        except DaemonUnavailable:
            pass
        time.sleep(0.2)
    raise SystemExit("the daemon did not become idle")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home")
    ap.add_argument("--corpus")
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=3)
    opts = ap.parse_args()
    if bool(opts.home) != bool(opts.corpus):
        ap.error("--home and --corpus go together")
    for tool in ("dbus-daemon",):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (Debian: dbus-daemon)")
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection

    from deskdex.clients.client import Client

    queries = [q["query"] for q in json.loads((HERE / "search_queries.json").read_text())["queries"]]
    work = Path(tempfile.mkdtemp(prefix="deskdex-shellbench-"))
    env = dict(os.environ, XDG_DATA_HOME=str(work / "data"), XDG_CONFIG_HOME=str(work / "config"))
    env.pop("DESKDEX_HOME", None)
    daemon = bus = None
    try:
        if opts.home:
            home, corpus = Path(opts.home), Path(opts.corpus)
        else:
            home, corpus = work / "home", work / "corpus"
            corpus.mkdir()
            generate(corpus, opts.files, queries)
            t = time.monotonic()
            subprocess.run([DESKDEX, "index", "--home", str(home), str(corpus)], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            print(f"indexed {opts.files} generated files in {time.monotonic() - t:.1f} s")
        (home / "config").mkdir(parents=True, exist_ok=True)
        config = home / "config" / "config.toml"
        saved = config.read_text() if config.exists() else None
        config.write_text(f"folders = [{json.dumps(str(corpus))}]\n")
        daemon = subprocess.Popen([DESKDEX, "daemon", "--home", str(home)], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        wait_idle(str(home / "run" / "deskdex.sock"))
        subprocess.run([DESKDEX, "service", "install", "--no-start", "--home", str(home)], check=True, env=env,
                       capture_output=True)
        (work / "bus.conf").write_text(BUS_CONFIG.format(dir=work, services=work / "data" / "dbus-1" / "services"))
        bus = subprocess.Popen(["dbus-daemon", "--nofork", f"--config-file={work / 'bus.conf'}", "--print-address=1"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env=dict(env, DESKDEX_SHELL_SEARCH_IDLE="600"))
        assert bus.stdout is not None
        address = bus.stdout.readline().strip()

        provider = DBusAddress(PATH, bus_name=BUS_NAME, interface="org.gnome.Shell.SearchProvider2")
        runner = DBusAddress(PATH, bus_name=BUS_NAME, interface="org.kde.krunner1")
        sock = Client(str(home / "run" / "deskdex.sock"))
        with open_dbus_connection(address) as conn:
            def ask(address_: DBusAddress, method: str, sig: str, *body: Any) -> tuple[float, Any]:
                t0 = time.perf_counter()
                reply = conn.send_and_get_reply(new_method_call(address_, method, sig, body), timeout=60)
                return (time.perf_counter() - t0) * 1000, reply.body

            cold, _ = ask(provider, "GetInitialResultSet", "as", ["budget"])
            times: dict[str, list[float]] = {"gnome_initial": [], "gnome_initial_and_metas": [], "krunner_match": [],
                                              "socket_search": []}
            hits = 0
            for _ in range(opts.runs):
                for q in queries:
                    terms = q.split()
                    ms, body = ask(provider, "GetInitialResultSet", "as", terms)
                    times["gnome_initial"].append(ms)
                    ms2, _ = ask(provider, "GetResultMetas", "as", body[0][:5])
                    times["gnome_initial_and_metas"].append(ms + ms2)
                    hits += bool(body[0])
                    ms, _ = ask(runner, "Match", "s", q)
                    times["krunner_match"].append(ms)
                    t0 = time.perf_counter()
                    sock.call("search", query=" ".join(terms), limit=20, snippets=False)
                    times["socket_search"].append((time.perf_counter() - t0) * 1000)
            bus_daemon = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus",
                                     interface="org.freedesktop.DBus")
            _, (pid,) = ask(bus_daemon, "GetConnectionUnixProcessID", "s", BUS_NAME)
            rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                       if line.startswith("VmRSS:"))
        sock.close()
        result: dict[str, Any] = {"queries": len(queries), "runs": opts.runs, "with_hits": hits,
                                  "corpus": str(corpus) if opts.home else f"{opts.files} generated text files",
                                  "cold_start_ms": round(cold, 1), "service_rss_mib": round(rss / 1024, 1),
                                  **{k: summary(v) for k, v in times.items()}}
        print(json.dumps(result, indent=1))
        print(f"D-Bus search (GetInitialResultSet) median {result['gnome_initial']['median_ms']} ms "
              f"(socket alone {result['socket_search']['median_ms']} ms); with the metas "
              f"{result['gnome_initial_and_metas']['median_ms']} ms; KRunner Match "
              f"{result['krunner_match']['median_ms']} ms; cold start {result['cold_start_ms']} ms; the service's RSS "
              f"{result['service_rss_mib']} MiB. Target: <= 50 ms.")
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "shell_search_latency.json").write_text(json.dumps(result, indent=1) + "\n")
        if saved is not None:
            config.write_text(saved)
        return 0
    finally:
        for proc in (bus, daemon):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=60)
        if bus is not None and bus.stdout is not None:
            bus.stdout.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
