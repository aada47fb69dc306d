"""The web UI's cost and speed on the corpus (issue 30): (a) API search latency, GET /api/search
timed by the client; (b) search to rendered results in a real headless Chromium (tests/browser.py):
the query typed in the search box and Enter pressed, timed in the page from the key to the first
animation frame after the results are in the document (and, apart, from the last key typed to the
results of search as you type, which waits 120 ms after the last key by design); (c) the daemon's
memory (RSS, PSS and USS of its process tree, /proc/PID/smaps_rollup) with the web off and on, after
the same socket searches and once the daemon has released what they held, and again after the web's
own use; and its CPU time over 10 s idle with the web on. The API is timed beside the socket's search
op with the same arguments, interleaved, so the web's own share shows on a busy machine too.

    python benchmarks/web_latency.py [--home DIR] [--corpus /tmp/corpora/mixed] [--runs 3]

--home: a home with the corpus indexed already (`deskdex --home DIR index CORPUS`); without it the
corpus is indexed into a throwaway home first (about 10 minutes). The daemon is started on that home
with `folders` set to the corpus (as benchmarks/search_latency.py does), so it has nothing to convert.
Queries: benchmarks/search_queries.json. Prints the figures and writes benchmarks/results/web_latency.json.
Targets: API median <= 50 ms, browser median <= 100 ms, memory growth <= 40 MiB, idle CPU 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DESKDEX = str(Path(sys.executable).with_name("deskdex"))
TICK = os.sysconf("SC_CLK_TCK")
RELEASE_WAIT = 30.0  # past the daemon's release_after (20 s)
QUIET_AFTER_SEARCH = 75.0  # tantivy's search threads wake for up to a minute after a search (docs/web.md)

sys.path.insert(0, str(ROOT))  # tests/browser.py: the same Chromium the browser tests drive


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(ms: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(ms), 1), "p90_ms": round(percentile(ms, 90), 1),
            "mean_ms": round(statistics.fmean(ms), 1), "max_ms": round(max(ms), 1), "n": len(ms)}


def tree(pid: int) -> list[int]:
    """``pid`` and every process under it (its converters, the fork server)."""
    kids: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(p))
    out, stack = [pid], [pid]
    while stack:
        for c in kids.get(stack.pop(), []):
            out.append(c)
            stack.append(c)
    return out


def memory_mib(pid: int) -> dict[str, float]:
    """RSS, PSS and USS (private pages) of the daemon's process tree. PSS shares a library's pages with
    every other process that maps them (other programs' Pythons too), so USS, the pages the daemon
    alone holds, is the steadier figure of what it costs."""
    total = {"rss": 0, "pss": 0, "uss": 0}
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                key, _, rest = line.partition(":")
                if key == "Rss":
                    total["rss"] += int(rest.split()[0])
                elif key == "Pss":
                    total["pss"] += int(rest.split()[0])
                elif key in ("Private_Clean", "Private_Dirty"):
                    total["uss"] += int(rest.split()[0])
        except OSError:
            pass  # ended meanwhile
    return {k: round(v / 1024, 1) for k, v in total.items()}


def settled_memory(pid: int) -> dict[str, float]:
    """The tree's memory once the daemon has let go of what a search holds (release_after: 20 quiet
    seconds, then its converters end and the index closes), so web on and off compare at one state."""
    time.sleep(RELEASE_WAIT)
    return memory_mib(pid)


def cpu_ticks(pid: int) -> int:
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError):
            pass
    return total


class Daemon:
    def __init__(self, home: Path, web: bool) -> None:
        args = [DESKDEX, "--home", str(home), "daemon", *(["--web", "127.0.0.1:0"] if web else [])]
        env = {k: v for k, v in os.environ.items() if k != "DESKDEX_HOME"}
        self.home = home
        self.log = open(home / f"daemon-{'web' if web else 'noweb'}.log", "w")
        self.proc = subprocess.Popen(args, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        from deskdex.clients.client import call
        from deskdex.errors import DaemonUnavailable
        from deskdex.paths import Home

        self.socket = Home.resolve(str(home)).socket
        self.call = lambda op, **kw: call(self.socket, op, timeout=120, **kw)
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon ended with {self.proc.returncode}: see {self.log.name}")
            try:
                if self.call("status")["state"] == "idle":
                    break
            except DaemonUnavailable:
                pass
            time.sleep(1)
        else:
            raise RuntimeError("the daemon was not idle within 30 minutes")
        self.url = json.loads((home / "run" / "web.json").read_text())["url"] if web else ""

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def api_latency(d: Daemon, queries: list[str], runs: int) -> tuple[list[float], list[float]]:
    """GET /api/search (its defaults: 10 hits, snippets) and, interleaved query by query so that a busy
    machine's swings hit both alike, the socket's search op with the same arguments: the web's own
    share is the difference."""
    import httpx

    base, token = d.url.split("?", 1)[0], d.url.rsplit("token=", 1)[1]
    web, sock = [], []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        for q in queries:  # one warm-up each: the first search of a word reads its postings from disk
            c.get("api/search", params={"q": q})
        for _ in range(runs):
            for q in queries:
                t = time.perf_counter()
                r = c.get("api/search", params={"q": q})
                web.append((time.perf_counter() - t) * 1000)
                if r.status_code != 200:
                    raise RuntimeError(f"{q!r}: HTTP {r.status_code} {r.text[:300]}")
                t = time.perf_counter()
                d.call("search", query=q, limit=10, snippets=True)
                sock.append((time.perf_counter() - t) * 1000)
    return web, sock


# In the page: the time from the key (Enter, or the last key typed) to the first animation frame
# after the script has put the results in the document (the event it dispatches then).
PROBE = """
window.__bench = {};
document.getElementById('q').addEventListener('keydown', (e) => {
  if (e.key === 'Enter') window.__bench = {start: performance.now()};
}, true);
document.getElementById('q').addEventListener('input', () => { window.__bench.lastInput = performance.now(); }, true);
document.getElementById('results').addEventListener('deskdex:rendered', (e) => {
  const b = window.__bench;
  requestAnimationFrame(() => { b.done = performance.now(); b.query = e.detail.query; });
});
"""


def browser_latency(url: str, queries: list[str], runs: int) -> tuple[list[float], list[float]]:
    from selenium.webdriver.common.keys import Keys

    from tests.browser import Browser, missing

    why = missing()
    if why:
        raise SystemExit(f"no headless browser: {why}")
    b = Browser()
    enter, typing = [], []
    try:
        b.get(url)
        b.js(PROBE)
        box = b.find("#q")
        for run in range(runs + 1):  # the first run warms up
            for q in queries:
                # Enter: the whole query searched at once.
                b.js("arguments[0].value = ''; window.__bench = {};", box)
                box.send_keys(q)
                b.js("window.__bench = {};")  # the input's own searches are not timed here
                box.send_keys(Keys.ENTER)
                got = b.wait(lambda q=q: b.js("const x = window.__bench; return x.done && x.query === arguments[0] "
                                              "? x.done - x.start : null", q), 60, f"the results of {q!r}")
                if run:
                    enter.append(float(got))
                # As you type: from the last key to the results (120 ms of that is the script's wait).
                b.js("arguments[0].value = ''; window.__bench = {};", box)
                box.send_keys(q + " ")
                got = b.wait(lambda q=q: b.js("const x = window.__bench; return x.done && x.query === arguments[0] "
                                              "? x.done - x.lastInput : null", q + " "), 60, f"typed {q!r}")
                if run:
                    typing.append(float(got))
    finally:
        b.quit()
    return enter, typing


def quiet_cpu(pid: int, seconds: float = 10.0) -> int:
    """CPU ticks of the daemon's tree over ``seconds``, after tantivy's threads have gone quiet."""
    time.sleep(QUIET_AFTER_SEARCH)
    before = cpu_ticks(pid)
    time.sleep(seconds)
    return cpu_ticks(pid) - before


def socket_searches(d: Daemon, queries: list[str]) -> None:
    for q in queries:
        d.call("search", query=q, snippets=True, facets=True, limit=20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", help="a home with the corpus indexed")
    ap.add_argument("--corpus", default=os.environ.get("DESKDEX_CORPUS", "/tmp/corpora/mixed"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "web_latency.json"))
    a = ap.parse_args()
    corpus = Path(a.corpus)
    if not corpus.is_dir():
        raise SystemExit(f"skipped: no corpus at {corpus} (build it with ../shared/corpus/build.sh)")
    queries = [q["query"] for q in json.loads((HERE / "search_queries.json").read_text())["queries"]]
    made = None
    if a.home:
        home = Path(a.home)
    else:
        made = home = Path(tempfile.mkdtemp(prefix="deskdex-web-bench-"))
        print(f"indexing {corpus} into {home} ...", flush=True)
        subprocess.run([DESKDEX, "--home", str(home), "index", str(corpus)], check=True, stdout=subprocess.DEVNULL)
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "config.toml").write_text(f"folders = [{json.dumps(str(corpus))}]\n")
    result: dict[str, Any] = {"corpus": str(corpus), "queries": len(queries), "runs": a.runs}
    try:
        d = Daemon(home, web=False)
        try:
            result["memory_web_off_idle_mib"] = settled_memory(d.proc.pid)
            socket_searches(d, queries)
            result["memory_web_off_after_searches_mib"] = settled_memory(d.proc.pid)
            result["documents"] = d.call("status").get("documents")
        finally:
            d.stop()
        d = Daemon(home, web=True)
        try:
            result["memory_web_on_idle_mib"] = settled_memory(d.proc.pid)
            socket_searches(d, queries)
            result["memory_web_on_after_searches_mib"] = settled_memory(d.proc.pid)
            web, sock = api_latency(d, queries, a.runs)
            result["api_search"], result["socket_search_same_args"] = summary(web), summary(sock)
            enter, typing = browser_latency(d.url, queries, a.runs)
            result["browser_enter_to_rendered"] = summary(enter)
            result["browser_last_key_to_rendered_as_you_type"] = summary(typing)
            result["memory_web_on_after_web_use_mib"] = settled_memory(d.proc.pid)
            result["idle_cpu_ticks_10s_web_on"] = quiet_cpu(d.proc.pid)
        finally:
            d.stop()
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    off, on = result["memory_web_off_after_searches_mib"], result["memory_web_on_after_searches_mib"]
    result["growth_web_on_mib"] = {k: round(on[k] - off[k], 1) for k in on}
    used = result["memory_web_on_after_web_use_mib"]
    result["growth_after_web_use_mib"] = {k: round(used[k] - off[k], 1) for k in used}
    result["targets"] = {"api_median_ms": 50, "browser_median_ms": 100, "memory_growth_mib": 40, "idle_cpu_ticks": 0}
    print(json.dumps(result, indent=2))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
