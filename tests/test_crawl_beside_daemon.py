"""`deskdex crawl` beside a running daemon, which holds the index's one writer lock: the read-only
commands read, a crawl is handed to the daemon (its progress followed, the same summary printed),
Ctrl-C stops it there, and `crawl add` takes effect at once. Real daemon processes, the real
command, a real site on 127.0.0.1 (tests/webcrawl_site.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from .conftest import CLI, DESKDEX, ROOT
from .daemon_fixture import BUSY_TIMEOUT, CLIENT_TIMEOUT, DaemonProcess
from .webcrawl_site import SiteServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]  # the daemon's waits are measured in daemon_fixture.Patience

# The daemon crawls on an idle-priority thread, which a busy machine may starve: its wall-clock
# time limits get headroom, as the speed of the crawl is not what is tested here.
CRAWL = "[crawl]\nallow_private_addresses = true\ntimeout = 120.0\ndeadline = 600.0\n"


def start_daemon(tmp_path: Path, crawl: str = CRAWL) -> tuple[DaemonProcess, CLI]:
    docs = tmp_path / "docs"
    docs.mkdir()
    home = tmp_path / "home"
    return DaemonProcess(home, [docs], extra_config=crawl).start(), CLI(home)


def popen_crawl(cli: CLI, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, DESKDEX_HOME=str(cli.home), NO_COLOR="1")
    return subprocess.Popen([DESKDEX, "crawl", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_crawl_commands_work_beside_a_running_daemon(tmp_path: Path):
    d, cli = start_daemon(tmp_path)
    try:
        # Read-only: no writer lock wanted, so none is waited for (this said "another deskdex
        # process (pid N) is writing").
        empty = json.loads(cli.run("crawl", "status", "--json").stdout)
        assert empty["collection"]["known"] == 0, empty
        with SiteServer(kind="topic", pages=12) as site:
            # A delay long enough that the crawl is still under way while others ask the daemon.
            crawl = popen_crawl(cli, site.url("/"), "--allow-private", "--delay", "0.3", "--max-pages", "12",
                                "--json")
            try:
                d.wait_for(lambda st: len(site.log) >= 3 or crawl.poll() is not None,
                           what="the crawl to start in the daemon")
                assert crawl.poll() is None, crawl.communicate()
                # A crawl over the socket holds no one up: searches and status are answered meanwhile.
                assert d.call("search", query="anything")["total"] >= 0
                assert d.call("status")["pid"] == d.proc.pid  # type: ignore[union-attr]
                assert crawl.poll() is None, "the crawl ended before the daemon was asked: no overlap shown"
                out, err = crawl.communicate(timeout=CLIENT_TIMEOUT)
            finally:
                if crawl.poll() is None:
                    crawl.kill()
                    crawl.communicate()
            assert crawl.returncode == 0, err
            summary = json.loads(out)
            # The same summary as without a daemon (tests/test_crawl_index.py).
            assert summary["stored"] >= 5 and summary["fetched"] >= summary["stored"], summary
            assert set(summary["sites"]) == {site.netloc}
            assert {"unchanged", "duplicates", "robots_excluded", "off_topic", "failed"} <= set(summary)
            # Stored by the daemon: searchable at once through it.
            assert d.call("search", query="source:web", limit=50)["total"] == summary["stored"]
            status = json.loads(cli.run("crawl", "status", "--json").stdout)
            assert status["sites"][site.netloc]["known"] >= summary["stored"], status
            assert status["sites"][site.netloc]["fetched"] == summary["fetched"], status
            # Without --json: the summary line a crawl without a daemon prints.
            again = cli.run("crawl", site.url("/"), "--allow-private", "--delay", "0.01", "--max-pages", "12")
            assert again.stdout.startswith("fetched ") and "stored 0, unchanged" in again.stdout, again.stdout
        assert d.call("status")["state"] in ("idle", "indexing")
    finally:
        assert d.stop() == 0


def test_ctrl_c_stops_the_crawl_in_the_daemon(tmp_path: Path):
    d, cli = start_daemon(tmp_path)
    try:
        # 200 pages 0.3 s apart: a minute to its end, so that a daemon slowed by a busy machine (it runs
        # at idle priority) still shows the crawl stopped far from its end (60 pages ran out once in CI).
        with SiteServer(kind="big", pages=200) as site:
            crawl = popen_crawl(cli, site.url("/"), "--allow-private", "--delay", "0.3", "--max-pages", "200")
            try:
                d.wait_for(lambda st: len(site.log) >= 3 or crawl.poll() is not None,
                           what="the crawl to start in the daemon")
                assert crawl.poll() is None, crawl.communicate()
                crawl.send_signal(signal.SIGINT)
                out, err = crawl.communicate(timeout=CLIENT_TIMEOUT)
            finally:
                if crawl.poll() is None:
                    crawl.kill()
                    crawl.communicate()
            assert crawl.returncode == 130, (out, err)
            assert "stopped" in err, err
            job = d.call("crawl_job", job=1)
            assert job["state"] == "cancelled", job
            requests = len(site.log)
            assert requests < 120, requests  # stopped, not run to its 200 pages
            # Once the job says so, the crawl has ended: nothing more reaches the site.
            d.call("status")
            assert len(site.log) == requests
    finally:
        assert d.stop() == 0


def test_crawl_add_takes_effect_in_the_running_daemon(tmp_path: Path):
    d, cli = start_daemon(tmp_path, CRAWL + "delay = 0.01\nmax_pages = 20\n")
    try:
        with SiteServer(kind="topic", pages=12) as site:
            assert d.call("search", query="source:web")["total"] == 0
            cli.run("crawl", "add", site.url("/"))
            # No restart: the daemon reads the [crawl] table again and crawls the new site.
            d.wait_for(lambda st: d.call("search", query="source:web", limit=1)["total"] >= 5,
                       what="the site added while the daemon runs")
            cli.run("crawl", "remove", site.url("/"))
            assert cli.run("crawl", "list").stdout == ""
    finally:
        assert d.stop() == 0


def test_crawl_op_arguments_are_checked_before_the_op_runs():
    from deskdex import protocol
    from deskdex.errors import BadArgs

    crawl, job = protocol.OPS["crawl"], protocol.OPS["crawl_job"]
    args = protocol.check_args(crawl, {"urls": ["http://example.org/"], "delay": 2})
    assert args["delay"] == 2.0 and isinstance(args["delay"], float)  # JSON writes 2.0 as 2
    assert args["scope"] is None and args["shard"] == "0/1" and args["topic_from"] is None
    assert protocol.check_args(job, {"job": 1})["wait"] == 0.0
    for op, bad in ((crawl, {"delay": True}), (crawl, {"delay": -1}), (crawl, {"scope": "planet"}),
                    (crawl, {"urls": [1]}), (crawl, {"max_pages": 0}), (job, {"job": 1, "wait": 11}),
                    (job, {"job": 0}), (job, {})):
        with pytest.raises(BadArgs):
            protocol.check_args(op, bad)
