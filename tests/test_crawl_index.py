"""Crawled pages in the real index: `deskdex crawl` and the daemon's configured crawls, against a
real site on 127.0.0.1 (tests/webcrawl_site.py)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from .conftest import CLI
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess
from .webcrawl_site import SiteServer

pytestmark = pytest.mark.slow  # crawls a local site, then a daemon


def test_crawl_command_indexes_pages_searchable_as_web(cli: CLI):
    with SiteServer(kind="topic", pages=12) as site:
        out = cli.run("crawl", site.url("/"), "--allow-private", "--delay", "0.01", "--max-pages", "30", "--json")
        summary = json.loads(out.stdout)
        assert summary["stored"] >= 5, summary
        res = cli.json("search", "source:web")
        assert res["total"] == summary["stored"]
        hit = res["hits"][0]
        assert hit["uri"].startswith(site.url("/")) and hit["source"] == "web" and hit["title"]
        assert cli.json("search", "source:files")["total"] == 0
        # Again: this site sends no validators, so pages are fetched again, found unchanged by
        # their text, and nothing is stored twice (conditional requests: tests/test_webcrawl_crawl.py).
        again = json.loads(cli.run("crawl", site.url("/"), "--allow-private", "--delay", "0.01",
                                   "--max-pages", "30", "--json").stdout)
        assert again["stored"] == 0 and again["unchanged"] >= 5, again
        status = json.loads(cli.run("crawl", "status", "--json").stdout)
        site_status = next(iter(status["sites"].values())) if "sites" in status else status
        assert site_status, status
    with closing(sqlite3.connect(cli.home / "data" / "catalog.sqlite")) as db:
        assert db.execute("SELECT count(*) FROM web_versions").fetchone()[0] == summary["stored"]


@pytest.mark.timeout(BUSY_TIMEOUT)  # the daemon's waits are measured in daemon_fixture.Patience
def test_daemon_keeps_a_configured_site(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    with SiteServer(kind="topic", pages=12) as site:
        # A request's timeout is wall-clock time, which an idle-priority crawl thread starved by a
        # busy machine would race: headroom, as the speed of the crawl is not what is tested here.
        extra = ("[crawl]\ndelay = 0.01\nallow_private_addresses = true\nmax_pages = 20\ntimeout = 120.0\ndeadline = 600.0\n"
                 f"[[crawl.sites]]\nurl = \"{site.url('/')}\"\nscope = \"host\"\n")
        d = DaemonProcess(tmp_path / "home", [docs], extra_config=extra).start()
        try:
            # The catalog commits just before tantivy does: wait for the search to see the pages.
            # The crawl runs on an idle-priority thread: on a busy machine it takes what it takes.
            d.wait_for(lambda st: d.call("search", query="source:web", limit=1)["total"] >= 5,
                       what="the configured crawl")
            hits = d.call("search", query="source:web", limit=50)["hits"]
            assert all(h["uri"].startswith(site.url("/")) and h["source"] == "web" for h in hits)
        finally:
            d.stop()
