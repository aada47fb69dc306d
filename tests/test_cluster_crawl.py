"""Crawling past one machine: `deskdex crawl --broker` hands its requests to real `deskdex worker`
processes through a real redis-server on 127.0.0.1, and gets what a single machine gets; a worker
killed with SIGKILL and a broker restarted in the middle of a crawl lose nothing, double nothing,
and no site is asked twice within its delay. Asserted from the test site's own request log."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from .conftest import CLI, DESKDEX, ROOT
from .test_cluster import RedisServer, Worker, _cli, broker, redis_server, workers  # noqa: F401 (fixtures)
from .webcrawl_site import SiteServer

pytestmark = pytest.mark.slow  # Redis, workers and crawls

DELAY = 0.05
WORKER = "redelivery = 3.0\n"
# The coordinator's: a dead worker's request is sent again after redelivery + 2 deadlines + 5 s.
# Its pages committed every 2 s (the setting commit_seconds): what a killed coordinator asks again.
COORDINATOR = "redelivery = 3.0\ncommit_seconds = 2.0\n[crawl]\ndeadline = 5.0\ntimeout = 2.0\n"


def _crawl(cli: CLI, site: SiteServer, *extra: str, delay: float = DELAY) -> dict[str, Any]:
    out = cli.run("crawl", site.url("/"), "--allow-private", "--delay", str(delay), "--max-pages", "200",
                  "--json", *extra)
    return dict(json.loads(out.stdout))


def _stored(cli: CLI, netloc: str) -> list[str]:
    """The paths of the pages in the index (each stored once: a URL is a document's key)."""
    res = cli.json("search", "source:web", "--limit", "500")
    assert res["total"] == len(res["hits"])
    return sorted(h["uri"].split(netloc, 1)[1] for h in res["hits"])


def _gaps(site: SiteServer) -> list[float]:
    times = [t for t, *_ in site.log]
    return [b - a for a, b in itertools.pairwise(times)]


def _fetched_by(worker: Worker) -> int:
    """Requests the worker made (its log is verbose: a line for each task it received)."""
    return sum(1 for line in worker.log.read_text().splitlines()
               if "Task deskdex.fetch[" in line and line.endswith(" received"))


def test_workers_crawl_what_one_machine_crawls(tmp_path: Path, broker: str, workers: list[Worker]):
    workers.append(Worker(tmp_path, "w1", broker, WORKER, verbose=True, args=("--allow-private",)))
    workers.append(Worker(tmp_path, "w2", broker, WORKER, verbose=True, args=("--allow-private",)))
    remote = _cli(tmp_path, "coordinator", COORDINATOR)
    local = _cli(tmp_path, "single", COORDINATOR)
    with SiteServer(slow_seconds=1.5) as site:
        got = _crawl(remote, site, "--broker", broker)
        stored = _stored(remote, site.netloc)
        gaps = _gaps(site)
        remote_gets = site.paths("GET")
    with SiteServer(slow_seconds=1.5) as site2:
        expected = _crawl(local, site2)
        expected_stored = _stored(local, site2.netloc)

    assert stored == expected_stored and len(stored) >= 15, (stored, expected_stored)
    for key in ("fetched", "stored", "unchanged", "duplicates", "robots_excluded", "failed"):
        assert got[key] == expected[key], (key, got, expected)
    # Politeness held across the two workers: never two requests closer than the delay, robots.txt
    # read before any page, the disallowed path never asked.
    assert min(gaps) >= DELAY * 0.9, min(gaps)
    assert "/private/secret" not in remote_gets
    # The same near-duplicate pages were left out, and the same pages answer the same queries.
    for q in ("lorem", "page", "title:page", "calendar"):
        mine = [h["uri"].split(site.netloc, 1)[1] for h in remote.json("search", q, "--limit", "20")["hits"]]
        theirs = [h["uri"].split(site2.netloc, 1)[1] for h in local.json("search", q, "--limit", "20")["hits"]]
        assert sorted(mine) == sorted(theirs), q
    # Both workers made requests: the work was shared.
    assert _fetched_by(workers[0]) > 0 and _fetched_by(workers[1]) > 0
    # The crawl ended: nothing of it is left in Redis to resume.
    import redis

    assert not redis.Redis.from_url(broker).keys("deskdex:crawl:*")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server with its append-only file: restarted, it keeps the queues and the journal."""
    server = RedisServer(tmp_path, persist=True)
    yield server
    server.stop()


def test_killed_worker_and_restarted_broker_lose_nothing(tmp_path: Path, server: RedisServer, workers: list[Worker]):
    delay = 0.15
    workers.append(Worker(tmp_path, "w1", server.url, WORKER, verbose=True, args=("--allow-private",)))
    workers.append(Worker(tmp_path, "w2", server.url, WORKER, verbose=True, args=("--allow-private",)))
    remote = _cli(tmp_path, "coordinator", COORDINATOR)
    with SiteServer(kind="big", pages=60) as site:
        result: dict[str, Any] = {}

        def run() -> None:
            try:
                result["summary"] = _crawl(remote, site, "--broker", server.url, delay=delay)
            except subprocess.CalledProcessError as exc:
                result["error"] = exc.stderr

        crawling = threading.Thread(target=run)
        crawling.start()
        _wait_for_requests(site, 15)
        workers[0].proc.kill()  # SIGKILL: whatever it had taken is never answered
        _wait_for_requests(site, 30)
        server.stop()  # SIGTERM: its append-only file flushed, as a restarted machine's would be
        time.sleep(2.0)
        at_restart = len(site.log)
        server.start()
        crawling.join(300)
        assert not crawling.is_alive(), "the crawl never ended"
        assert "error" not in result, result.get("error")
        stored = _stored(remote, site.netloc)
        gaps = _gaps(site)
        log = site.paths("GET")
        assert len(log) > at_restart + 10, (at_restart, len(log))  # the faults came in the middle
    with SiteServer(kind="big", pages=60) as site2:
        single = _cli(tmp_path, "single", COORDINATOR)
        _crawl(single, site2, delay=0.01)
        expected = _stored(single, site2.netloc)
    assert stored == expected and len(stored) >= 30, (stored, expected)  # nothing lost, nothing doubled
    assert min(gaps) >= delay * 0.9, (min(gaps), site.log[-20:])
    # At most the request the killed worker had taken was made twice; nothing else.
    assert len(log) - len(set(log)) <= 1, sorted(p for p in log if log.count(p) > 1)


def _wait_for_requests(site: SiteServer, n: int) -> None:
    deadline = time.monotonic() + 60
    while len(site.log) < n:
        assert time.monotonic() < deadline, f"only {len(site.log)} requests"
        time.sleep(0.02)


def test_a_crawl_resumes_after_every_process_stopped(tmp_path: Path, server: RedisServer, workers: list[Worker]):
    import redis

    delay = 0.1
    workers.append(Worker(tmp_path, "w1", server.url, WORKER, args=("--allow-private",)))
    remote = _cli(tmp_path, "coordinator", COORDINATOR)
    with SiteServer(kind="big", pages=60) as site:
        command = [DESKDEX, "crawl", site.url("/"), "--allow-private", "--delay", str(delay), "--broker",
                   server.url, "--json"]
        env = dict(os.environ, DESKDEX_HOME=str(remote.home), NO_COLOR="1")
        first = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_for_requests(site, 45)  # past a commit of the pages (every 2 s)
        # Every process stops at once: the coordinator and the worker killed, Redis shut down.
        first.kill()
        workers[0].proc.kill()
        first.communicate()
        before = len(site.log)
        state = redis.Redis.from_url(server.url)
        queued = sum(state.hlen(k) for k in state.keys("deskdex:crawl:*:queue"))
        assert queued > 0
        server.stop()
        server.start()
        workers.append(Worker(tmp_path, "w2", server.url, WORKER, args=("--allow-private",)))
        summary = json.loads(remote.run("crawl", site.url("/"), "--allow-private", "--delay", str(delay),
                                        "--broker", server.url, "--json").stdout)
        stored = _stored(remote, site.netloc)
        pages_after = [p for _, m, p, _ in site.log[before:] if p.startswith("/p/")]
        gaps = _gaps(site)
    with SiteServer(kind="big", pages=60) as site2:
        single = _cli(tmp_path, "single", COORDINATOR)
        _crawl(single, site2, delay=0.01)
        expected = _stored(single, site2.netloc)
    assert stored == expected, (stored, expected)  # nothing lost
    # Taken up where it was: the pages stored before the last commit are not asked again, and the
    # seed's first page is not where the second run began.
    assert len(pages_after) < len(expected) - 10, (len(pages_after), len(expected))
    assert summary["fetched"] <= len(pages_after), summary  # the second run's counters are its own
    assert min(gaps[:before - 1] + gaps[before:]) >= delay * 0.9
    assert not redis.Redis.from_url(server.url).keys("deskdex:crawl:*")  # it ended: nothing left to resume


def test_the_daemon_crawls_through_the_workers(tmp_path: Path, broker: str, workers: list[Worker]):
    """`deskdex crawl URL` beside a daemon with the setting broker: the daemon takes the crawl and
    its requests are made by the workers; `deskdex status` counts the crawl queues."""
    from .daemon_fixture import DaemonProcess

    workers.append(Worker(tmp_path, "w1", broker, WORKER, verbose=True, args=("--allow-private",)))
    docs = tmp_path / "docs"
    docs.mkdir()
    daemon = DaemonProcess(tmp_path / "daemon-home", [docs], extra_config=f'broker = "{broker}"\n' + COORDINATOR)
    daemon.start()
    try:
        with SiteServer(kind="big", pages=12) as site:
            cli = CLI(daemon.home)
            summary = _crawl(cli, site)
            assert summary["stored"] == 12, summary
            assert len(_stored(cli, site.netloc)) == 12
            # Every request but robots.txt (read by the coordinator: one set of rules for the
            # cluster) was made by the worker: the pages and the guessed /sitemap.xml.
            requests = site.paths()
            assert requests.count("/robots.txt") == 1
            assert _fetched_by(workers[0]) == len(requests) - 1, requests
        cluster = cli.json("status")["cluster"]
        assert set(cluster["crawl_queued"]) == {str(k) for k in range(8)} and not any(cluster["crawl_queued"].values())
        assert "crawl requests queued" in cli.run("status").stdout
    finally:
        daemon.stop()



def _linked_sites(stack: Any, pages: int) -> list[SiteServer]:
    """At least three test sites linking to each other, of both shards of two: those of the seed's
    (the first's) shard reached from it, the others only by being handed over."""
    from deskdex.webcrawl.urls import shard_of, site_of

    sites: list[SiteServer] = []
    while len(sites) < 3 or len({shard_of(site_of(s.url("/")), 2) for s in sites}) < 2:
        assert len(sites) < 30
        sites.append(stack.enter_context(SiteServer(kind="big", pages=pages, seed=len(sites))))
    for s in sites:
        s.links_to = [o.url("/") for o in sites if o is not s]
    return sites


def _shard_crawl(home: CLI, seed: str, shard: int, delay: float, broker: str) -> subprocess.Popen[str]:
    """`deskdex crawl SEED --shard I/2 --broker` in a process of its own."""
    return subprocess.Popen([DESKDEX, "crawl", seed, "--scope", "domain", "--allow-private", "--delay", str(delay),
                             "--shard", f"{shard}/2", "--broker", broker, "--json"],
                            env=dict(os.environ, DESKDEX_HOME=str(home.home), NO_COLOR="1"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _ended(proc: subprocess.Popen[str], timeout: float = 240) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return dict(json.loads(out), log=err)


def _web_uris(homes: list[CLI]) -> list[str]:
    return sorted(h["uri"] for home in homes for h in home.json("search", "source:web", "--limit", "500")["hits"])


def _single(tmp_path: Path, seed: SiteServer) -> list[str]:
    """What one machine stores crawling from ``seed``."""
    single = _cli(tmp_path, "single", COORDINATOR)
    _crawl(single, seed, "--scope", "domain")
    return _web_uris([single])


def test_shards_of_a_crawl_hand_each_other_their_links(tmp_path: Path, broker: str, workers: list[Worker]):
    """Two coordinators, `deskdex crawl --shard 0/2` and `1/2` with the same seed, each fetching the
    sites whose host hashes to it: a link to a site of the other shard is handed over through Redis,
    so together they store what one machine stores from the seed, and both end."""
    from contextlib import ExitStack

    from deskdex.webcrawl.urls import shard_of, site_of

    delay = 0.05
    workers.append(Worker(tmp_path, "w1", broker, WORKER, args=("--allow-private",), concurrency=2))
    with ExitStack() as stack:
        sites = _linked_sites(stack, 8)
        seed = sites[0].url("/")
        homes = [_cli(tmp_path, f"shard{i}", COORDINATOR) for i in range(2)]
        procs = [_shard_crawl(h, seed, i, delay, broker) for i, h in enumerate(homes)]
        outs = [_ended(p) for p in procs]
        gaps = [min(_gaps(s), default=1.0) for s in sites]
        for s in sites:
            s.log.clear()
        stored = _web_uris(homes)
        expected = _single(tmp_path, sites[0])
    assert stored == expected and len(expected) >= 3 * 8, (len(stored), len(expected))
    assert not any("shards_left" in o for o in outs), outs
    # Each shard stored only its own sites' pages, and both stored some.
    for i, home in enumerate(homes):
        mine = [h["uri"] for h in home.json("search", "source:web", "--limit", "500")["hits"]]
        assert mine and all(shard_of(site_of(u), 2) == i for u in mine), (i, mine)
    assert min(gaps) >= delay * 0.9, gaps
    import redis

    assert not redis.Redis.from_url(broker).keys("deskdex:crawl:*")  # both ended: nothing left to resume


def test_a_shard_gone_silent_does_not_hold_the_others(tmp_path: Path, broker: str, workers: list[Worker]):
    """Shard 1 of a crawl is killed (SIGKILL) while it has work: shard 0, once it has nothing left,
    waits the setting crawl.shard_timeout for it and no longer, ends saying shard 1 has work left,
    and keeps what was handed to it. Each shard run again as its summary says takes up only where
    it was: together they store what one machine stores, and the crawl's state is gone at the end."""
    from contextlib import ExitStack

    import redis

    from deskdex.clients.crawl import format_summary
    from deskdex.webcrawl.urls import shard_of, site_of

    timeout = 4.0
    config = COORDINATOR + f"shard_timeout = {timeout}\n"  # under COORDINATOR's [crawl]
    workers.append(Worker(tmp_path, "w1", broker, WORKER, args=("--allow-private",), concurrency=2))
    with ExitStack() as stack:
        sites = _linked_sites(stack, 10)
        # Seeded on one of shard 0's sites: shard 1's are reached only through what shard 0 hands it.
        first_site = next(s for s in sites if shard_of(site_of(s.url("/")), 2) == 0)
        seed = first_site.url("/")
        homes = [_cli(tmp_path, f"shard{i}", config) for i in range(2)]
        procs = [_shard_crawl(h, seed, i, 0.3, broker) for i, h in enumerate(homes)]
        # Shard 1 is killed once it has fetched some of its own sites' pages, with more queued.
        theirs = [s for s in sites if shard_of(site_of(s.url("/")), 2) == 1]
        deadline = time.monotonic() + 120
        while sum(1 for s in theirs for _, _, path, _ in s.log if path.startswith("/p/")) < 3:
            assert time.monotonic() < deadline and procs[1].poll() is None, "shard 1 fetched nothing"
            time.sleep(0.05)
        procs[1].kill()
        killed = time.monotonic()
        procs[1].communicate()
        first = _ended(procs[0])
        waited = time.monotonic() - killed
        assert "1" in first.get("shards_left", {}), first["log"][-3000:]
        assert "shard 1 of this crawl went silent with work" in format_summary(first)
        # Not before shard 1 was silent for the timeout (its last word up to a quarter of it before
        # the kill, the broker's clock in whole seconds), and not much after.
        assert timeout - 2.5 <= waited < timeout + 60, waited
        r = redis.Redis.from_url(broker)
        assert r.keys("deskdex:crawl:*"), "shard 0 kept nothing of the crawl"
        rounds = [first]
        left = set(first["shards_left"])
        while left:
            assert len(rounds) < 6, rounds
            shard = int(min(left))
            got = _ended(_shard_crawl(homes[shard], seed, shard, 0.05, broker))
            rounds.append(got)
            left = (left - {str(shard)}) | set(got.get("shards_left", {}))
        stored = _web_uris(homes)
        expected = _single(tmp_path, first_site)
    assert stored == expected and len(expected) >= 3 * 10, (len(stored), len(expected))
    for i, home in enumerate(homes):
        mine = [h["uri"] for h in home.json("search", "source:web", "--limit", "500")["hits"]]
        assert all(shard_of(site_of(u), 2) == i for u in mine), i
    assert not r.keys("deskdex:crawl:*"), r.keys("deskdex:crawl:*")  # over: nothing left to resume
    assert [k for k in r.keys("deskdex:crawlgroup:*") if not k.endswith(b":over")] == []


def test_crawl_shards_end_without_a_silent_one_and_lose_no_handed_link(tmp_path: Path, broker: str):
    """The shards' meeting point itself (cluster.crawling.Group through RedisJournal), on a real
    redis-server, with a timeout of 2 s: shard 0 alone waits while shard 1 may still start, then ends
    naming it with the link handed to it, keeping its seen URLs; shard 1 started later reads that
    link, is killed before it wrote it into its queue, and started again reads it again; once it
    stored it, the crawl is over on both and its state is gone. In a process of its own: on
    pytest's path, the repository's packaging/ hides the library kombu imports."""
    import sys

    script = f"""
import json, time, redis
from deskdex.cluster.crawling import Group, RedisJournal, _journal_keys
from deskdex.webcrawl.frontier import Request
r = redis.Redis.from_url({broker!r})
keys = [_journal_keys("c0"), _journal_keys("c1")]
def journal(i):
    return RedisJournal(r, f"c{{i}}", {broker!r}, Group(r, "g", i, 2, keys, 2.0))
out = {{}}
j0 = journal(0)
assert j0.resume() is None
j0.added(Request("http://zero.test/"))
j0.hand_over(1, Request("http://one.test/"))
assert j0.durable() == []
out["while_it_may_start"] = j0.idle()
time.sleep(3.5)
out["after_the_timeout"] = j0.idle()
j0.finished()
out["kept"] = sorted(k.decode() for k in r.keys("deskdex:crawl:c0:*"))
j1 = journal(1)
assert j1.resume() is None
out["read"] = [q.url for q in j1.durable()]
j1.group.stop()  # killed before its next write: what it read is still in its inbox
j1 = journal(1)
assert j1.resume() is None
again = j1.durable()
out["read_again"] = [q.url for q in again]
j1.added(again[0]); j1.done(again[0].url)
j1.durable()
out["ended"] = j1.idle()
j1.finished()
out["left"] = sorted(k.decode() for k in r.keys("deskdex:*"))
print(json.dumps(out))
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["while_it_may_start"] is None
    assert out["after_the_timeout"] == {"1": 1}
    assert out["kept"] == ["deskdex:crawl:c0:seen"]
    assert out["read"] == out["read_again"] == ["http://one.test/"]
    assert out["ended"] == {}
    assert out["left"] == ["deskdex:crawlgroup:g:over"]


def test_a_forged_or_repeated_request_is_not_made(tmp_path: Path, broker: str, workers: list[Worker]):
    """A request written to the broker by hand (no coordinator waits for it), or a second delivery
    of one already made, is dropped unmade; a worker without --allow-private refuses a loopback
    address whatever the request says. Sent from a process of its own: on pytest's path, the
    repository's packaging/ hides the library kombu imports."""
    import sys

    workers.append(Worker(tmp_path, "private", broker, WORKER, args=("--allow-private",)))
    with SiteServer(kind="big", pages=2) as site:
        forge = f"""
import json, sys, redis
from deskdex.cluster.app import FETCH_TASK, crawl_queue, make_app
from deskdex.cluster.wire import fetch_to_wire
from deskdex.converters import Limits
from deskdex.webcrawl.fetch import FetchSettings
from deskdex.webcrawl.frontier import Request
app = make_app({broker!r}, 300.0)
r = redis.Redis.from_url({broker!r}, socket_timeout=90)
msg = fetch_to_wire(Request({site.url("/p/1")!r}), None, FetchSettings(allow_private=True), 1 << 20, 0.0, Limits())
queue = crawl_queue({site.netloc!r})
# Forged: nobody opened its key.
app.send_task(FETCH_TASK, args=[msg, "deskdex:reply:test"], task_id="forged", queue=queue)
# Made once, then delivered again.
r.set("deskdex:fetch:twice", "open", ex=60)
app.send_task(FETCH_TASK, args=[msg, "deskdex:reply:test"], task_id="twice", queue=queue)
first = r.blpop(["deskdex:reply:test"], timeout=60)
app.send_task(FETCH_TASK, args=[msg, "deskdex:reply:test"], task_id="twice", queue=queue)
second = r.blpop(["deskdex:reply:test"], timeout=4)
print(json.dumps([json.loads(first[1])["id"] if first else None, second is not None]))
"""
        p = subprocess.run([sys.executable, "-c", forge], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == ["twice", False]  # one answer, to the request made once
        assert site.paths() == ["/p/1"]  # the forged one and the second delivery never reached the site
        time.sleep(1.0)
        assert site.paths() == ["/p/1"]

        # A worker without --allow-private, asked for a loopback address with allow_private: refused.
        workers[0].stop()
        workers.append(Worker(tmp_path, "public", broker, WORKER))
        asked = forge.split("# Forged")[0] + """
r.set("deskdex:fetch:private", "open", ex=60)
app.send_task(FETCH_TASK, args=[msg, "deskdex:reply:test"], task_id="private", queue=queue)
answer = r.blpop(["deskdex:reply:test"], timeout=60)
print(answer[1].decode() if answer else "")
"""
        p = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert p.returncode == 0 and p.stdout.strip(), p.stderr
        assert json.loads(p.stdout)["error"]["reason"] == "private_address"
        assert site.paths() == ["/p/1"]
